// resp_test.mjs: tests of resp.mjs, the minimal RESP2 client, under
// node --test and deno test (wasm/workerd's TestRESPCodec runs both).
// The tests of a live connection need a redis-server with a password,
// an ACL user and a TLS port, which TestRESPCodec starts and names in
// PRESENCE_TEST_REDIS_*; without it they skip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  AuthError,
  callCommand,
  ConfigError,
  encodeCommands,
  ProtocolError,
  RedisClient,
  redisOptions,
  ReplyReader,
  runtimeDialer,
  unavailableResult,
} from "./resp.mjs";

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

test("redisOptions: defaults, TLS, ACL user, and each bad variable named", () => {
  assert.deepEqual(redisOptions({ PRESENCE_REDIS_HOST: "r.example" }), {
    host: "r.example", port: 6379, tls: false, user: undefined, password: undefined, ca: undefined,
  });
  assert.deepEqual(
    redisOptions({
      PRESENCE_REDIS_HOST: "r.example", PRESENCE_REDIS_PORT: "6380", PRESENCE_REDIS_TLS: "on",
      PRESENCE_REDIS_USER: "u", PRESENCE_REDIS_PASSWORD: "p",
    }),
    { host: "r.example", port: 6380, tls: true, user: "u", password: "p", ca: undefined },
  );
  for (const [env, named] of [
    [{}, "PRESENCE_REDIS_HOST"],
    [{ PRESENCE_REDIS_HOST: "h", PRESENCE_REDIS_PORT: "0" }, "PRESENCE_REDIS_PORT"],
    [{ PRESENCE_REDIS_HOST: "h", PRESENCE_REDIS_PORT: "65536" }, "PRESENCE_REDIS_PORT"],
    [{ PRESENCE_REDIS_HOST: "h", PRESENCE_REDIS_PORT: "63a" }, "PRESENCE_REDIS_PORT"],
    [{ PRESENCE_REDIS_HOST: "h", PRESENCE_REDIS_TLS: "yes please" }, "PRESENCE_REDIS_TLS"],
    [{ PRESENCE_REDIS_HOST: "h", PRESENCE_REDIS_USER: "u" }, "PRESENCE_REDIS_PASSWORD"],
  ]) {
    assert.throws(() => redisOptions(env), (err) => err instanceof ConfigError && err.message.includes(named), JSON.stringify(env));
  }
});

// A live redis-server, from TestRESPCodec.
const env = globalThis.Deno ? Deno.env.toObject() : process.env;
const live = env.PRESENCE_TEST_REDIS_HOST
  ? {
      host: env.PRESENCE_TEST_REDIS_HOST,
      port: Number(env.PRESENCE_TEST_REDIS_PORT),
      tlsPort: Number(env.PRESENCE_TEST_REDIS_TLS_PORT),
      ca: readFileSync(env.PRESENCE_TEST_REDIS_CA_FILE, "utf8"),
      password: env.PRESENCE_TEST_REDIS_PASSWORD,
      user: env.PRESENCE_TEST_REDIS_USER,
      userPassword: env.PRESENCE_TEST_REDIS_USER_PASSWORD,
    }
  : null;
const skip = live ? false : "no live redis-server: run `go test -run TestRESPCodec ./wasm/workerd`";

// client returns a client of the live server over plain TCP or TLS.
function client(tls, credentials, extra = {}) {
  const where = tls ? { port: live.tlsPort, tls: true, ca: live.ca } : { port: live.port, tls: false };
  return new RedisClient(runtimeDialer(), { host: live.host, ...where, ...credentials, timeoutMs: 5000, ...extra });
}

for (const tls of [false, true]) {
  const name = tls ? "TLS" : "TCP";

  test(`${name}: AUTH with the password, and with an ACL user; one connection for many pipelines`, { skip }, async () => {
    for (const [credentials, whoami] of [
      [{ password: live?.password }, "default"],
      [{ user: live?.user, password: live?.userPassword }, live?.user],
    ]) {
      const c = client(tls, credentials);
      try {
        assert.deepEqual(await c.pipeline([["ACL", "WHOAMI"], ["EVAL", "return redis.call('PING')", "0"]]), [
          `{"value":${JSON.stringify(whoami)}}`,
          '{"value":"PONG"}',
        ]);
        for (let i = 0; i < 3; i++) assert.deepEqual(await c.pipeline([["PING"]]), ['{"value":"PONG"}']);
        assert.equal(c.connections, 1);
      } finally {
        c.close();
      }
    }
  });

  test(`${name}: pipelines called together get their own replies, in order`, { skip }, async () => {
    const c = client(tls, { password: live?.password });
    try {
      const got = await Promise.all(
        Array.from({ length: 40 }, (_, i) => c.pipeline([["ECHO", `a${i}`], ["ECHO", `b${i}`]])),
      );
      got.forEach((replies, i) => assert.deepEqual(replies, [`{"value":"a${i}"}`, `{"value":"b${i}"}`]));
      assert.equal(c.connections, 1);
    } finally {
      c.close();
    }
  });

  test(`${name}: refused credentials throw an AuthError naming the cause`, { skip }, async () => {
    for (const [credentials, want] of [
      [{ password: "wrong" }, /refused AUTH as the default user: WRONGPASS/],
      [{ user: live?.user, password: "wrong" }, new RegExp(`refused AUTH as user "${live?.user}": WRONGPASS`)],
      [{ user: "nobody", password: live?.password }, /refused AUTH as user "nobody": WRONGPASS/],
      [{}, /asks for a password \(NOAUTH/],
    ]) {
      const c = client(tls, credentials);
      try {
        await assert.rejects(c.pipeline([["PING"]]), (err) => err instanceof AuthError && want.test(err.message), JSON.stringify(credentials));
      } finally {
        c.close();
      }
    }
  });

  test(`${name}: a connection Redis closes is opened again`, { skip }, async () => {
    const c = client(tls, { user: live?.user, password: live?.userPassword });
    const admin = client(false, { password: live?.password });
    try {
      const [id] = await c.pipeline([["CLIENT", "ID"]]);
      assert.deepEqual(await admin.pipeline([["CLIENT", "KILL", "ID", JSON.parse(id).value.toString()]]), ['{"value":1}']);
      // The client sees the close before its next pipeline, or in it.
      let r = await c.pipeline([["PING"]]);
      if (r[0] !== '{"value":"PONG"}') {
        assert.match(JSON.parse(r[0]).error.message, /closed|reset|EPIPE|broken/i);
        r = await c.pipeline([["PING"]]);
      }
      assert.deepEqual(r, ['{"value":"PONG"}']);
      assert.equal(c.connections, 2);
    } finally {
      c.close();
      admin.close();
    }
  });
}

test("TLS to the plain port, and TLS without the test's CA, answer unavailable", { skip }, async () => {
  for (const extra of [
    { port: live?.port, tls: true, ca: live?.ca, timeoutMs: 2000 },
    { ca: undefined },
  ]) {
    const c = client(true, { password: live?.password }, extra);
    try {
      const [r] = await c.pipeline([["PING"]]);
      const e = JSON.parse(r).error;
      assert.equal(e.code, "unavailable", r);
      assert.match(e.message, /^redis: connect to rediss:\/\/127\.0\.0\.1:/, r);
      assert.equal(c.connections, 0);
    } finally {
      c.close();
    }
  }
});
