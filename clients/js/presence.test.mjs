// Unit tests of presence.js in Node (node --test), with fetch, storage and
// the document stubbed: the token-refresh hook, the backoff and
// Retry-After, session_replaced, a session ended in another tab, and the
// event stream's parsing.
import { test } from "node:test";
import assert from "node:assert/strict";

const mem = new Map();
globalThis.localStorage = { getItem: (k) => mem.get(k) ?? null, setItem: (k, v) => mem.set(k, String(v)) };
globalThis.document = { hidden: false, addEventListener() {}, removeEventListener() {} };
globalThis.addEventListener = globalThis.removeEventListener = () => {};
const { Presence, idLess } = await import("./presence.js");

const json = (status, body, headers = {}) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });

test("a 401 asks the token hook for a new token, once", async () => {
  const asked = [], sent = [];
  globalThis.fetch = async (url, init) => {
    sent.push(init.headers.Authorization);
    return init.headers.Authorization === "Bearer fresh" ? json(200, { ok: 1 }) : json(401, { error: { code: "unauthenticated", message: "expired" } });
  };
  const p = new Presence({ user: "t1", token: async (expired) => { asked.push(expired); return expired ? "fresh" : "stale"; } });
  assert.deepEqual(await p.request("GET", "/v1/info"), { ok: 1 });
  assert.deepEqual(asked, [false, true]);
  assert.deepEqual(sent, ["Bearer stale", "Bearer fresh"]);
  globalThis.fetch = async () => json(401, { error: { code: "unauthenticated", message: "no" } });
  let told = 0;
  p.on("unauthenticated", () => told++);
  await assert.rejects(p.request("GET", "/v1/info"), (e) => e.status === 401 && e.code === "unauthenticated");
  assert.equal(told, 1);
});

test("the backoff grows, is capped, is jittered, and never undercuts Retry-After", () => {
  const p = new Presence({ user: "t2", backoff: { base: 100, max: 1000 } });
  p._iv = 1000;
  for (let n = 1; n <= 10; n++) {
    const d = Math.min(1000, 100 * 2 ** (n - 1));
    for (let i = 0; i < 50; i++) {
      const w = p._backoff(n);
      assert.ok(w >= d / 2 && w <= d, `retry ${n}: ${w} outside [${d / 2}, ${d}]`);
    }
  }
  assert.ok(p._backoff(1, 3) >= 3000);
  const q = new Presence({ user: "t3" });
  q._iv = 30000;
  assert.ok(q._backoff(1) <= 1000 && q._backoff(20) <= 30000);
});

test("a failed beat backs off with Retry-After; session_replaced ends the session", async () => {
  let answer = () => json(429, { error: { code: "rate_limited", message: "slow down", retry_after: 2 } }, { "Retry-After": "2" });
  globalThis.fetch = async (url) => (url.endsWith("/v1/info") ? json(200, { intervals_ms: { web: 1000 } }) : answer());
  const p = new Presence({ user: "t4" });
  const ends = [];
  p.on("kicked", (e) => ends.push(e.code));
  await p.info();
  p._iv = 1000;
  p.running = p.leader = true;
  let delay;
  p._schedule = (ms) => { delay = ms; };
  await p._beat();
  assert.ok(delay >= 2000, `after a 429 with Retry-After: 2 the next beat is in ${delay} ms`);
  assert.equal(p.stats.failures, 1);
  answer = () => json(409, { error: { code: "session_replaced", message: "replaced" } });
  await p._beat();
  assert.deepEqual(ends, ["session_replaced"]);
  assert.equal(p.running, false);
});

test("the event stream is parsed, deduplicated by ID, and resumed with Last-Event-ID", async () => {
  const opened = [];
  let body = "retry: 2000\n\nevent: status\ndata: {\"user\":\"b\",\"status\":\"OFFLINE\"}\n\nevent: ready\ndata: {}\n\n" +
    ": ping\n\nid: 5-1\nevent: change\ndata: {\"user\":\"b\",\"from\":\"OFFLINE\",\"to\":\"ONLINE\"}\n\n";
  globalThis.fetch = async (url, init) => {
    opened.push(init.headers["Last-Event-ID"] || "");
    const b = body;
    body = "id: 5-1\nevent: change\ndata: {\"user\":\"b\",\"from\":\"OFFLINE\",\"to\":\"ONLINE\"}\n\nid: 6-0\nevent: change\ndata: {\"user\":\"b\",\"from\":\"ONLINE\",\"to\":\"AWAY\"}\r\n\r\n";
    return new Response(b, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
  const p = new Presence({ user: "t5", backoff: { base: 1, max: 2 } });
  p._iv = 1000;
  const got = [];
  const f = p.follow(["b"], (u, s) => got.push(u + " " + s));
  while (got.length < 3) await new Promise((r) => setTimeout(r, 5));
  f.close();
  assert.deepEqual(got, ["b OFFLINE", "b ONLINE", "b AWAY"]);
  assert.deepEqual(opened.slice(0, 2), ["", "5-1"]);
  assert.ok(idLess("5-1", "6-0") && idLess("5-1", "5-2") && !idLess("10-0", "9-9"));
});

test("a tab that takes the lead after another tab ended the session does not log in again", async () => {
  const sent = [];
  globalThis.fetch = async (url) => {
    sent.push(url);
    return url.endsWith("/v1/info") ? json(200, { intervals_ms: { web: 1000 } }) : json(409, { error: { code: "no_session", message: "none" } });
  };
  const ender = new Presence({ user: "t6" }), late = new Presence({ user: "t6" });
  const ends = [];
  late.on("kicked", (e) => ends.push(e.code));
  late.running = true;
  late._began = Date.now() - 1;
  late._schedule = () => { sent.push("a beat scheduled"); };
  ender.running = true;
  ender._end("kicked", { code: "session_replaced", message: "replaced" }); // its message has not reached late yet
  late._lead(); // the lock, granted before the message
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(ends, ["session_replaced"]);
  assert.equal(late.running, false);
  assert.deepEqual(sent, []);
  const next = new Presence({ user: "t6" }); // a page opened after the end starts a session
  next._began = Date.now() + 1;
  next.running = true;
  assert.equal(next._endedHere(), false);
});

test("a beat that learns of no session after its tab stopped does not log in", async () => {
  const sent = [];
  let p;
  globalThis.fetch = async (url) => {
    sent.push(url.replace(/.*\/v1\//, ""));
    if (url.endsWith("/v1/heartbeat")) p.stop(); // the end arrives while the beat is in flight
    return json(409, { error: { code: "no_session", message: "none" } });
  };
  p = new Presence({ user: "t7" });
  p._iv = 1000;
  p.running = p.leader = true;
  p._schedule = () => assert.fail("a stopped tab scheduled a beat");
  await p._beat();
  assert.deepEqual(sent, ["heartbeat"]);
});

test("a beat refused after another tab logged out ends with a logout, not a kick", async () => {
  globalThis.fetch = async () => json(409, { error: { code: "session_replaced", message: "replaced" } });
  const out = new Presence({ user: "t8" }), beating = new Presence({ user: "t8" });
  const ends = [];
  beating.on("kicked", () => ends.push("kicked"));
  beating.on("logout", () => ends.push("logout"));
  beating._iv = 1000;
  beating._began = Date.now() - 1;
  beating.running = beating.leader = true;
  beating._schedule = () => {};
  out.running = true;
  await out.logout(); // its message has not reached the beating tab yet
  await beating._beat();
  assert.deepEqual(ends, ["logout"]);
  assert.equal(beating.running, false);
});
