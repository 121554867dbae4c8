# workerd configuration of the presence Worker (see README.md).
#
#   PRESENCE_REDIS_HOST=127.0.0.1 PRESENCE_REDIS_PORT=6379 workerd serve config.capnp
#
# serves http://127.0.0.1:8787/ from worker.mjs, with the module built into
# presence.wasm next to this file; change the port with
# --socket-addr http=HOST:PORT. The Worker's bindings come from workerd's
# environment: PRESENCE_REDIS_HOST, _PORT, _TLS, _USER, _PASSWORD,
# PRESENCE_PREFIX and PRESENCE_REDIS_CONNECTION (see worker.mjs). For
# TLS to a Redis whose certificate is not signed by a public CA, list
# its CA in the network service's tlsOptions. workerd_test.go serves this
# very file.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "presence", worker = .presenceWorker),
    # cloudflare:sockets connect() goes out through the Worker's
    # globalOutbound; workerd's default network allows public addresses
    # only, and Redis here is on the loopback or a private network.
    (name = "redis-network", network = (allow = ["local", "private"], tlsOptions = (trustBrowserCas = true))),
  ],
  sockets = [(name = "http", address = "127.0.0.1:8787", http = (), service = "presence")],
);

const presenceWorker :Workerd.Worker = (
  # Module names are paths: worker.mjs imports "../js/plans.mjs", which is
  # "js/plans.mjs" here, as on disk.
  modules = [
    (name = "workerd/worker.mjs", esModule = embed "worker.mjs"),
    (name = "js/reactor.mjs", esModule = embed "../js/reactor.mjs"),
    (name = "workerd/presence.wasm", wasm = embed "presence.wasm"),
    (name = "js/plans.mjs", esModule = embed "../js/plans.mjs"),
    (name = "js/enums.mjs", esModule = embed "../js/enums.mjs"),
    (name = "js/resp.mjs", esModule = embed "../js/resp.mjs"),
    (name = "js/wasi.mjs", esModule = embed "../js/wasi.mjs"),
  ],
  compatibilityDate = "2026-11-01",
  bindings = [
    (name = "PRESENCE_REDIS_HOST", fromEnvironment = "PRESENCE_REDIS_HOST"),
    (name = "PRESENCE_REDIS_PORT", fromEnvironment = "PRESENCE_REDIS_PORT"),
    (name = "PRESENCE_REDIS_TLS", fromEnvironment = "PRESENCE_REDIS_TLS"),
    (name = "PRESENCE_REDIS_USER", fromEnvironment = "PRESENCE_REDIS_USER"),
    (name = "PRESENCE_REDIS_PASSWORD", fromEnvironment = "PRESENCE_REDIS_PASSWORD"),
    (name = "PRESENCE_PREFIX", fromEnvironment = "PRESENCE_PREFIX"),
    (name = "PRESENCE_REDIS_CONNECTION", fromEnvironment = "PRESENCE_REDIS_CONNECTION"),
    (name = "REDIS_HUB", durableObjectNamespace = "RedisHub"),
  ],
  # RedisHub keeps nothing in storage; it holds the connection in memory.
  durableObjectNamespaces = [(className = "RedisHub", uniqueKey = "presence-redis-hub")],
  durableObjectStorage = (inMemory = void),
  globalOutbound = "redis-network",
);
