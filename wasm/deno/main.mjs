// main.mjs: the presence core, built for GOOS=js, running in Deno against
// Redis with node-redis (npm `redis`, resolved from wasm/node_modules
// through Deno's npm support). Deno's permissions name exactly what it
// may touch: the module and wasm_exec.js to read, Redis to reach. See
// README.md.
//
//   npm ci --prefix wasm
//   deno run --allow-read --allow-net=127.0.0.1 --allow-env wasm/deno/main.mjs \
//     --wasm presence-js.wasm --wasm-exec "$(go env GOROOT)/lib/wasm/wasm_exec.js" \
//     --redis 127.0.0.1:6379
//
// With --sequence FILE it runs the lanes' scripted sequence instead and
// prints the module's final response to each request, one per line.
import { parseArgs } from "node:util";
import { toFileUrl, resolve } from "./path.mjs";
import { PlanHost, runSequence } from "../js/plans.mjs";
import { connect, pipelineOf } from "../js/node-redis.mjs";

const { values: opt } = parseArgs({
  args: Deno.args,
  options: {
    wasm: { type: "string", default: "presence-js.wasm" },
    "wasm-exec": { type: "string" },
    redis: { type: "string", default: "127.0.0.1:6379" },
    prefix: { type: "string", default: "presence-deno" },
    sequence: { type: "string" },
  },
});
if (!opt["wasm-exec"]) {
  console.error("--wasm-exec: the path of wasm_exec.js, from $(go env GOROOT)/lib/wasm");
  Deno.exit(2);
}

// Go's JS support, then the module; its main defines globalThis.presence.
await import(toFileUrl(resolve(opt["wasm-exec"])));
const go = new globalThis.Go();
const { instance } = await WebAssembly.instantiate(await Deno.readFile(opt.wasm), go.importObject);
go.run(instance); // runs main until it blocks; the exported functions stay callable

const client = await connect(opt.redis);
const engine = globalThis.presence.newInstance();
let code = 0;
try {
  const pipeline = pipelineOf(client);
  if (opt.sequence) {
    const host = new PlanHost({ call: (r) => engine.call(r), pipeline });
    const lines = await runSequence(JSON.parse(await Deno.readTextFile(opt.sequence)), host);
    await Deno.stdout.write(new TextEncoder().encode(lines.join("\n") + "\n"));
  } else {
    const host = new PlanHost({ call: (r) => engine.call(r), pipeline, now: Date.now });
    console.log("deno", Deno.version.deno, "abi", globalThis.presence.abiVersion);
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
  engine.release();
  await client.quit();
}
Deno.exit(code);
