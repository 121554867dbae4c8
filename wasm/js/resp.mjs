// resp.mjs: a minimal RESP2 codec for hosts of the presence module that
// have a byte stream to Redis but no Redis client that runs there
// (workerd's cloudflare:sockets, Deno.connect). It knows only what a
// host needs: encoding commands, and reading replies straight into the
// ABI's result text ({"value":…} or {"error":…}, see ../ABI.md), integers
// digit for digit and strings byte for byte. Standard JavaScript only.

const encoder = new TextEncoder();
const utf8 = new TextDecoder("utf-8", { fatal: true });
const latin1 = new TextDecoder("latin1");

// encodeCommands encodes commands (arrays whose items are strings, or
// {b: base64} for bytes that are not UTF-8) as one RESP request.
export function encodeCommands(commands) {
  const parts = [];
  let size = 0;
  const add = (bytes) => {
    parts.push(bytes);
    size += bytes.length;
  };
  for (const args of commands) {
    add(encoder.encode(`*${args.length}\r\n`));
    for (const a of args) {
      const b = typeof a === "string" ? encoder.encode(a) : fromBase64(a.b);
      add(encoder.encode(`$${b.length}\r\n`));
      add(b);
      add(CRLF);
    }
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

// callCommand turns one script call of a plan into its Redis command.
export function callCommand(c) {
  return c.src !== undefined
    ? ["EVAL", c.src, String(c.keys.length), ...c.keys, ...c.args]
    : ["EVALSHA", c.sha, String(c.keys.length), ...c.keys, ...c.args];
}

const CRLF = new Uint8Array([13, 10]);

// ReplyReader collects the bytes read from Redis and yields one ABI
// result text per complete reply.
export class ReplyReader {
  constructor() {
    this.buf = new Uint8Array(0);
  }

  // push appends bytes read from the connection.
  push(chunk) {
    if (this.buf.length === 0) {
      this.buf = chunk;
      return;
    }
    const b = new Uint8Array(this.buf.length + chunk.length);
    b.set(this.buf);
    b.set(chunk, this.buf.length);
    this.buf = b;
  }

  // next returns the ABI result text of the next complete reply, or null
  // while it is incomplete. It throws a ProtocolError on bytes that are
  // not RESP.
  next() {
    const r = parse(this.buf, 0, true);
    if (r === null) return null;
    this.buf = this.buf.subarray(r.end);
    return r.text;
  }
}

// ProtocolError reports bytes from Redis that are not RESP2.
export class ProtocolError extends Error {}

// unavailableResult is the ABI result of a call that never got a reply.
export function unavailableResult(message) {
  return JSON.stringify({ error: { code: "unavailable", message: "redis: " + message } });
}

// errorCode classifies a Redis error reply for the ABI: NOSCRIPT makes a
// plan resend the call with its source; the others may be retried.
export function errorCode(message) {
  if (message.startsWith("NOSCRIPT")) return "noscript";
  for (const p of ["LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY"]) {
    if (message.startsWith(p)) return "unavailable";
  }
  return "error";
}

// str is the ABI text of a string's bytes: a JSON string when they are
// UTF-8, {"b": base64} otherwise.
export function str(bytes) {
  try {
    return JSON.stringify(utf8.decode(bytes));
  } catch {
    return JSON.stringify({ b: toBase64(bytes) });
  }
}

function indexCRLF(b, i) {
  for (let j = i; j + 1 < b.length; j++) {
    if (b[j] === 13 && b[j + 1] === 10) return j;
  }
  return -1;
}

// parse reads one reply at i: at the top level its ABI result text,
// nested its value text; null while incomplete.
function parse(b, i, top) {
  if (i >= b.length) return null;
  const j = indexCRLF(b, i + 1);
  if (j < 0) return null;
  const head = latin1.decode(b.subarray(i + 1, j));
  const end = j + 2;
  const wrap = (v) => (top ? `{"value":${v}}` : v);
  switch (b[i]) {
    case 0x2b: // + simple string
      return { text: wrap(str(b.subarray(i + 1, j))), end };
    case 0x2d: { // - error
      const message = utf8Lossy(b.subarray(i + 1, j));
      const e = JSON.stringify({ code: errorCode(message), message });
      // A Lua script never returns an error inside an array; treat one as nil.
      return { text: top ? `{"error":${e}}` : "null", end };
    }
    case 0x3a: // : integer
      if (!/^-?[0-9]+$/.test(head)) throw new ProtocolError(`bad integer ${JSON.stringify(head)}`);
      return { text: wrap(head), end };
    case 0x24: { // $ bulk string
      const n = length(head);
      if (n < 0) return { text: wrap("null"), end };
      if (b.length < end + n + 2) return null;
      return { text: wrap(str(b.subarray(end, end + n))), end: end + n + 2 };
    }
    case 0x2a: { // * array
      const n = length(head);
      if (n < 0) return { text: wrap("null"), end };
      const items = [];
      let at = end;
      for (let k = 0; k < n; k++) {
        const r = parse(b, at, false);
        if (r === null) return null;
        items.push(r.text);
        at = r.end;
      }
      return { text: wrap(`[${items.join(",")}]`), end: at };
    }
  }
  throw new ProtocolError(`unexpected reply type byte ${b[i]}`);
}

function length(head) {
  if (!/^-?[0-9]+$/.test(head)) throw new ProtocolError(`bad length ${JSON.stringify(head)}`);
  return Number(head);
}

function utf8Lossy(bytes) {
  return new TextDecoder("utf-8").decode(bytes);
}

function fromBase64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function toBase64(bytes) {
  let bin = "";
  for (const x of bytes) bin += String.fromCharCode(x);
  return btoa(bin);
}
