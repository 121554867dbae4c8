// redis-async.mjs: a minimal asynchronous Redis client for the presence
// module's JS build, on Node's event loop: one connection, pipelines of
// EVALSHA/EVAL commands, replies turned straight into the ABI's result
// text ({"value":…} or {"error":…}, see ABI.md). No worker thread, no
// Atomics.wait: the module never waits for Redis, the host does, with
// await.
import net from "node:net";

const utf8 = new TextDecoder("utf-8", { fatal: true });

export class AsyncRedis {
  // addr is "host:port".
  constructor(addr) {
    const i = addr.lastIndexOf(":");
    this.buf = Buffer.alloc(0);
    this.queue = []; // pipelines sent, awaiting replies: { n, results, resolve }
    this.broken = null;
    this.calls = 0;
    this.sock = net.connect({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)) });
    this.sock.setNoDelay(true);
    this.sock.on("data", (chunk) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
      this.drain();
    });
    this.sock.on("error", (err) => this.fail(err.message));
    this.sock.on("close", () => this.fail("connection closed"));
  }

  // pipeline sends commands (arrays of strings, or {b: base64} for binary
  // arguments) in one round trip and resolves to one ABI result text per
  // command.
  pipeline(commands) {
    if (this.broken) return Promise.resolve(commands.map(() => unavailable(this.broken)));
    const parts = [];
    for (const args of commands) {
      parts.push(Buffer.from(`*${args.length}\r\n`));
      for (const a of args) {
        const b = typeof a === "string" ? Buffer.from(a, "utf8") : Buffer.from(a.b, "base64");
        parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
      }
    }
    this.calls += commands.length;
    return new Promise((resolve) => {
      this.queue.push({ n: commands.length, results: [], resolve });
      this.sock.write(Buffer.concat(parts));
    });
  }

  drain() {
    while (this.queue.length > 0) {
      const head = this.queue[0];
      while (head.results.length < head.n) {
        const r = parse(this.buf, 0, true);
        if (r === null) return;
        if (r.error) return this.fail("protocol error");
        head.results.push(r.text);
        this.buf = this.buf.subarray(r.end);
      }
      this.queue.shift();
      head.resolve(head.results);
    }
  }

  fail(message) {
    this.broken = message;
    for (const p of this.queue.splice(0)) p.resolve(Array.from({ length: p.n }, () => unavailable(message)));
  }

  close() {
    this.sock.destroy();
  }
}

function unavailable(message) {
  return JSON.stringify({ error: { code: "unavailable", message: "redis: " + message } });
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
        if (r === null || r.error) return r;
        items.push(r.text);
        end = r.end;
      }
      return { text: wrap(`[${items.join(",")}]`), end };
    }
  }
  return { error: true };
}
