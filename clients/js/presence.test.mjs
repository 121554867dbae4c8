// Unit tests of presence.js in Node (node --test), with fetch, storage and
// the document stubbed: the token-refresh hook, the backoff and
// Retry-After, session_replaced, a session ended in another tab, the
// event stream's parsing, a watch's count rhythm, the manual status and its
// re-assertion, and a refused follow stream.
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

// until waits for cond, failing after 2 s.
const until = async (cond) => {
  for (const end = Date.now() + 2000; !cond();) {
    if (Date.now() > end) throw new Error("timed out waiting for " + cond);
    await new Promise((r) => setTimeout(r, 2));
  }
};

test("a watch counts after its first touch, then on its own interval, apart from the touches", async () => {
  const calls = [];
  globalThis.fetch = async (url) => {
    const path = url.replace(/.*\/v1\//, "");
    calls.push(path);
    if (path === "info") return json(200, { intervals_ms: { web: 1000 }, classes: [{ name: "video", window_ms: 600000 }] });
    return json(200, { count: calls.filter((c) => c.endsWith("/count")).length });
  };
  const p = new Presence({ user: "w1" });
  const counts = [];
  const w = p.watch("video", "10086", (n) => counts.push(n), { every: 5 });
  await until(() => counts.length >= 4);
  w.stop(true);
  const touches = calls.filter((c) => c.endsWith("/touch")).length;
  assert.equal(touches, 1, `touches ${touches}: the window is 10 min, one touch only`);
  assert.deepEqual(calls.slice(0, 3), ["info", "scopes/video/10086/touch", "scopes/video/10086/count"]);
  assert.deepEqual(counts.slice(0, 4), [1, 2, 3, 4]);
  const n = calls.length;
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(calls.length, n, "a stopped watch still reads its count");
});

test("a manual status is set, shared by the tabs, cleared, and expires", async () => {
  const sent = [];
  globalThis.fetch = async (url, init) => { sent.push([init.method, url, JSON.parse(init.body)]); return json(200, { changes: [] }); };
  const p = new Presence({ user: "m1" }), other = new Presence({ user: "m1" });
  await p.setManual("DND", 60000);
  assert.deepEqual(sent[0], ["PUT", "/v1/users/m1/manual", { status: "DND", ttl_ms: 60000 }]);
  assert.equal(other.manual.status, "DND");
  assert.ok(other.manual.until > Date.now() + 59000);
  await p.clearManual();
  assert.deepEqual(sent[1], ["PUT", "/v1/users/m1/manual", { status: "NONE" }]);
  assert.equal(p.manual, null);
  await p.setManual("INVISIBLE", 1);
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(p.manual, null, "an expired manual status is none");
  globalThis.fetch = async () => json(400, { error: { code: "invalid_field", message: "unknown manual status" } });
  await assert.rejects(p.setManual("BUSY"), (e) => e.status === 400);
  assert.equal(p.manual, null, "a refused status is not kept");
});

test("the manual status is re-asserted when a beat's answer says so, not after a steady beat", async () => {
  const puts = [];
  let reassert = false;
  globalThis.fetch = async (url, init) => {
    if (init.method === "PUT") { puts.push(JSON.parse(init.body)); return json(200, { changes: [] }); }
    return json(200, { token: "t-1", changes: [], reassert });
  };
  const p = new Presence({ user: "m2" });
  const told = [];
  p.on("reasserted", (m) => told.push(m.status));
  p._iv = 1000;
  p.running = p.leader = true;
  p._schedule = () => {};
  await p.setManual("DND", 60000);
  puts.length = 0;
  await p._beat(); // the first beat: no token sent, the session starts
  await p._beat(); // a steady beat
  assert.deepEqual(puts, []);
  reassert = true; // Redis lost its data: the beat found nothing of the user
  await p._beat();
  await until(() => puts.length === 1);
  assert.equal(puts[0].status, "DND");
  assert.ok(puts[0].ttl_ms > 59000 && puts[0].ttl_ms <= 60000, `the rest of the expiry: ${puts[0].ttl_ms}`);
  await until(() => told.length === 1);
  assert.deepEqual(told, ["DND"]);
  await p.clearManual();
  puts.length = 0;
  await p._beat();
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(puts, [], "a cleared status is not re-asserted");
});

test("a follow stream's loss event is told, and the statuses are read again when it has healed", async () => {
  const reads = [];
  globalThis.fetch = async (url, init) => {
    if (url.endsWith("/v1/statuses")) { reads.push(JSON.parse(init.body).users); return json(200, { statuses: [{ user: "b", status: "AWAY" }] }); }
    const until = Date.now() + 20;
    return new Response(`event: status\ndata: {"user":"b","status":"ONLINE"}\n\nevent: ready\ndata: {}\n\nevent: loss\ndata: {"at":1,"until":${until}}\n\n`,
      { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
  const p = new Presence({ user: "l1" });
  p._iv = 1000;
  const losses = [], seen = [];
  p.on("loss", (l) => losses.push(l));
  const f = p.follow(["b"], (u, st) => seen.push(`${u} ${st}`));
  await until(() => reads.length === 1);
  await until(() => seen.length === 2);
  f.close();
  assert.ok(losses.length >= 1, "the loss is told (each reconnection of this stub sends it again)");
  assert.equal(losses[0].at, 1);
  assert.deepEqual(reads[0], ["b"]);
  assert.deepEqual(seen, ["b ONLINE", "b AWAY"], "the change during the healing shows when it has healed");
});

test("a refused follow stream is closed, tells the page, and is not retried", async () => {
  let opened = 0;
  globalThis.fetch = async () => { opened++; return json(403, { error: { code: "forbidden", message: "user[0]: reading another user needs the \"presence_read\" claim" } }); };
  const p = new Presence({ user: "r1", backoff: { base: 1, max: 2 } });
  p._iv = 1000;
  const refused = [];
  p.on("refused", (e, f) => refused.push([e.status, f.users.size]));
  const f = p.follow(["stranger"]);
  await until(() => refused.length === 1);
  await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(refused, [[403, 1]]);
  assert.equal(f.error.code, "forbidden");
  assert.equal(opened, 1);
});
