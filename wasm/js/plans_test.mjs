// Tests of plans.mjs's compact form: node --test plans_test.mjs (run by
// go test ./wasm/node). The lanes check it against the module itself.
import test from "node:test";
import assert from "node:assert/strict";
import { encodeRequest, encodeResume, PlanHost } from "./plans.mjs";

const hex = (b) => Buffer.from(b).toString("hex");
const bytes = (...items) => Uint8Array.from(items.flatMap((x) => (typeof x === "string" ? [x.length, ...Buffer.from(x)] : [x])));

test("a heartbeat in the compact form", () => {
  const got = encodeRequest({ v: 2, op: "heartbeat", now: 5, args: { user: "al", device: "d", kind: "ios", active: true, meta: { b: "2", a: "1" }, at: -1 } });
  // marker, version, 'h', now 5, user, device, kind 3, gateway, token, flags
  // (active, meta, at), two metadata pairs in key order, at -1.
  const want = bytes(0xb2, 2, 0x68, 10, "al", "d", 3, "", "", 1 | 4 | 8, 2, "a", "1", "b", "2", 1);
  assert.equal(hex(got), hex(want));
});

test("a batch in the compact form", () => {
  const got = encodeRequest({ v: 2, op: "heartbeat_batch", now: 1, args: { beats: [{ user: "u", kind: 7 }] } });
  assert.equal(hex(got), hex(bytes(0xb2, 2, 0x62, 2, 1, "u", "", 7, "", "", 0)));
});

test("what only JSON carries stays JSON", () => {
  for (const req of [
    { v: 2, op: "status", now: 1, args: { user: "u" } },
    { v: 2, op: "heartbeat", now: 1, args: { user: "u", kind: "fridge" } },
    { v: 2, op: "heartbeat", now: 1, args: { user: { b: "/w==" } } },
    { v: 2, op: "heartbeat", now: 1, args: { user: "u", extra: 1 } },
    { v: 2, op: "heartbeat", now: 1, args: { user: "\ud800" } },
    { v: 2, op: "heartbeat", now: 1.5, args: { user: "u" } },
    { v: 2, op: "heartbeat", args: { user: "u" } },
    { v: 2, op: "heartbeat", now: 1, args: { user: "u", meta: { k: 1 } } },
    { v: 2, op: "heartbeat_batch", now: 1, args: { beats: [null] } },
  ]) {
    assert.equal(encodeRequest(req), null, JSON.stringify(req));
  }
});

test("a resume reads the ABI's result texts", () => {
  const got = encodeResume(5, 3, ['{"value":[1,"ab",null,-2,[]]}', '{"error":{"code":"noscript","message":"x"}}', '{"value":{"b":"/w=="}}']);
  const want = bytes(0xb2, 2, 0x72, 10, 6, 3,
    0, 3, 5, 1, 2, 2, "ab", 0, 1, 3, 3, 0,
    1, "noscript", "x", "", "", "", 0,
    0, 2, 1, 0xff);
  assert.equal(hex(got), hex(want));
  const max = encodeResume(1, 1, ['{"value":9223372036854775807}']);
  assert.equal(hex(max.subarray(7)), "01feffffffffffffffff01");
  const escaped = encodeResume(1, 1, ['{"value":"a\\"é"}']);
  assert.equal(hex(escaped.subarray(7)), hex(bytes(2, 4, 0x61, 0x22, 0xc3, 0xa9)));
});

test("an array of 128 items or more counts in two bytes", () => {
  const items = Array.from({ length: 200 }, (_, i) => i % 50);
  const got = encodeResume(1, 1, [`{"value":[[${items}],7]}`]);
  // ok, an array of 2: an array of 200 (varint c8 01), its items, then 7.
  const want = Uint8Array.from([0, 3, 2, 3, 0xc8, 0x01, ...items.flatMap((x) => [1, x * 2]), 1, 14]);
  assert.equal(hex(got.subarray(6)), hex(want));
});

test("a resume the compact form cannot carry stays JSON", () => {
  for (const r of ['{"value":1.5}', '{"value":9223372036854775808}', '{"value":true}', '{"error":{"code":"","message":"x"}}', '{"error":{"code":"e","message":"x","x":1}}']) {
    assert.equal(encodeResume(1, 1, [r]), null, r);
  }
});

test("compact responses read as the module's JSON", async () => {
  const ack = bytes(0xb2, 2, 0x61, "tok", 2, 1, "u", 0, 3, 20, 1, "change", "c", 'p"\b', "");
  const long = "s".repeat(300);
  const calls = Uint8Array.from([...bytes(0xb2, 2, 0x63, 2, 1, 0, "sha", 1, "k", 2, "a"), 0xac, 0x02, ...Buffer.from(long)]);
  const sent = [];
  const answers = [calls, ack];
  const host = new PlanHost({
    compact: true,
    call: (req) => (sent.push(req), answers.shift()),
    pipeline: async (cmds) => (assert.deepEqual(cmds, [["EVALSHA", "sha", "1", "k", "a", long]]), ['{"value":1}']),
  });
  const [out] = await host.run([{ v: 2, op: "heartbeat", now: 1, args: { user: "u" } }]);
  assert.equal(out, '{"v":2,"result":{"token":"tok","changes":[{"user":"u","from":"OFFLINE","to":"ONLINE","at":10}]},"messages":[{"kind":"change","channel":"c","payload":"p\\"\\u0008"}]}');
  assert.equal(sent.length, 2);
  assert.equal(hex(sent[1]), hex(bytes(0xb2, 2, 0x72, 2, 2, 1, 0, 1, 2)));
});

test("without compact, every message is JSON", async () => {
  const sent = [];
  const host = new PlanHost({ call: (req) => (sent.push(req), '{"v":2,"result":{"token":"t","changes":null}}'), pipeline: async () => [] });
  await host.do("heartbeat", { user: "u" }, 1);
  assert.equal(sent[0], '{"v":2,"op":"heartbeat","now":1,"args":{"user":"u"}}');
});
