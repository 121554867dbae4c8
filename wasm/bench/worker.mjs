// worker.mjs: the presence module's benchmark in workerd, started by
// `go run ./wasm/bench` with config.capnp. Every script call is answered
// from the replies main.go recorded (the REPLIES binding), so no request
// reaches Redis. A Worker's clocks stand still while it computes, so
// main.go measures each request's CPU from outside, from /proc:
//
//   GET /noop                 nothing: the cost of a request itself
//   GET /init                 instantiate the module, initialise Go's runtime
//   GET /configure            configure the instance's engine (again:
//                             replace it)
//   GET /beat                 one heartbeat
//   GET /bench?op=heartbeat|heartbeat_batch&n=N
//                             N heartbeats, or N batches of 100
import presenceWasm from "./presence.wasm";
import { PlanHost } from "../js/plans.mjs";
import { Reactor } from "../js/reactor.mjs";
import { beat, config, replayOf, T0 } from "./shared.mjs";

let host = null;
let reactor = null;
let now = T0;

function check(resp) {
  if (!resp.startsWith('{"v":2,"result"')) throw new Error(`bench: ${resp}`);
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    try {
      switch (url.pathname) {
        case "/noop":
          break;
        case "/init":
          reactor = new Reactor(presenceWasm);
          host = new PlanHost({ call: (r) => reactor.call(r), pipeline: replayOf(env.REPLIES), now: () => now, compact: true });
          break;
        case "/configure":
          await host.do("configure", config, now);
          break;
        case "/beat":
          check((await host.run([{ v: 2, op: "heartbeat", now, args: beat(0) }]))[0]);
          break;
        case "/bench": {
          const op = url.searchParams.get("op");
          const n = Number(url.searchParams.get("n"));
          const args = op === "heartbeat" ? beat(0) : { beats: Array.from({ length: 100 }, (_, i) => beat(i)) };
          for (let i = 0; i < n; i++) {
            now += 1000;
            check((await host.run([{ v: 2, op, now, args }]))[0]);
          }
          break;
        }
        default:
          return new Response("not found\n", { status: 404 });
      }
      return new Response("ok\n");
    } catch (err) {
      return new Response(`error: ${err.stack ?? err}\n`, { status: 500 });
    }
  },
};
