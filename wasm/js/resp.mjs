// resp.mjs: a minimal RESP2 client for hosts of the presence module that
// have a byte stream to Redis but no Redis client that runs there
// (workerd's cloudflare:sockets, Deno.connect). It knows only what a
// host needs: encoding commands, reading replies straight into the ABI's
// result text ({"value":…} or {"error":…}, see ../ABI.md), integers digit
// for digit and strings byte for byte, and one connection (TCP or TLS,
// with AUTH) that pipelines the commands of many callers. The codec is
// standard JavaScript; each runtime's dialer below loads its own socket
// API only when called.

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

// ---- Connection options -------------------------------------------------

// ConfigError reports connection options that cannot be used.
export class ConfigError extends Error {}

// AuthError reports that Redis refused the credentials, or asked for some
// where none were given. Retrying does not help, so a client throws it
// instead of answering the calls as unavailable.
export class AuthError extends Error {}

const DEFAULT_TIMEOUT_MS = 10_000;

// redisOptions reads the connection options from environment variables
// or Worker bindings (env is process.env, Deno.env.toObject() or a
// Worker's env):
//
//   PRESENCE_REDIS_HOST      host name or address (required)
//   PRESENCE_REDIS_PORT      TCP port, default 6379
//   PRESENCE_REDIS_TLS       "on" or "off" (default)
//   PRESENCE_REDIS_USER      ACL user; unset: AUTH with the password alone
//   PRESENCE_REDIS_PASSWORD  password; unset: no AUTH
//   PRESENCE_REDIS_CA        PEM certificates to trust instead of the
//                            system's (Node and Deno; workerd takes them
//                            from its network service's tlsOptions)
//
// It throws a ConfigError naming the variable at fault.
export function redisOptions(env) {
  const get = (k) => {
    const v = env?.[k];
    return v === undefined || v === null || v === "" ? undefined : String(v);
  };
  const host = get("PRESENCE_REDIS_HOST");
  if (!host) throw new ConfigError("PRESENCE_REDIS_HOST is not set: give the Redis host name or address");
  const portText = get("PRESENCE_REDIS_PORT") ?? "6379";
  const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0;
  if (port < 1 || port > 65535) throw new ConfigError(`PRESENCE_REDIS_PORT=${JSON.stringify(portText)} is not a TCP port (1–65535)`);
  const tlsText = (get("PRESENCE_REDIS_TLS") ?? "off").toLowerCase();
  if (!["on", "off", "true", "false", "1", "0"].includes(tlsText)) {
    throw new ConfigError(`PRESENCE_REDIS_TLS=${JSON.stringify(tlsText)}: want "on" or "off"`);
  }
  const user = get("PRESENCE_REDIS_USER");
  const password = get("PRESENCE_REDIS_PASSWORD");
  if (user && !password) throw new ConfigError("PRESENCE_REDIS_USER is set without PRESENCE_REDIS_PASSWORD");
  return { host, port, tls: ["on", "true", "1"].includes(tlsText), user, password, ca: get("PRESENCE_REDIS_CA") };
}

// ---- Transports -----------------------------------------------------------
//
// A dialer is async (options) => transport, where a transport is
// { write(bytes): Promise, read(): Promise<Uint8Array | null>, close() }:
// read resolves to null once the peer has closed the connection. The
// dialer gives up, closing what it opened, when options.signal aborts.

// webStreams adapts a socket with WHATWG streams (workerd's and Deno's).
function webStreams(socket) {
  const writer = socket.writable.getWriter();
  const reader = socket.readable.getReader();
  return {
    write: (bytes) => writer.write(bytes),
    read: async () => {
      const { value, done } = await reader.read();
      return done ? null : value;
    },
    close: () => {
      try {
        const p = socket.close();
        if (p?.catch) p.catch(() => {});
      } catch {
        // already closed
      }
    },
  };
}

// socketsDialer dials with workerd's connect() from cloudflare:sockets,
// which a Worker passes in (only a Worker can import it). TLS is
// verified against the certificates workerd trusts: on Cloudflare the
// public ones, in workerd those of the network service's tlsOptions.
export function socketsDialer(connect) {
  return async ({ host, port, tls, signal }) => {
    const socket = connect({ hostname: host, port }, { secureTransport: tls ? "on" : "off", allowHalfOpen: false });
    const t = webStreams(socket);
    signal?.addEventListener("abort", t.close);
    await socket.opened;
    signal?.removeEventListener("abort", t.close);
    return t;
  };
}

// denoDial dials with Deno.connect, or Deno.connectTls.
export async function denoDial({ host, port, tls, ca, signal }) {
  if (!tls) {
    const conn = await Deno.connect({ hostname: host, port, signal });
    conn.setNoDelay(true);
    return webStreams(conn);
  }
  const conn = await Deno.connectTls({ hostname: host, port, signal, ...(ca ? { caCerts: [ca] } : {}) });
  const close = () => conn.close();
  signal?.addEventListener("abort", close);
  await conn.handshake();
  signal?.removeEventListener("abort", close);
  return webStreams(conn);
}

// nodeDial dials with node:net, or node:tls.
export async function nodeDial({ host, port, tls, ca, signal }) {
  const net = await import("node:net");
  const socket = tls
    ? (await import("node:tls")).connect({ host, port, ca, servername: net.isIP(host) ? undefined : host })
    : net.connect({ host, port });
  const abort = () => socket.destroy(new Error("aborted"));
  signal?.addEventListener("abort", abort);
  await new Promise((resolve, reject) => {
    socket.once(tls ? "secureConnect" : "connect", resolve);
    socket.once("error", reject);
  }).finally(() => signal?.removeEventListener("abort", abort));
  socket.setNoDelay(true);
  const chunks = [];
  let waiter = null;
  let ended = false;
  let failure = null;
  const wake = () => {
    if (waiter) {
      const w = waiter;
      waiter = null;
      w();
    }
  };
  socket.on("data", (b) => {
    chunks.push(new Uint8Array(b.buffer, b.byteOffset, b.length));
    wake();
  });
  socket.on("end", () => {
    ended = true;
    wake();
  });
  socket.on("close", () => {
    ended = true;
    wake();
  });
  socket.on("error", (err) => {
    failure = err;
    wake();
  });
  return {
    write: (bytes) =>
      new Promise((resolve, reject) => socket.write(bytes, (err) => (err ? reject(err) : resolve()))),
    read: async () => {
      while (chunks.length === 0 && !ended && !failure) await new Promise((r) => (waiter = r));
      if (chunks.length > 0) return chunks.shift();
      if (failure) throw failure;
      return null;
    },
    close: () => socket.destroy(),
  };
}

// runtimeDialer is the dialer of the runtime this runs in: Deno's or
// Node's. A Worker uses socketsDialer(connect).
export function runtimeDialer() {
  if (globalThis.Deno?.connect) return denoDial;
  if (globalThis.process?.versions?.node) return nodeDial;
  throw new ConfigError("no socket API known in this runtime: pass a dialer (socketsDialer(connect) in a Worker)");
}

// ---- Client -------------------------------------------------------------------

// Connection is one transport to Redis. Callers' commands go out in the
// order they call send and their replies come back in the same order,
// so many callers may pipeline on it at once. It reads all the time, so
// that it sees Redis close an idle connection.
class Connection {
  constructor(transport, timeoutMs) {
    this.t = transport;
    this.timeoutMs = timeoutMs;
    this.replies = new ReplyReader();
    this.waiting = [];
    this.broken = null;
    this.readLoop();
  }

  // send writes one encoded request of n commands and resolves to their
  // n ABI result texts; it rejects once the connection breaks.
  send(bytes, n) {
    if (this.broken) return Promise.reject(this.broken);
    const p = new Promise((resolve, reject) => {
      const w = { n, out: [], resolve, reject, timer: null };
      w.timer = setTimeout(() => this.fail(new Error(`no reply within ${this.timeoutMs} ms`)), this.timeoutMs);
      this.waiting.push(w);
    });
    this.t.write(bytes).catch((err) => this.fail(err));
    return p;
  }

  async readLoop() {
    try {
      while (!this.broken) {
        const chunk = await this.t.read();
        if (chunk === null) throw new Error("connection closed by Redis");
        this.replies.push(chunk);
        this.deliver();
      }
    } catch (err) {
      this.fail(err);
    }
  }

  // deliver hands complete replies to the callers waiting for them.
  deliver() {
    if (this.waiting.length === 0 && this.replies.buf.length > 0) throw new ProtocolError("a reply nobody asked for");
    while (this.waiting.length > 0) {
      const w = this.waiting[0];
      let r;
      while (w.out.length < w.n && (r = this.replies.next()) !== null) w.out.push(r);
      if (w.out.length < w.n) return;
      this.waiting.shift();
      clearTimeout(w.timer);
      w.resolve(w.out);
    }
  }

  // fail breaks the connection: every caller still waiting gets err.
  fail(err) {
    this.broken ??= err;
    for (const w of this.waiting.splice(0)) {
      clearTimeout(w.timer);
      w.reject(this.broken);
    }
    this.t.close();
  }
}

// withTimeout resolves as p does, or calls expire and rejects after ms.
function withTimeout(p, ms, expire) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      expire();
      reject(new Error(`no answer within ${ms} ms`));
    }, ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

// RedisClient is a connection to one Redis, opened on first use, with
// AUTH sent in the same write as the first commands. A connection that
// breaks answers the calls left without a reply as unavailable (a plan
// may retry them); the next pipeline connects again. Refused
// credentials throw an AuthError.
export class RedisClient {
  // dial is a dialer (socketsDialer(connect), denoDial, nodeDial);
  // options are redisOptions' (host, port, tls, user, password, ca),
  // with timeoutMs, how long a reply may take (default 10 s).
  constructor(dial, options) {
    this.dial = dial;
    this.options = { timeoutMs: DEFAULT_TIMEOUT_MS, ...options };
    this.conn = null;
    this.connections = 0;
    this.commands = 0;
  }

  // open dials and authenticates; it resolves to the connection and a
  // promise of AUTH's verdict.
  async open() {
    const o = this.options;
    const where = `${o.tls ? "rediss" : "redis"}://${o.host}:${o.port}`;
    let t;
    const abort = new AbortController();
    try {
      const dialing = this.dial({ ...o, signal: abort.signal });
      dialing.then((late) => abort.signal.aborted && late.close(), () => {});
      t = await withTimeout(dialing, o.timeoutMs, () => abort.abort());
    } catch (err) {
      throw new Error(`connect to ${where}: ${err?.message ?? err}`);
    }
    this.connections++;
    const conn = new Connection(t, o.timeoutMs);
    let auth = Promise.resolve();
    if (o.password !== undefined) {
      const args = o.user !== undefined ? ["AUTH", o.user, o.password] : ["AUTH", o.password];
      auth = conn.send(encodeCommands([args]), 1).then(([r]) => {
        if (r.startsWith('{"error"')) {
          const who = o.user !== undefined ? `user ${JSON.stringify(o.user)}` : "the default user";
          throw new AuthError(`redis at ${where} refused AUTH as ${who}: ${JSON.parse(r).error.message}`);
        }
      });
      auth.catch(() => {});
    }
    return { conn, auth, where };
  }

  // pipeline sends commands in one write and resolves to one ABI result
  // text per command.
  async pipeline(commands) {
    this.commands += commands.length;
    let opening, c;
    // A connection Redis closed while idle is opened again, once.
    for (let attempt = 0; attempt < 2 && !(c && !c.conn.broken); attempt++) {
      if (c) this.drop(opening, c);
      opening = this.conn ??= this.open();
      try {
        c = await opening;
      } catch (err) {
        if (this.conn === opening) this.conn = null;
        return commands.map(() => unavailableResult(String(err?.message ?? err)));
      }
    }
    const replies = c.conn.send(encodeCommands(commands), commands.length);
    replies.catch(() => {});
    try {
      await c.auth;
    } catch (err) {
      this.drop(opening, c);
      throw err;
    }
    let out;
    try {
      out = await replies;
    } catch (err) {
      this.drop(opening, c);
      return commands.map(() => unavailableResult(String(err?.message ?? err)));
    }
    // Redis answers a client that has not authenticated with NOAUTH, or,
    // for a long command, a protocol error, and then closes it.
    for (const r of out) {
      if (r.startsWith('{"error":{"code":"error","message":"NOAUTH') || r.includes("Protocol error: unauthenticated")) {
        throw new AuthError(`redis at ${c.where} asks for a password (${JSON.parse(r).error.message}); none was given`);
      }
    }
    return out;
  }

  drop(opening, c) {
    c.conn.fail(new Error("connection dropped"));
    if (this.conn === opening) this.conn = null;
  }

  // close closes the connection; a later pipeline opens another.
  close() {
    const opening = this.conn;
    this.conn = null;
    if (opening) opening.then((c) => c.conn.fail(new Error("client closed")), () => {});
  }
}
