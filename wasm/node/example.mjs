// example.mjs: the presence core, built for GOOS=js, running in Node.js
// against a Redis server; it runs a heartbeat and a count. See README.md.
//
//   node example.mjs --wasm presence-js.wasm \
//     --wasm-exec "$(go env GOROOT)/lib/wasm/wasm_exec.js" --redis 127.0.0.1:6379
import fs from "node:fs";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { SyncRedis, scriptRunner } from "./redis-sync.mjs";

const { values: opt } = parseArgs({
  options: {
    wasm: { type: "string", default: "presence-js.wasm" },
    "wasm-exec": { type: "string" },
    redis: { type: "string", default: "127.0.0.1:6379" },
    prefix: { type: "string", default: "presence-node" },
  },
});
if (!opt["wasm-exec"]) {
  console.error("--wasm-exec: the path of wasm_exec.js, from $(go env GOROOT)/lib/wasm");
  process.exit(2);
}

// Load Go's JS support, then the module; its main defines globalThis.presence.
globalThis.fs ??= fs; // wasm_exec.js writes the module's stdout and stderr through it
await import(pathToFileURL(opt["wasm-exec"]).href);
const go = new globalThis.Go();
const { instance } = await WebAssembly.instantiate(fs.readFileSync(opt.wasm), go.importObject);
go.run(instance); // runs main until it blocks; the exported functions stay callable

const redis = new SyncRedis(opt.redis);
const engine = globalThis.presence.newInstance(scriptRunner(redis));

// call sends one ABI request (see ABI.md) and returns the result, or throws
// the error the module answered.
function call(op, args) {
  const resp = JSON.parse(engine.call(JSON.stringify({ v: 1, op, now: Date.now(), args })));
  if (resp.error) throw new Error(`${op}: [${resp.error.code}] ${resp.error.message}`);
  return resp.result;
}

let code = 0;
try {
  console.log("abi", globalThis.presence.abiVersion);
  console.log("configure", JSON.stringify(call("configure", { prefix: opt.prefix })));
  const ack = call("heartbeat", { user: "alice", device: "web-1", kind: "web", active: true });
  console.log("heartbeat", JSON.stringify(ack));
  const st = call("status", { user: "alice" });
  console.log("status", st.status, st.devices.map((d) => `${d.id}:${d.state}`).join(" "));
  const room = { class: "room", id: "lobby" };
  call("touch_batch", { touches: ["alice", "bob", "carol"].map((member) => ({ scope: room, member })) });
  console.log("count", JSON.stringify(call("count", { scope: room })));
  // Bad input is refused with the core's error, before anything reaches
  // Redis. (A heartbeat Redis refuses, such as one with a superseded
  // token, is an ack carrying the error instead, as in Go's Ack.Err.)
  try {
    const ack = call("heartbeat", { user: "", device: "web-1", kind: "web" });
    console.log("refused heartbeat:", `[${ack.error.code}] ${ack.error.message}`);
  } catch (err) {
    console.log("refused", err.message);
  }
  console.log("redis commands", redis.calls);
} catch (err) {
  console.error(err.message);
  code = 1;
} finally {
  engine.release();
  await redis.close();
}
process.exit(code);
