// worker.mjs: the presence module in a Cloudflare Worker (ES module
// syntax), on workerd's own event loop: the WASI reactor answers each
// request at once, with its result or the script calls its plan waits
// for; the Worker sends those calls to Redis over a cloudflare:sockets
// connection (RESP2, with AUTH and TLS: ../js/resp.mjs) and resumes the
// plans (../js/plans.mjs). No JSPI, no threads, no Atomics.wait. See
// README.md.
//
//   GET  /                   a short example: heartbeat, status, count
//   POST /heartbeat          body: a Heartbeat ({"user","device",…});
//                            answers the module's response
//   POST /sequence[?form=json]
//                            body: wasm/testdata/sequence.json; answers
//                            the final response to each request, a line
//                            each (form=json: every message as JSON)
//   POST /bench?op=heartbeat|heartbeat_batch&n=N
//                            N operations against a replay of Redis's
//                            replies (no network once warm); answers the
//                            elapsed time as Date.now() sees it
//
// Bindings (text): PRESENCE_REDIS_HOST, _PORT, _TLS, _USER, _PASSWORD
// (see redisOptions in ../js/resp.mjs); PRESENCE_PREFIX, the key prefix
// (default "presence"); PRESENCE_REDIS_CONNECTION, "request" (default: a
// connection per request) or "durable-object" (requests go through the
// Durable Object of the REDIS_HUB binding, which keeps one connection).

import { connect } from "cloudflare:sockets";
import { DurableObject } from "cloudflare:workers";
import presenceWasm from "./presence.wasm";
import { PlanHost, runSequence } from "../js/plans.mjs";
import { AuthError, ConfigError, RedisClient, redisOptions, socketsDialer } from "../js/resp.mjs";
import { Reactor } from "../js/reactor.mjs";

const dial = socketsDialer(connect);

let isolate = null;

// configured is the isolate's instance of the module, made and
// configured on first use and kept for the isolate's life (not at global
// scope, where workerd forbids the random bytes Go's runtime draws).
function configured(env) {
  if (isolate === null) {
    const reactor = new Reactor(presenceWasm);
    const args = { prefix: env.PRESENCE_PREFIX || "presence" };
    const resp = JSON.parse(new TextDecoder().decode(reactor.call(JSON.stringify({ v: 2, op: "configure", args }))));
    if (resp.error) throw new ConfigError(`configure: [${resp.error.code}] ${resp.error.message}`);
    isolate = { reactor, configure: resp.result };
  }
  return isolate;
}

// handle answers one request, with redis, a RedisClient.
async function handle(request, env, redis) {
  const url = new URL(request.url);
  if (request.method === "POST" && url.pathname === "/heartbeat") return heartbeat(request, env, redis);
  if (request.method === "GET" && url.pathname === "/") return example(env, redis);
  if (request.method === "POST" && url.pathname === "/sequence") return sequence(request, url, redis);
  if (request.method === "POST" && url.pathname === "/bench") return bench(url, redis);
  return new Response("not found\n", { status: 404 });
}

// hostOf drives plans of the isolate's instance on redis, at the
// Worker's clock, the hot path in the compact form.
function hostOf(env, redis) {
  const { reactor } = configured(env);
  return new PlanHost({ call: (r) => reactor.call(r), pipeline: (c) => redis.pipeline(c), now: () => Date.now(), compact: true });
}

async function heartbeat(request, env, redis) {
  const beat = await request.json();
  const [resp] = await hostOf(env, redis).run([{ v: 2, op: "heartbeat", now: Date.now(), args: beat }]);
  return new Response(resp + "\n", { headers: { "content-type": "application/json" } });
}

// example is what GET / shows: a few operations on the isolate's
// instance.
async function example(env, redis) {
  const host = hostOf(env, redis);
  const out = ["configure " + JSON.stringify(configured(env).configure)];
  const ack = (await host.do("heartbeat", { user: "alice", device: "web-1", kind: "web", active: true })).result;
  out.push("heartbeat " + JSON.stringify(ack));
  const st = (await host.do("status", { user: "alice" })).result;
  out.push(`status ${st.status} ${st.devices.map((d) => `${d.id}:${d.state}`).join(" ")}`);
  const room = { class: "room", id: "lobby" };
  await host.do("touch_batch", { touches: ["alice", "bob", "carol"].map((member) => ({ scope: room, member })) });
  out.push("count " + JSON.stringify((await host.do("count", { scope: room })).result));
  out.push(`redis round trips ${host.rounds}`);
  out.push(`module memory ${(configured(env).reactor.memory.buffer.byteLength / 2 ** 20).toFixed(1)} MiB`);
  return new Response(out.join("\n") + "\n");
}

async function sequence(request, url, redis) {
  const seq = await request.json();
  // A fresh instance: the sequence configures its own engine.
  const reactor = new Reactor(presenceWasm);
  const compact = url.searchParams.get("form") !== "json";
  const host = new PlanHost({ call: (r) => reactor.call(r), pipeline: (c) => redis.pipeline(c), compact });
  const lines = await runSequence(seq, host);
  return new Response(lines.join("\n") + "\n", { headers: { "content-type": "application/x-ndjson" } });
}

// replay answers each call from a cache of the replies Redis gave to the
// first call of the same shape (script and number of arguments), as
// wasm/host's benchmark store does: once warm, no call leaves the Worker.
function replay(redis, counter) {
  const cache = new Map();
  const key = (c) => `${c[1]}/${c.length}`;
  const send = (commands) => {
    counter.commands += commands.length;
    return redis.pipeline(commands);
  };
  return async (commands) => {
    const missing = commands.filter((c) => !cache.has(key(c)));
    if (missing.length > 0) {
      const results = await send(missing);
      missing.forEach((c, i) => {
        if (!results[i].startsWith('{"error"')) cache.set(key(c), results[i]);
      });
      // A miss that failed is answered from Redis once more, uncached.
      return Promise.all(commands.map(async (c) => cache.get(key(c)) ?? (await send([c]))[0]));
    }
    return commands.map((c) => cache.get(key(c)));
  };
}

// bench runs n operations as wasm/host's BenchmarkHeartbeatWASM does on
// its replay store: one heartbeat, or one batch of 100, per operation.
async function bench(url, redis) {
  const op = url.searchParams.get("op") ?? "heartbeat";
  const n = Number(url.searchParams.get("n") ?? "1000");
  const reactor = new Reactor(presenceWasm);
  const t0 = 1767225600000;
  const counter = { commands: 0 };
  const host = new PlanHost({ call: (r) => reactor.call(r), pipeline: replay(redis, counter), compact: true });
  const beats = Array.from({ length: op === "heartbeat" ? 1 : 100 }, (_, i) => ({
    user: `user-${i}`, device: "web", kind: "web", token: "0123456789abcdef",
  }));
  const request =
    op === "heartbeat"
      ? { v: 2, op, now: t0, args: beats[0] }
      : { v: 2, op: "heartbeat_batch", now: t0, args: { beats } };
  await host.do("configure", { user_buckets: 1, prefix: "presence-workerd-bench" });
  for (let i = 0; i < 2; i++) await host.run([request]); // sessions, a warm cache
  const commands = counter.commands;
  // Date.now() moves only across I/O in a Worker: read it after a
  // turn of the event loop on either side.
  await scheduler.wait(1);
  const start = Date.now();
  for (let i = 0; i < n; i++) {
    const [resp] = await host.run([request]);
    if (!resp.startsWith('{"v":2,"result"')) throw new Error(`${op}: ${resp}`);
  }
  await scheduler.wait(1);
  const ms = Date.now() - start - 1;
  return Response.json({ op, n, beats: beats.length, ms, redis_commands: counter.commands - commands });
}

// answer runs handle and turns errors into responses that name them.
async function answer(run) {
  try {
    return await run();
  } catch (err) {
    if (err instanceof AuthError) return new Response(`error: ${err.message}\n`, { status: 502 });
    if (err instanceof ConfigError) return new Response(`error: ${err.message}\n`, { status: 500 });
    return new Response(`error: ${err.stack ?? err}\n`, { status: 500 });
  }
}

// RedisHub is a Durable Object that keeps one Redis connection for
// every request it serves: a Worker's I/O objects belong to the request
// that made them, but a Durable Object's outlive its requests. Requests
// run concurrently on the connection, pipelined.
export class RedisHub extends DurableObject {
  fetch(request) {
    return answer(() => {
      this.redis ??= new RedisClient(dial, redisOptions(this.env));
      return handle(request, this.env, this.redis);
    });
  }
}

export default {
  fetch(request, env) {
    const mode = env.PRESENCE_REDIS_CONNECTION || "request";
    if (mode === "durable-object") {
      if (!env.REDIS_HUB) return answer(() => { throw new ConfigError("PRESENCE_REDIS_CONNECTION=durable-object needs the REDIS_HUB Durable Object binding"); });
      return env.REDIS_HUB.get(env.REDIS_HUB.idFromName("redis")).fetch(request);
    }
    if (mode !== "request") {
      return answer(() => { throw new ConfigError(`PRESENCE_REDIS_CONNECTION=${JSON.stringify(mode)}: want "request" or "durable-object"`); });
    }
    return answer(async () => {
      const redis = new RedisClient(dial, redisOptions(env));
      try {
        return await handle(request, env, redis);
      } finally {
        redis.close();
      }
    });
  },
};
