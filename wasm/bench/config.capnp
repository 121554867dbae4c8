# workerd configuration of the presence module's benchmark (worker.mjs),
# served by `go run ./wasm/bench` from a directory where it has put the
# module (presence.wasm) and the recorded replies (replies.json) next to
# this file, laid out as in wasm/. No network: the replies stand in for
# Redis.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [(name = "bench", worker = .benchWorker)],
  sockets = [(name = "http", address = "127.0.0.1:8788", http = (), service = "bench")],
);

const benchWorker :Workerd.Worker = (
  modules = [
    (name = "bench/worker.mjs", esModule = embed "worker.mjs"),
    (name = "bench/shared.mjs", esModule = embed "shared.mjs"),
    (name = "bench/presence.wasm", wasm = embed "presence.wasm"),
    (name = "js/plans.mjs", esModule = embed "../js/plans.mjs"),
    (name = "js/enums.mjs", esModule = embed "../js/enums.mjs"),
    (name = "js/reactor.mjs", esModule = embed "../js/reactor.mjs"),
    (name = "js/resp.mjs", esModule = embed "../js/resp.mjs"),
    (name = "js/wasi.mjs", esModule = embed "../js/wasi.mjs"),
  ],
  compatibilityDate = "2026-11-01",
  bindings = [(name = "REPLIES", json = embed "replies.json")],
);
