// worker.mjs: the presence module in a Cloudflare Worker (ES module
// syntax), on workerd's own event loop: the WASI reactor answers each
// request at once, with its result or the script calls its plan waits
// for; the Worker sends those calls to Redis over a cloudflare:sockets
// TCP connection (RESP2, ../js/resp.mjs) and resumes the plans
// (../js/plans.mjs). No JSPI, no threads, no Atomics.wait. See README.md.
//
//   GET  /                   a short example: heartbeat, status, count
//   POST /sequence           body: wasm/testdata/sequence.json; answers
//                            the final response to each request, a line each
//   POST /bench?op=heartbeat|heartbeat_batch&n=N
//                            N operations against a replay of Redis's
//                            replies (no network once warm); answers the
//                            elapsed time as Date.now() sees it
//
// Bindings: PRESENCE_REDIS, the Redis address ("host:port"), text.

import { connect } from "cloudflare:sockets";
import presenceWasm from "./presence.wasm";
import { PlanHost, runSequence } from "../js/plans.mjs";
import { encodeCommands, ReplyReader, unavailableResult } from "../js/resp.mjs";
import { Reactor } from "./reactor.mjs";

// Redis is one connection to Redis, for one request: a Worker may not
// share I/O objects across requests.
class Redis {
  constructor(address) {
    this.address = address;
    this.socket = null;
    this.commands = 0;
  }

  open() {
    this.socket = connect(this.address);
    this.writer = this.socket.writable.getWriter();
    this.reader = this.socket.readable.getReader();
    this.replies = new ReplyReader();
  }

  // pipeline sends commands in one write and resolves to one ABI result
  // text per command. A broken connection answers the calls left
  // without a reply as unavailable (a plan may retry them); the next
  // pipeline connects again.
  async pipeline(commands) {
    const out = [];
    this.commands += commands.length;
    try {
      if (!this.socket) this.open();
      await this.writer.write(encodeCommands(commands));
      for (;;) {
        let r;
        while (out.length < commands.length && (r = this.replies.next()) !== null) out.push(r);
        if (out.length === commands.length) return out;
        const { value, done } = await this.reader.read();
        if (done) throw new Error("connection closed by Redis");
        this.replies.push(value);
      }
    } catch (err) {
      this.close();
      while (out.length < commands.length) out.push(unavailableResult(String(err.message ?? err)));
      return out;
    }
  }

  close() {
    if (this.socket) this.socket.close().catch(() => {});
    this.socket = null;
  }
}

// replay answers each call from a cache of the replies Redis gave to the
// first call of the same shape (script and number of arguments), as
// wasm/host's benchmark store does: once warm, no call leaves the Worker.
function replay(redis) {
  const cache = new Map();
  const key = (c) => `${c[1]}/${c.length}`;
  return async (commands) => {
    const missing = commands.filter((c) => !cache.has(key(c)));
    if (missing.length > 0) {
      const results = await redis.pipeline(missing);
      missing.forEach((c, i) => {
        if (!results[i].startsWith('{"error"')) cache.set(key(c), results[i]);
      });
      // A miss that failed is answered from Redis once more, uncached.
      return Promise.all(commands.map(async (c) => cache.get(key(c)) ?? (await redis.pipeline([c]))[0]));
    }
    return commands.map((c) => cache.get(key(c)));
  };
}

async function sequence(request, env) {
  const seq = await request.json();
  const redis = new Redis(env.PRESENCE_REDIS);
  try {
    // A fresh instance: the sequence configures its own engine.
    const reactor = new Reactor(presenceWasm);
    const host = new PlanHost({ call: (r) => reactor.call(r), pipeline: (c) => redis.pipeline(c) });
    const lines = await runSequence(seq, host);
    return new Response(lines.join("\n") + "\n", { headers: { "content-type": "application/x-ndjson" } });
  } finally {
    redis.close();
  }
}

// example is what GET / shows: a few operations on the isolate's shared
// instance.
async function example(env) {
  const redis = new Redis(env.PRESENCE_REDIS);
  const out = [];
  try {
    const host = new PlanHost({ call: (r) => shared().call(r), pipeline: (c) => redis.pipeline(c), now: () => Date.now() });
    out.push("configure " + JSON.stringify((await host.do("configure", { prefix: "presence-workerd" })).result));
    const ack = (await host.do("heartbeat", { user: "alice", device: "web-1", kind: "web", active: true })).result;
    out.push("heartbeat " + JSON.stringify(ack));
    const st = (await host.do("status", { user: "alice" })).result;
    out.push(`status ${st.status} ${st.devices.map((d) => `${d.id}:${d.state}`).join(" ")}`);
    const room = { class: "room", id: "lobby" };
    await host.do("touch_batch", { touches: ["alice", "bob", "carol"].map((member) => ({ scope: room, member })) });
    out.push("count " + JSON.stringify((await host.do("count", { scope: room })).result));
    out.push(`redis round trips ${host.rounds}, commands ${redis.commands}`);
    return new Response(out.join("\n") + "\n");
  } catch (err) {
    out.push(`error: ${err.message}`);
    return new Response(out.join("\n") + "\n", { status: 500 });
  } finally {
    redis.close();
  }
}

let instance = null;

// shared is the isolate's instance, made on first use (not at global
// scope, where workerd forbids the random bytes Go's runtime draws).
function shared() {
  instance ??= new Reactor(presenceWasm);
  return instance;
}

// bench runs n operations as wasm/host's BenchmarkHeartbeatWASM does on
// its replay store: one heartbeat, or one batch of 100, per operation.
async function bench(url, env) {
  const op = url.searchParams.get("op") ?? "heartbeat";
  const n = Number(url.searchParams.get("n") ?? "1000");
  const redis = new Redis(env.PRESENCE_REDIS);
  try {
    const reactor = new Reactor(presenceWasm);
    const t0 = 1767225600000;
    const host = new PlanHost({ call: (r) => reactor.call(r), pipeline: replay(redis) });
    const beats = Array.from({ length: op === "heartbeat" ? 1 : 100 }, (_, i) => ({
      user: `user-${i}`, device: "web", kind: "web", token: "0123456789abcdef",
    }));
    const request =
      op === "heartbeat"
        ? JSON.stringify({ v: 2, op, now: t0, args: beats[0] })
        : JSON.stringify({ v: 2, op: "heartbeat_batch", now: t0, args: { beats } });
    await host.do("configure", { user_buckets: 1, prefix: "presence-workerd-bench" });
    for (let i = 0; i < 2; i++) await host.run([request]); // sessions, a warm cache
    const commands = redis.commands;
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
    return Response.json({ op, n, beats: beats.length, ms, redis_commands: redis.commands - commands });
  } finally {
    redis.close();
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    try {
      if (request.method === "POST" && url.pathname === "/sequence") return await sequence(request, env);
      if (request.method === "POST" && url.pathname === "/bench") return await bench(url, env);
      if (request.method === "GET" && url.pathname === "/") return await example(env);
      return new Response("not found\n", { status: 404 });
    } catch (err) {
      return new Response(`error: ${err.stack ?? err}\n`, { status: 500 });
    }
  },
};
