# workerd configuration of the presence Worker (see README.md).
#
#   workerd serve config.capnp
#
# serves http://127.0.0.1:8787/ from worker.mjs, with the module built into
# presence.wasm next to this file and Redis at 127.0.0.1:6379; change the
# port with --socket-addr http=HOST:PORT. workerd_test.go serves this very
# file, with its own Redis address in PRESENCE_REDIS.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "presence", worker = .presenceWorker),
    # cloudflare:sockets connect() goes out through the Worker's
    # globalOutbound; workerd's default network allows public addresses
    # only, and Redis here is on the loopback or a private network.
    (name = "redis-network", network = (allow = ["local", "private"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:8787", http = (), service = "presence")],
);

const presenceWorker :Workerd.Worker = (
  # Module names are paths: worker.mjs imports "../js/plans.mjs", which is
  # "js/plans.mjs" here, as on disk.
  modules = [
    (name = "workerd/worker.mjs", esModule = embed "worker.mjs"),
    (name = "workerd/reactor.mjs", esModule = embed "reactor.mjs"),
    (name = "workerd/presence.wasm", wasm = embed "presence.wasm"),
    (name = "js/plans.mjs", esModule = embed "../js/plans.mjs"),
    (name = "js/resp.mjs", esModule = embed "../js/resp.mjs"),
    (name = "js/wasi.mjs", esModule = embed "../js/wasi.mjs"),
  ],
  compatibilityDate = "2026-11-01",
  bindings = [(name = "PRESENCE_REDIS", text = "127.0.0.1:6379")],
  globalOutbound = "redis-network",
);
