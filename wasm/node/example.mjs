// example.mjs: the presence module (the WASI reactor, wasm/module)
// running in Node.js against Redis on the event loop, with node-redis (the
// `redis` npm package). The module answers each request at once, with a
// result or the script calls a plan waits for; this host sends those
// calls to Redis with await and resumes the plan (ABI v2, see ../ABI.md).
// See README.md.
//
//   npm ci --prefix wasm
//   node wasm/node/example.mjs --wasm presence.wasm --redis 127.0.0.1:6379
//
// With --sequence FILE it runs the lanes' scripted sequence instead and
// prints the module's final response to each request, one per line; with
// --json every message crosses as JSON (the compact form carries the hot
// path otherwise).
import fs from "node:fs";
import { parseArgs } from "node:util";
import { PlanHost, runSequence } from "../js/plans.mjs";
import { Reactor } from "../js/reactor.mjs";
import { connect, pipelineOf } from "../js/node-redis.mjs";

const { values: opt } = parseArgs({
  options: {
    wasm: { type: "string", default: "presence.wasm" },
    redis: { type: "string", default: "127.0.0.1:6379" },
    prefix: { type: "string", default: "presence-node" },
    sequence: { type: "string" },
    json: { type: "boolean", default: false },
  },
});

// Compile the module once; a Reactor is one instance of it.
const reactor = new Reactor(new WebAssembly.Module(fs.readFileSync(opt.wasm)));
const client = await connect(opt.redis);
const call = (r) => reactor.call(r);
const compact = !opt.json;
let code = 0;
try {
  if (opt.sequence) {
    const host = new PlanHost({ call, pipeline: pipelineOf(client), compact });
    const lines = await runSequence(JSON.parse(fs.readFileSync(opt.sequence, "utf8")), host);
    process.stdout.write(lines.join("\n") + "\n");
  } else {
    await example(new PlanHost({ call, pipeline: pipelineOf(client), now: Date.now, compact }));
  }
} catch (err) {
  console.error(err.stack ?? err.message);
  code = 1;
} finally {
  await client.quit();
}
process.exit(code);

async function example(host) {
  console.log("abi", reactor.exports.presence_abi_version());
  const cfg = await host.do("configure", { prefix: opt.prefix });
  console.log("configure", JSON.stringify(cfg.result));
  const ack = await host.do("heartbeat", { user: "alice", device: "web-1", kind: "web", active: true });
  console.log("heartbeat", JSON.stringify(ack.result));
  const st = (await host.do("status", { user: "alice" })).result;
  console.log("status", st.status, st.devices.map((d) => `${d.id}:${d.state}`).join(" "));
  // Three plans in flight at once: their calls share round trips.
  const before = host.rounds;
  const now = Date.now();
  const beats = await host.run(["bob", "carol", "dave"].map((user) => ({ v: 2, op: "heartbeat", now, args: { user, device: "ios", kind: "ios" } })));
  console.log("together", beats.filter((r) => JSON.parse(r).result?.token).length, "plans in", host.rounds - before, "rounds");
  const room = { class: "room", id: "lobby" };
  await host.do("touch_batch", { touches: ["alice", "bob", "carol"].map((member) => ({ scope: room, member })) });
  console.log("count", JSON.stringify((await host.do("count", { scope: room })).result));
  // Bad input is refused with the core's error, before anything reaches Redis.
  try {
    await host.do("heartbeat", { user: "", device: "web-1", kind: "web" });
  } catch (err) {
    console.log("refused", err.message);
  }
  // A resume of a plan that is not in flight is a typed error, not a trap.
  const bad = JSON.parse(host.send(`{"v":2,"op":"resume","now":${Date.now()},"args":{"plan":999999,"results":[]}}`));
  console.log("bad resume", bad.error.code);
}
