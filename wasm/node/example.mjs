// example.mjs: the presence core, built for GOOS=js, running in Node.js
// against a Redis server on the event loop: the module answers each
// request at once, with a result or the script calls a plan waits for;
// this host sends those calls to Redis with await and resumes the plan
// (ABI v2, see ../ABI.md). See README.md.
//
//   node example.mjs --wasm presence-js.wasm \
//     --wasm-exec "$(go env GOROOT)/lib/wasm/wasm_exec.js" --redis 127.0.0.1:6379
import fs from "node:fs";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { AsyncRedis } from "./redis-async.mjs";

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

const redis = new AsyncRedis(opt.redis);
const engine = globalThis.presence.newInstance();
const text = new TextDecoder();
let rounds = 0;

// send hands the module one request (JSON text) and parses its response.
const send = (request) => JSON.parse(text.decode(engine.call(request)));

// run runs operations ([op, args] pairs) as plans in flight together: each
// round sends the calls of every plan still waiting in one pipeline, then
// resumes each plan with its own results. It resolves to one response per
// operation ({result, messages} or {error}).
async function run(ops) {
  const out = new Array(ops.length);
  let live = [];
  ops.forEach(([op, args], i) => {
    const resp = send(JSON.stringify({ v: 2, op, now: Date.now(), args }));
    if (resp.calls) live.push({ i, resp });
    else out[i] = resp;
  });
  while (live.length > 0) {
    const commands = live.flatMap(({ resp }) =>
      resp.calls.map((c) =>
        c.src !== undefined
          ? ["EVAL", c.src, String(c.keys.length), ...c.keys, ...c.args]
          : ["EVALSHA", c.sha, String(c.keys.length), ...c.keys, ...c.args],
      ),
    );
    rounds++;
    const results = await redis.pipeline(commands);
    const now = Date.now();
    let at = 0;
    const next = [];
    for (const { i, resp } of live) {
      const mine = results.slice(at, at + resp.calls.length);
      at += resp.calls.length;
      const r = send(`{"v":2,"op":"resume","now":${now},"args":{"plan":${resp.plan},"results":[${mine.join(",")}]}}`);
      if (r.calls) next.push({ i, resp: r });
      else out[i] = r;
    }
    live = next;
  }
  return out;
}

// call runs one operation and returns its result, or throws the error the
// module answered.
async function call(op, args) {
  const [resp] = await run([[op, args]]);
  if (resp.error) throw new Error(`${op}: [${resp.error.code}] ${resp.error.message}`);
  return resp.result;
}

let code = 0;
try {
  console.log("abi", globalThis.presence.abiVersion);
  console.log("configure", JSON.stringify(await call("configure", { prefix: opt.prefix })));
  const ack = await call("heartbeat", { user: "alice", device: "web-1", kind: "web", active: true });
  console.log("heartbeat", JSON.stringify(ack));
  const st = await call("status", { user: "alice" });
  console.log("status", st.status, st.devices.map((d) => `${d.id}:${d.state}`).join(" "));
  // Three plans in flight at once: their calls share round trips.
  const before = rounds;
  const beats = await run(["bob", "carol", "dave"].map((user) => ["heartbeat", { user, device: "ios", kind: "ios" }]));
  console.log("together", beats.filter((r) => r.result && r.result.token).length, "plans in", rounds - before, "rounds");
  const room = { class: "room", id: "lobby" };
  await call("touch_batch", { touches: ["alice", "bob", "carol"].map((member) => ({ scope: room, member })) });
  console.log("count", JSON.stringify(await call("count", { scope: room })));
  // Bad input is refused with the core's error, before anything reaches
  // Redis. (A heartbeat Redis refuses, such as one with a superseded
  // token, is an ack carrying the error instead, as in Go's Ack.Err.)
  try {
    const ack = await call("heartbeat", { user: "", device: "web-1", kind: "web" });
    console.log("refused heartbeat:", `[${ack.error.code}] ${ack.error.message}`);
  } catch (err) {
    console.log("refused", err.message);
  }
  // A resume of a plan that is not in flight is a typed error, not a trap.
  const bad = send(`{"v":2,"op":"resume","now":${Date.now()},"args":{"plan":999999,"results":[]}}`);
  console.log("bad resume", bad.error.code);
  console.log("redis commands", redis.calls);
} catch (err) {
  console.error(err.message);
  code = 1;
} finally {
  engine.release();
  redis.close();
}
process.exit(code);
