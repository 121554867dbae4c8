// resp_test.mjs: tests of resp.mjs, the minimal RESP2 codec (node --test;
// wasm/workerd's TestRESPCodec runs it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { callCommand, encodeCommands, ProtocolError, ReplyReader, unavailableResult } from "./resp.mjs";

const enc = new TextEncoder();
const bytes = (s) => (typeof s === "string" ? enc.encode(s) : new Uint8Array(s));
const concat = (...parts) => {
  const bs = parts.map(bytes);
  const out = new Uint8Array(bs.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const b of bs) {
    out.set(b, at);
    at += b.length;
  }
  return out;
};

// read feeds all to a ReplyReader and returns every complete reply.
function read(all) {
  const r = new ReplyReader();
  r.push(bytes(all));
  const out = [];
  for (let x; (x = r.next()) !== null; ) out.push(x);
  return out;
}

test("integers keep every digit, beyond 2^53 and negative", () => {
  assert.deepEqual(read(":9007199254740993\r\n:-9223372036854775808\r\n:0\r\n"), [
    '{"value":9007199254740993}',
    '{"value":-9223372036854775808}',
    '{"value":0}',
  ]);
});

test("nested arrays, nil bulk strings and nil arrays", () => {
  const reply = "*4\r\n:1\r\n$-1\r\n*2\r\n$1\r\nx\r\n*1\r\n:9223372036854775807\r\n*0\r\n";
  assert.deepEqual(read(reply), ['{"value":[1,null,["x",[9223372036854775807]],[]]}']);
  assert.deepEqual(read("$-1\r\n*-1\r\n"), ['{"value":null}', '{"value":null}']);
});

test("simple strings and empty bulk strings", () => {
  assert.deepEqual(read("+OK\r\n$0\r\n\r\n"), ['{"value":"OK"}', '{"value":""}']);
});

test("errors: NOSCRIPT, retryable ones, and others", () => {
  const got = read("-NOSCRIPT No matching script. Please use EVAL.\r\n-LOADING Redis is loading\r\n-BUSY script\r\n-ERR boom\r\n").map((t) => JSON.parse(t));
  assert.deepEqual(got, [
    { error: { code: "noscript", message: "NOSCRIPT No matching script. Please use EVAL." } },
    { error: { code: "unavailable", message: "LOADING Redis is loading" } },
    { error: { code: "unavailable", message: "BUSY script" } },
    { error: { code: "error", message: "ERR boom" } },
  ]);
  // Inside an array (which a Lua script never returns), an error reads as nil.
  assert.deepEqual(read("*2\r\n-ERR x\r\n:1\r\n"), ['{"value":[null,1]}']);
  assert.deepEqual(JSON.parse(unavailableResult("closed")), { error: { code: "unavailable", message: "redis: closed" } });
});

test("strings that are not UTF-8 travel as base64; UTF-8 ones as strings", () => {
  const got = read(concat("*2\r\n$2\r\n", [0xff, 0x00], "\r\n$3\r\n", [0xe2, 0x98, 0x83], "\r\n"));
  assert.deepEqual(got, ['{"value":[{"b":"/wA="},"☃"]}']);
  // A bulk string may hold CR LF.
  assert.deepEqual(read("$4\r\na\r\nb\r\n"), ['{"value":"a\\r\\nb"}']);
});

test("replies split across chunks, at every byte", () => {
  const all = concat("*3\r\n:9007199254740993\r\n$5\r\nhe\r\no\r\n*1\r\n$2\r\n", [0xc3, 0x28], "\r\n-NOSCRIPT x\r\n+OK\r\n");
  const want = read(all);
  assert.equal(want.length, 3);
  for (let size = 1; size <= 7; size++) {
    const r = new ReplyReader();
    const got = [];
    for (let at = 0; at < all.length; at += size) {
      r.push(all.slice(at, at + size));
      for (let x; (x = r.next()) !== null; ) got.push(x);
    }
    assert.deepEqual(got, want, `chunks of ${size}`);
  }
  // An incomplete reply is not one.
  const r = new ReplyReader();
  r.push(bytes("*2\r\n:1\r\n$3\r\nab"));
  assert.equal(r.next(), null);
  r.push(bytes("c\r\n"));
  assert.equal(r.next(), '{"value":[1,"abc"]}');
});

test("bytes that are not RESP throw ProtocolError", () => {
  assert.throws(() => read("?what\r\n"), ProtocolError);
  assert.throws(() => read(":12a\r\n"), ProtocolError);
  assert.throws(() => read("$x\r\n"), ProtocolError);
});

test("encodeCommands: strings as UTF-8, {b} as bytes, one request", () => {
  const got = encodeCommands([["GET", "zoë"], ["SET", { b: "/wA=" }, ""]]);
  assert.deepEqual(got, concat("*2\r\n$3\r\nGET\r\n$4\r\nzo", [0xc3, 0xab], "\r\n*3\r\n$3\r\nSET\r\n$2\r\n", [0xff, 0x00], "\r\n$0\r\n\r\n"));
});

test("callCommand: EVALSHA, or EVAL with the source", () => {
  assert.deepEqual(callCommand({ sha: "abc", keys: ["k1", "k2"], args: ["1"] }), ["EVALSHA", "abc", "2", "k1", "k2", "1"]);
  assert.deepEqual(callCommand({ src: "return 1", keys: [], args: [] }), ["EVAL", "return 1", "0"]);
});
