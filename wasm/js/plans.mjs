// plans.mjs: the host side of the presence module's plans (ABI v2, see
// ../ABI.md), for any JavaScript runtime. The module answers each request
// at once, with its end or the script calls its plan waits for; a
// PlanHost sends those calls to Redis through the pipeline it is given
// and resumes each plan with its results, many plans in flight together.
// With {compact: true} the hot path (heartbeat, heartbeat_batch, resume)
// travels in the ABI's compact form, which the module reads and writes
// several times faster than JSON; every other message, and every message
// of a host without it, travels as JSON, which is easier to read when
// debugging. It does no I/O of its own; standard JavaScript only.

import { kinds as KINDS, statuses as STATUSES } from "./enums.mjs";
import { callCommand } from "./resp.mjs";

const text = new TextDecoder();
const utf8 = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

// PlanHost drives plans of one module instance.
//
// call(request) is the instance's synchronous call: it takes the request
// as JSON text or as bytes (the compact form) and returns the response
// as text or bytes (a Reactor of reactor.mjs does both). pipeline(commands)
// sends Redis commands in one round trip and resolves to one ABI result
// text per command ({"value":…} or {"error":…}). now() gives the now of a
// resume (the host's clock, ms); without it, a resume carries the now of
// the request that started its plan, which makes a scripted run exact.
// compact sends the hot path in the compact form; it needs a call that
// takes and returns bytes, as Reactor.call does, and is done with the
// bytes it is given when it returns (they are reused for the next
// message). Without it every message is JSON.
export class PlanHost {
  constructor({ call, pipeline, now, compact = false }) {
    this.call = call;
    this.pipeline = pipeline;
    this.now = now;
    this.compact = compact;
    this.rounds = 0;
  }

  // send hands the module one request (an object or JSON text) as JSON
  // and returns its response text.
  send(request) {
    const out = this.call(typeof request === "string" ? request : JSON.stringify(request));
    return typeof out === "string" ? out : text.decode(out);
  }

  // step hands the module one request and returns its response as
  // {plan, calls} while the plan waits for calls, else {text}: the
  // final response as JSON text, whichever form it came in.
  step(request) {
    const out = this.call(request);
    if (typeof out !== "string" && out.length > 0 && out[0] === COMPACT) return decodeResponse(out);
    const t = typeof out === "string" ? out : text.decode(out);
    const r = JSON.parse(t);
    return r.calls ? { plan: r.plan, calls: r.calls } : { text: t };
  }

  // start is step for a request as run takes it: an object (compact when
  // it can be) or JSON text.
  start(req) {
    if (typeof req === "string") return this.step(req);
    return this.step((this.compact && writeRequest(scratch.reset(), req)) || JSON.stringify(req));
  }

  // run runs requests (objects or JSON texts) as plans in flight together:
  // each round sends the calls of every plan still waiting in one
  // pipeline, in the order the plans started, then resumes each plan with
  // its own results. It resolves to the final response text of each
  // request ({"v":2,"result":…} or {"v":2,"error":…}), the same text
  // whether the response came as JSON or in the compact form.
  async run(requests) {
    const out = new Array(requests.length);
    let live = [];
    for (let i = 0; i < requests.length; i++) {
      const req = requests[i];
      const now = (typeof req === "string" ? JSON.parse(req).now : req.now) ?? 0;
      this.settle(out, live, i, now, this.start(req));
    }
    while (live.length > 0) {
      const commands = [];
      for (const f of live) for (const c of f.calls) commands.push(callCommand(c));
      this.rounds++;
      const results = await this.pipeline(commands);
      const waiting = live;
      live = [];
      let at = 0;
      for (const f of waiting) {
        const k = f.calls.length;
        const now = this.now ? this.now() : f.now;
        const resume =
          (this.compact && writeResume(scratch.reset(), now, f.plan, results, at, k)) ||
          `{"v":2,"op":"resume","now":${now},"args":{"plan":${f.plan},"results":[${results.slice(at, at + k).join(",")}]}}`;
        at += k;
        this.settle(out, live, f.i, f.now, this.step(resume));
      }
    }
    return out;
  }

  // settle records a response: the plan's end in out, or its calls in live.
  settle(out, live, i, now, r) {
    if (r.calls) live.push({ i, now, plan: r.plan, calls: r.calls });
    else out[i] = r.text;
  }

  // do runs one operation and returns its response, or throws the error
  // the module answered.
  async do(op, args, now = Date.now()) {
    const [resp] = await this.run([{ v: 2, op, now, args }]);
    const r = JSON.parse(resp);
    if (r.error) throw new ModuleError(op, r.error);
    return r;
  }
}

// idsOf returns the outbox IDs of the messages in final responses: once a
// host has published them, it acknowledges them with
// host.do("ack", { ids }), or a sweep delivers them again (ABI.md).
export function idsOf(responses) {
  return responses.flatMap((r) => (JSON.parse(r).messages ?? []).map((m) => m.id).filter(Boolean));
}

// ModuleError is an error response of the module.
export class ModuleError extends Error {
  constructor(op, error) {
    super(`${op}: [${error.code}] ${error.message}`);
    this.code = error.code;
    this.detail = error;
  }
}

// runSequence runs the lanes' scripted sequence (../testdata/sequence.json)
// through host, and returns one line per request: its final response.
export async function runSequence(sequence, host) {
  const lines = [];
  for (const step of sequence.steps) lines.push(...(await host.run(step.requests)));
  return lines;
}

// The compact form (ABI.md, "The compact form"): the marker byte, the
// version, a kind, then the fields without names.
const COMPACT = 0xb2;
const VERSION = 2;
const HEARTBEAT_FIELDS = new Set(["user", "device", "kind", "gateway", "token", "active", "background", "meta", "at"]);
const MAX_VALUE_DEPTH = 32;
const MAX_ERROR_DEPTH = 8;

// Writer appends the compact form's items to a growing byte buffer.
class Writer {
  constructor() {
    this.b = new Uint8Array(1024);
    this.n = 0;
  }
  // reset empties the writer, keeping its buffer.
  reset() {
    this.n = 0;
    return this;
  }
  room(k) {
    if (this.n + k <= this.b.length) return;
    const b = new Uint8Array(Math.max(this.b.length * 2, this.n + k));
    b.set(this.b.subarray(0, this.n));
    this.b = b;
  }
  byte(x) {
    this.room(1);
    this.b[this.n++] = x;
  }
  // uvarint writes a non-negative safe integer (a Number) or a BigInt.
  uvarint(x) {
    this.room(10);
    if (typeof x === "bigint") {
      while (x >= 0x80n) {
        this.b[this.n++] = Number(x & 0x7fn) | 0x80;
        x >>= 7n;
      }
      this.b[this.n++] = Number(x);
      return;
    }
    while (x >= 0x80) {
      this.b[this.n++] = (x % 0x80) | 0x80;
      x = Math.floor(x / 0x80);
    }
    this.b[this.n++] = x;
  }
  // varint writes a safe integer, or a BigInt within int64, zig-zag encoded.
  varint(x) {
    if (typeof x === "bigint") this.uvarint(x >= 0n ? x << 1n : (-x << 1n) - 1n);
    else if (Math.abs(x) < 2 ** 52) this.uvarint(x >= 0 ? x * 2 : -x * 2 - 1);
    else this.varint(BigInt(x));
  }
  bytes(b) {
    this.uvarint(b.length);
    this.room(b.length);
    this.b.set(b, this.n);
    this.n += b.length;
  }
  // str writes a string's UTF-8 bytes.
  str(s) {
    this.room(s.length * 3 + 10);
    if (s.length < 0x80) {
      // One length byte, then ASCII as it is; anything else re-encoded.
      const at = this.n++;
      let k = 0;
      for (; k < s.length; k++) {
        const c = s.charCodeAt(k);
        if (c >= 0x80) break;
        this.b[this.n++] = c;
      }
      if (k === s.length) {
        this.b[at] = s.length;
        return;
      }
      this.n = at;
    }
    this.bytes(encoder.encode(s));
  }
  // count writes n, the count of the items written since at, where one
  // byte was kept for it, moving the items when it takes more.
  count(at, n) {
    if (n < 0x80) {
      this.b[at] = n;
      return;
    }
    let k = 1;
    for (let x = n; x >= 0x80; x = Math.floor(x / 0x80)) k++;
    this.room(k - 1);
    this.b.copyWithin(at + k, at + 1, this.n);
    this.n += k - 1;
    for (; n >= 0x80; n = Math.floor(n / 0x80)) this.b[at++] = (n % 0x80) | 0x80;
    this.b[at] = n;
  }
  done() {
    return this.b.subarray(0, this.n);
  }
}

// scratch is the writer of every compact message a PlanHost sends: each
// is copied into the module's memory before the next is written.
const scratch = new Writer();

const isStr = (s) => typeof s === "string" && (typeof s.isWellFormed !== "function" || s.isWellFormed());
const isInt = (x) => Number.isSafeInteger(x);

// encodeRequest returns req (an object) in the compact form, or null when
// its op has none or it holds what only JSON carries (a string that is
// not well-formed, {"b":…} bytes, an unknown field or kind name): the
// module then reads it as JSON and answers, or refuses it, as it would.
export function encodeRequest(req) {
  return writeRequest(new Writer(), req);
}

// writeRequest is encodeRequest into w, which it returns a view of.
function writeRequest(w, req) {
  if (req.v !== 2 || !isInt(req.now) || req.now < 0 || req.args === null || typeof req.args !== "object") return null;
  if (req.op === "heartbeat") {
    if (!("user" in req.args)) return null;
    w.byte(COMPACT), w.byte(VERSION), w.byte(0x68); // 'h'
    w.varint(req.now);
    return writeHeartbeat(w, req.args) ? w.done() : null;
  }
  if (req.op === "heartbeat_batch") {
    const beats = req.args.beats;
    if (Object.keys(req.args).length !== 1 || !Array.isArray(beats)) return null;
    w.byte(COMPACT), w.byte(VERSION), w.byte(0x62); // 'b'
    w.varint(req.now);
    w.uvarint(beats.length);
    for (const hb of beats) if (hb === null || typeof hb !== "object" || !writeHeartbeat(w, hb)) return null;
    return w.done();
  }
  return null;
}

function writeHeartbeat(w, hb) {
  for (const k in hb) if (!HEARTBEAT_FIELDS.has(k)) return false;
  const { user = "", device = "", kind = "other", gateway = "", token = "", active = false, background = false } = hb;
  if (!isStr(user) || !isStr(device) || !isStr(gateway) || !isStr(token)) return false;
  if (typeof active !== "boolean" || typeof background !== "boolean") return false;
  let k = typeof kind === "string" ? KINDS.indexOf(kind) : kind;
  if (!Number.isInteger(k) || k < 0 || k > 255) return false;
  const meta = hb.meta ?? null;
  const at = hb.at ?? null;
  if (at !== null && !isInt(at)) return false;
  let pairs = null;
  if (meta !== null) {
    if (typeof meta !== "object" || Array.isArray(meta)) return false;
    pairs = [];
    for (const key in meta) {
      const v = meta[key];
      if (!isStr(key) || !isStr(v)) return false;
      pairs.push([encoder.encode(key), encoder.encode(v)]);
    }
    pairs.sort((a, b) => compareBytes(a[0], b[0]));
  }
  w.str(user), w.str(device), w.byte(k), w.str(gateway), w.str(token);
  w.byte((active ? 1 : 0) | (background ? 2 : 0) | (pairs ? 4 : 0) | (at !== null ? 8 : 0));
  if (pairs) {
    w.uvarint(pairs.length);
    for (const [key, v] of pairs) w.bytes(key), w.bytes(v);
  }
  if (at !== null) w.varint(at);
  return true;
}

function compareBytes(a, b) {
  for (let i = 0; i < a.length && i < b.length; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

// encodeResume returns a resume in the compact form, its results read
// from their ABI result texts, or null when one of them holds what the
// compact form does not carry (the module then reads the JSON resume).
export function encodeResume(now, plan, results) {
  return writeResume(new Writer(), now, plan, results, 0, results.length);
}

// writeResume is encodeResume into w of the n results from results[at].
function writeResume(w, now, plan, results, at, n) {
  if (!isInt(now) || now < 0) return null;
  w.byte(COMPACT), w.byte(VERSION), w.byte(0x72); // 'r'
  w.varint(now);
  w.varint(plan);
  w.uvarint(n);
  try {
    for (let k = at; k < at + n; k++) writeResult(w, results[k]);
  } catch (err) {
    if (err === NOT_COMPACT) return null;
    throw err;
  }
  return w.done();
}

const NOT_COMPACT = new Error("not representable in the compact form");

// writeResult writes one result text ({"value":…} or {"error":…}).
function writeResult(w, t) {
  if (t.startsWith('{"value":')) {
    w.byte(0);
    const end = writeValue(w, t, 9, 0);
    if (end !== t.length - 1 || t.charCodeAt(end) !== 0x7d) throw NOT_COMPACT;
    return;
  }
  const r = JSON.parse(t);
  if (Object.keys(r).length !== 1 || !r.error) throw NOT_COMPACT;
  w.byte(1);
  writeError(w, r.error, 0);
}

const ERROR_FIELDS = new Set(["code", "message", "field", "reason", "op", "unavailable", "cause"]);

function writeError(w, e, depth) {
  if (e === null || typeof e !== "object" || depth > MAX_ERROR_DEPTH) throw NOT_COMPACT;
  for (const k in e) if (!ERROR_FIELDS.has(k)) throw NOT_COMPACT;
  const { code, message = "", field = "", reason = "", op = "", unavailable = false, cause = null } = e;
  for (const s of [code, message, field, reason, op]) if (!isStr(s)) throw NOT_COMPACT;
  if (code === "" || typeof unavailable !== "boolean") throw NOT_COMPACT;
  w.str(code), w.str(message), w.str(field), w.str(reason), w.str(op);
  w.byte((unavailable ? 1 : 0) | (cause !== null ? 2 : 0));
  if (cause !== null) writeError(w, cause, depth + 1);
}

// writeValue writes the ABI value text at t[i] (null, an integer, a
// string, {"b":base64}, an array) and returns the index after it.
function writeValue(w, t, i, depth) {
  const c = t.charCodeAt(i);
  if (c === 0x6e && t.startsWith("null", i)) {
    w.byte(0);
    return i + 4;
  }
  if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
    let j = i + 1;
    while (j < t.length && t.charCodeAt(j) >= 0x30 && t.charCodeAt(j) <= 0x39) j++;
    const digits = t.slice(i, j);
    w.byte(1);
    if (j - i <= 15) w.varint(Number(digits));
    else {
      const n = BigInt(digits);
      if (n < -(2n ** 63n) || n >= 2n ** 63n) throw NOT_COMPACT;
      w.varint(n);
    }
    return j;
  }
  if (c === 0x22) {
    let j = i + 1;
    let escaped = false;
    for (; j < t.length; j++) {
      const d = t.charCodeAt(j);
      if (d === 0x22) break;
      if (d === 0x5c) (escaped = true), j++;
    }
    const s = escaped ? JSON.parse(t.slice(i, j + 1)) : t.slice(i + 1, j);
    if (!isStr(s)) throw NOT_COMPACT;
    w.byte(2);
    w.str(s);
    return j + 1;
  }
  if (c === 0x7b && t.startsWith('{"b":"', i)) {
    const j = t.indexOf('"}', i + 6);
    if (j < 0) throw NOT_COMPACT;
    const bin = atob(t.slice(i + 6, j));
    const b = new Uint8Array(bin.length);
    for (let k = 0; k < bin.length; k++) b[k] = bin.charCodeAt(k);
    w.byte(2);
    w.bytes(b);
    return j + 2;
  }
  if (c === 0x5b) {
    if (depth >= MAX_VALUE_DEPTH) throw NOT_COMPACT;
    // The count comes first: keep a byte for it, write the items, then it.
    w.byte(3);
    const at = w.n;
    w.byte(0);
    let n = 0;
    let j = i + 1;
    if (t.charCodeAt(j) !== 0x5d) {
      for (;;) {
        j = writeValue(w, t, j, depth + 1);
        n++;
        const d = t.charCodeAt(j++);
        if (d === 0x5d) break;
        if (d !== 0x2c) throw NOT_COMPACT;
      }
    } else j++;
    w.count(at, n);
    return j;
  }
  throw NOT_COMPACT;
}

// Reader reads the items of a compact response.
class Reader {
  constructor(b) {
    this.b = b;
    this.i = 3;
  }
  byte() {
    if (this.i >= this.b.length) throw new Error("presence: truncated compact response");
    return this.b[this.i++];
  }
  uvarint() {
    let x = 0;
    let mul = 1;
    for (;;) {
      const c = this.byte();
      if (mul > 2 ** 49) return this.bigUvarint(x, mul, c);
      x += (c & 0x7f) * mul;
      if (c < 0x80) return x;
      mul *= 0x80;
    }
  }
  bigUvarint(x, mul, c) {
    let big = BigInt(x);
    let m = BigInt(mul);
    for (;;) {
      big += BigInt(c & 0x7f) * m;
      if (c < 0x80) return big;
      m *= 0x80n;
      c = this.byte();
    }
  }
  // varint returns a Number when it is safe, else a BigInt.
  varint() {
    const u = this.uvarint();
    if (typeof u === "bigint") {
      const v = u & 1n ? -(u >> 1n) - 1n : u >> 1n;
      return Number.isSafeInteger(Number(v)) ? Number(v) : v;
    }
    return u % 2 === 1 ? -(u + 1) / 2 : u / 2;
  }
  raw() {
    const n = this.uvarint();
    if (this.i + n > this.b.length) throw new Error("presence: truncated compact response");
    const s = this.b.subarray(this.i, this.i + n);
    this.i += n;
    return s;
  }
  // str returns a string as a call's keys and args travel: text when it is
  // UTF-8, else {b: base64}.
  str() {
    const n = this.uvarint();
    const b = this.b;
    const i = this.i;
    const end = i + n;
    if (end > b.length) throw new Error("presence: truncated compact response");
    this.i = end;
    if (n > 64) return decodeUTF8(b.subarray(i, end));
    // Short strings (keys, SHA1s) without a decoder's call: their codes
    // in an array, then one string of them when they are ASCII.
    const codes = new Array(n);
    for (let k = 0; k < n; k++) {
      const c = b[i + k];
      if (c >= 0x80) return decodeUTF8(b.subarray(i, end));
      codes[k] = c;
    }
    return String.fromCharCode.apply(null, codes);
  }
  // json returns a string as the JSON text the module would write for it.
  json() {
    return jsonString(this.str());
  }
  strs() {
    const out = new Array(this.uvarint());
    for (let k = 0; k < out.length; k++) out[k] = this.str();
    return out;
  }
  list(read) {
    const n = this.uvarint();
    const out = new Array(n);
    for (let k = 0; k < n; k++) out[k] = read();
    return out;
  }
}

function decodeUTF8(b) {
  try {
    return utf8.decode(b);
  } catch {
    let bin = "";
    for (const x of b) bin += String.fromCharCode(x);
    return { b: btoa(bin) };
  }
}

// jsonString writes a string as the module's JSON encoder does: control
// characters other than \n, \r and \t as \u00XX, bytes that are not
// UTF-8 as {"b":base64}.
function jsonString(s) {
  if (typeof s !== "string") return `{"b":"${s.b}"}`;
  const j = JSON.stringify(s);
  return j.includes("\\b") || j.includes("\\f") ? j.replace(/\\(.)/g, (m, c) => (c === "b" ? "\\u0008" : c === "f" ? "\\u000c" : m)) : j;
}

// decodeResponse reads a compact response: a plan's calls as {plan,
// calls}, or an Ack or Acks as {text}, the JSON the module would have
// answered.
function decodeResponse(b) {
  if (b[1] !== VERSION) throw new Error(`presence: compact response of version ${b[1]}`);
  const r = new Reader(b);
  const kind = b[2];
  let out;
  if (kind === 0x63) { // 'c'
    const plan = r.varint();
    const calls = new Array(r.uvarint());
    for (let k = 0; k < calls.length; k++) {
      const tag = r.byte();
      const s = r.str();
      const c = tag === 0 ? { sha: s, keys: null, args: null } : { src: s, keys: null, args: null };
      c.keys = r.strs();
      c.args = r.strs();
      calls[k] = c;
    }
    out = { plan, calls };
  } else if (kind === 0x61) { // 'a'
    out = { text: `{"v":2,"result":${ackJSON(r)}${messagesJSON(r)}}` };
  } else if (kind === 0x6b) { // 'k'
    out = { text: `{"v":2,"result":{"acks":[${r.list(() => ackJSON(r)).join(",")}]}${messagesJSON(r)}}` };
  } else throw new Error(`presence: unknown compact response kind ${kind}`);
  if (r.i !== b.length) throw new Error("presence: trailing bytes in a compact response");
  return out;
}

const enumJSON = (names, x) => (x < names.length ? `"${names[x]}"` : String(x));

function ackJSON(r) {
  let s = `{"token":${r.json()}`;
  const flags = r.byte();
  if (flags & 1) s += `,"error":${errorJSON(r)}`;
  if (flags & 2) {
    const changes = r.list(
      () => `{"user":${r.json()},"from":${enumJSON(STATUSES, r.byte())},"to":${enumJSON(STATUSES, r.byte())},"at":${r.varint()}}`,
    );
    s += `,"changes":[${changes.join(",")}]`;
  } else s += ',"changes":null';
  if (flags & 4) s += ',"reassert":true';
  return s + "}";
}

function errorJSON(r) {
  let s = `{"code":${r.json()},"message":${r.json()}`;
  for (const name of ["field", "reason", "op"]) {
    const v = r.json();
    if (v !== '""') s += `,"${name}":${v}`;
  }
  const flags = r.byte();
  if (flags & 1) s += ',"unavailable":true';
  if (flags & 2) s += `,"cause":${errorJSON(r)}`;
  return s + "}";
}

function messagesJSON(r) {
  const ms = r.list(() => {
    let s = `{"kind":${r.json()},"channel":${r.json()},"payload":${r.json()}`;
    const id = r.json();
    return (id !== '""' ? s + `,"id":${id}` : s) + "}";
  });
  return ms.length > 0 ? `,"messages":[${ms.join(",")}]` : "";
}
