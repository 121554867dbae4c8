// run.mjs: one run of the presence module's benchmark in Node.js or Deno,
// started by `go run ./wasm/bench` (npm run --prefix wasm bench), which
// records Redis's replies first: every script call is answered from them,
// so that only the module, the crossing and the host's plan loop are
// measured, never Redis or a network.
//
//   node run.mjs --wasm presence.wasm --replies replies.json --n 2000 [--warm 20000 --warm-batches 1000]
//   deno run --allow-all run.mjs --wasm … --replies … --n …
//
// Prints one JSON line: the CPU of the first request of a fresh process
// (instantiating the compiled module, configuring, one heartbeat), of its
// configure and of a second one, and per beat of single heartbeats and of
// batches of 100.
// CPU is the process's, every thread (getrusage).
import fs from "node:fs";
import process from "node:process";
import { parseArgs } from "node:util";
import { PlanHost } from "../js/plans.mjs";
import { Reactor } from "../js/reactor.mjs";
import { beat, config, replayOf, T0 } from "./shared.mjs";

const { values: opt } = parseArgs({
  args: globalThis.Deno ? globalThis.Deno.args : process.argv.slice(2),
  options: {
    wasm: { type: "string" },
    replies: { type: "string" },
    n: { type: "string", default: "2000" },
    warm: { type: "string", default: "20000" },
    "warm-batches": { type: "string", default: "1000" },
  },
});

// cpuNs is the CPU time of every thread of this process so far, in ns, as
// getrusage counts it: unlike /proc's schedstat, which moves for a running
// thread only at the scheduler's ticks, it includes the calling thread's
// time up to now, which a few milliseconds of configure need.
function cpuNs() {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

const replay = replayOf(JSON.parse(fs.readFileSync(opt.replies, "utf8")));
const bytes = fs.readFileSync(opt.wasm);
const c0 = cpuNs();
const module = new WebAssembly.Module(bytes);
const c1 = cpuNs();
const reactor = new Reactor(module);
let now = T0;
const host = new PlanHost({ call: (r) => reactor.call(r), pipeline: replay, now: () => now, compact: true });
const c2 = cpuNs();
await host.do("configure", config, now);
const c3 = cpuNs();
const single = { v: 2, op: "heartbeat", now, args: beat(0) };
const batch = { v: 2, op: "heartbeat_batch", now, args: { beats: Array.from({ length: 100 }, (_, i) => beat(i)) } };
const check = (resp) => {
  if (!resp.startsWith('{"v":2,"result"')) throw new Error(`bench: ${resp}`);
};
check((await host.run([single]))[0]);
const c4 = cpuNs();
// Configuring again: what is left of configure once the module's code
// for it is compiled.
await host.do("configure", config, now);
const c5 = cpuNs();

async function measure(req, n, warm) {
  // Warm up: V8 compiles hot functions again, optimised, in the background.
  for (let i = 0; i < warm; i++) check((await host.run([req]))[0]);
  const c = cpuNs();
  for (let i = 0; i < n; i++) {
    now += 1000;
    req.now = now;
    check((await host.run([req]))[0]);
  }
  return cpuNs() - c;
}

const n = Number(opt.n);
const nb = Math.max(1, Math.floor(n / 100));
const singleNs = (await measure(single, n, Number(opt.warm))) / n;
const batchNs = (await measure(batch, nb, Number(opt["warm-batches"]))) / (nb * 100);
console.log(
  JSON.stringify({
    compile_cpu_ms: (c1 - c0) / 1e6,
    first_request_cpu_ms: (c4 - c1) / 1e6,
    init_ms: (c2 - c1) / 1e6,
    configure_ms: (c3 - c2) / 1e6,
    first_beat_ms: (c4 - c3) / 1e6,
    reconfigure_ms: (c5 - c4) / 1e6,
    single_cpu_ns: singleNs,
    batch_cpu_ns: batchNs,
  }),
);
