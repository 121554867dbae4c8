// main.mjs: the presence module (the WASI reactor, wasm/module) running
// in Deno against Redis with node-redis (npm `redis`, resolved from
// wasm/node_modules through Deno's npm support). Deno's permissions name
// exactly what it may touch: the module to read, Redis to reach. See
// README.md.
//
//   npm ci --prefix wasm
//   deno run --allow-read --allow-net=127.0.0.1 --allow-env wasm/deno/main.mjs \
//     --wasm presence.wasm --redis 127.0.0.1:6379
//
// With --sequence FILE it runs the lanes' scripted sequence instead and
// prints the module's final response to each request, one per line; with
// --json every message crosses as JSON.
import { parseArgs } from "node:util";
import { PlanHost, runSequence } from "../js/plans.mjs";
import { Reactor } from "../js/reactor.mjs";
import { connect, pipelineOf } from "../js/node-redis.mjs";

const { values: opt } = parseArgs({
  args: Deno.args,
  options: {
    wasm: { type: "string", default: "presence.wasm" },
    redis: { type: "string", default: "127.0.0.1:6379" },
    prefix: { type: "string", default: "presence-deno" },
    sequence: { type: "string" },
    json: { type: "boolean", default: false },
  },
});

// Compile the module once; a Reactor is one instance of it.
const reactor = new Reactor(new WebAssembly.Module(await Deno.readFile(opt.wasm)));
const call = (r) => reactor.call(r);
const compact = !opt.json;
const client = await connect(opt.redis);
let code = 0;
try {
  const pipeline = pipelineOf(client);
  if (opt.sequence) {
    const host = new PlanHost({ call, pipeline, compact });
    const lines = await runSequence(JSON.parse(await Deno.readTextFile(opt.sequence)), host);
    await Deno.stdout.write(new TextEncoder().encode(lines.join("\n") + "\n"));
  } else {
    const host = new PlanHost({ call, pipeline, now: Date.now, compact });
    console.log("deno", Deno.version.deno, "abi", reactor.exports.presence_abi_version());
    await host.do("configure", { prefix: opt.prefix });
    const ack = await host.do("heartbeat", { user: "alice", device: "web-1", kind: "web", active: true });
    console.log("heartbeat", JSON.stringify(ack.result));
    const st = (await host.do("status", { user: "alice" })).result;
    console.log("status", st.status, st.devices.map((d) => `${d.id}:${d.state}`).join(" "));
    const room = { class: "room", id: "lobby" };
    await host.do("touch", { scope: room, member: "alice" });
    console.log("count", JSON.stringify((await host.do("count", { scope: room })).result));
  }
} catch (err) {
  console.error(err.stack ?? err.message);
  code = 1;
} finally {
  await client.quit();
}
Deno.exit(code);
