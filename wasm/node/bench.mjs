// bench.mjs: the cost of a heartbeat through the presence module in
// Node.js, without Redis: after warming up against a real server, every
// call is answered from a cache of the replies the server gave to the
// first call of the same shape (as wasm/host's replay store does), so
// that only the module, the crossing and the host's plan loop are
// measured. Prints one JSON line per mode: CPU and wall nanoseconds per
// beat.
//
//   node wasm/node/bench.mjs --wasm presence-js.wasm \
//     --wasm-exec "$(go env GOROOT)/lib/wasm/wasm_exec.js" --redis 127.0.0.1:6380 --n 2000
import fs from "node:fs";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { PlanHost } from "../js/plans.mjs";
import { connect, pipelineOf } from "../js/node-redis.mjs";

const { values: opt } = parseArgs({
  options: {
    wasm: { type: "string", default: "presence-js.wasm" },
    "wasm-exec": { type: "string" },
    redis: { type: "string", default: "127.0.0.1:6379" },
    n: { type: "string", default: "2000" },
  },
});
globalThis.fs ??= fs;
await import(pathToFileURL(opt["wasm-exec"]).href);
const go = new globalThis.Go();
const { instance } = await WebAssembly.instantiate(fs.readFileSync(opt.wasm), go.importObject);
go.run(instance);

const client = await connect(opt.redis);
const live = pipelineOf(client);
const cache = new Map();
const shape = (c) => `${c[0] === "EVAL" ? c[1] : c[1]}/${c.length}`;
// replay answers each command from the cache, asking Redis the first time.
async function replay(commands) {
  const out = [];
  for (const c of commands) {
    const key = shape(c);
    if (!cache.has(key)) {
      const [r] = await live([c]);
      if (!r.startsWith('{"error"')) cache.set(key, r);
      out.push(r);
      continue;
    }
    out.push(cache.get(key));
  }
  return out;
}

const engine = globalThis.presence.newInstance();
let now = 1767225600000;
const host = new PlanHost({ call: (r) => engine.call(r), pipeline: replay, now: () => now });
await host.do("configure", { prefix: "bench" }, now);
const beat = (i) => ({ user: `user-${i}`, device: "web", kind: "web", token: "0123456789abcdef" });
const batch = Array.from({ length: 100 }, (_, i) => beat(i));

async function measure(mode, n, perBeat, once) {
  for (let i = 0; i < 50; i++) await once(); // warm up: fill the cache, compile
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    now += 1000;
    await once();
  }
  const wall = Number(process.hrtime.bigint() - t0);
  const cpu = process.cpuUsage(cpu0);
  const beats = n * perBeat;
  console.log(JSON.stringify({ mode, beats, cpu_ns_per_beat: ((cpu.user + cpu.system) * 1000) / beats, wall_ns_per_beat: wall / beats }));
}

const n = Number(opt.n);
await measure("single", n, 1, () => host.do("heartbeat", beat(0), now));
await measure("batch", Math.max(1, Math.floor(n / 100)), 100, () => host.do("heartbeat_batch", { beats: batch }, now));
engine.release();
await client.quit();
process.exit(0);
