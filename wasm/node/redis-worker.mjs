// redis-worker.mjs: the worker thread behind SyncRedis (redis-sync.mjs). It
// holds one connection to Redis, sends each batch of commands the main
// thread posts as one pipeline, and writes the replies, already in the
// presence ABI's script response form (JSON text), into the shared buffer;
// then it wakes the main thread, which waits with Atomics.wait.
import { parentPort, workerData } from "node:worker_threads";
import net from "node:net";

const { host, port, shared } = workerData;
const state = new Int32Array(shared, 0, 2); // [ready flag, length]
const out = new Uint8Array(shared, 8);
const utf8 = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

let buf = Buffer.alloc(0);
let pending = null; // { n, results: [] }
let broken = null;

const sock = net.connect({ host, port });
sock.setNoDelay(true);
sock.on("data", (chunk) => {
  buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
  drain();
});
sock.on("error", (err) => fail(err.message));
sock.on("close", () => fail("connection closed"));

function fail(message) {
  broken = message;
  if (pending) {
    pending = null;
    finish(JSON.stringify({ v: 1, error: { code: "unavailable", message: "redis: " + message } }));
  }
}

function finish(text) {
  let bytes = encoder.encode(text);
  if (bytes.length > out.length) {
    bytes = encoder.encode(JSON.stringify({ v: 1, error: { code: "error", message: "reply larger than the shared buffer" } }));
  }
  out.set(bytes);
  Atomics.store(state, 1, bytes.length);
  Atomics.store(state, 0, 1);
  Atomics.notify(state, 0);
}

parentPort.on("message", (commands) => {
  if (broken) {
    finish(JSON.stringify({ v: 1, error: { code: "unavailable", message: "redis: " + broken } }));
    return;
  }
  const parts = [];
  for (const args of commands) {
    parts.push(Buffer.from(`*${args.length}\r\n`));
    for (const a of args) {
      const b = typeof a === "string" ? Buffer.from(a, "utf8") : Buffer.from(a.b, "base64");
      parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
    }
  }
  pending = { n: commands.length, results: [] };
  sock.write(Buffer.concat(parts));
});

function drain() {
  while (pending && pending.results.length < pending.n) {
    const r = parse(buf, 0, true);
    if (r === null) return;
    pending.results.push(r.text);
    buf = buf.subarray(r.end);
  }
  if (pending && pending.results.length === pending.n) {
    const text = `{"v":1,"results":[${pending.results.join(",")}]}`;
    pending = null;
    finish(text);
  }
}

// line returns the text of the line starting at i and the index after its
// CRLF, or null when the line is incomplete.
function line(b, i) {
  const j = b.indexOf("\r\n", i);
  return j < 0 ? null : { s: b.toString("latin1", i + 1, j), end: j + 2 };
}

function errorCode(message) {
  if (message.startsWith("NOSCRIPT")) return "noscript";
  for (const p of ["LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY"]) {
    if (message.startsWith(p)) return "unavailable";
  }
  return "error";
}

function str(bytes) {
  try {
    return JSON.stringify(utf8.decode(bytes));
  } catch {
    return JSON.stringify({ b: Buffer.from(bytes).toString("base64") });
  }
}

// parse reads one reply at i. At the top level it returns the ABI result
// text ({"value":…} or {"error":…}); nested, the value text. Integers are
// copied digit for digit, so the full int64 range survives.
function parse(b, i, top) {
  if (i >= b.length) return null;
  const l = line(b, i);
  if (l === null) return null;
  const wrap = (v) => (top ? `{"value":${v}}` : v);
  switch (b[i]) {
    case 0x2b: // +
      return { text: wrap(JSON.stringify(l.s)), end: l.end };
    case 0x2d: { // -
      const message = Buffer.from(l.s, "latin1").toString("utf8");
      const e = JSON.stringify({ code: errorCode(message), message });
      return { text: top ? `{"error":${e}}` : "null", end: l.end };
    }
    case 0x3a: // :
      return { text: wrap(l.s), end: l.end };
    case 0x24: { // $
      const n = parseInt(l.s, 10);
      if (n < 0) return { text: wrap("null"), end: l.end };
      if (b.length < l.end + n + 2) return null;
      return { text: wrap(str(b.subarray(l.end, l.end + n))), end: l.end + n + 2 };
    }
    case 0x2a: { // *
      const n = parseInt(l.s, 10);
      if (n < 0) return { text: wrap("null"), end: l.end };
      const items = [];
      let end = l.end;
      for (let k = 0; k < n; k++) {
        const r = parse(b, end, false);
        if (r === null) return null;
        items.push(r.text);
        end = r.end;
      }
      return { text: wrap(`[${items.join(",")}]`), end };
    }
  }
  fail("protocol error");
  return null;
}
