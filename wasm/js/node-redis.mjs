// node-redis.mjs: a pipeline for PlanHost (plans.mjs) over node-redis
// (the `redis` npm package, pinned in ../package.json), the maintained
// Redis client for Node.js; Deno runs it too, through its Node
// compatibility. Commands issued in one tick leave together (node-redis
// pipelines them on its connection), and replies are read as bytes and
// digits, so every string and every int64 reaches the module exactly.
import { createClient, ErrorReply, RESP_TYPES } from "redis";
import { errorCode, str, unavailableResult } from "./resp.mjs";

// connect returns a node-redis client for addr ("host:port") that reads
// strings as bytes and integers as their digits.
export async function connect(addr) {
  const client = createClient({ url: `redis://${addr}`, RESP: 2, disableOfflineQueue: true }).withTypeMapping({
    [RESP_TYPES.BLOB_STRING]: Buffer,
    [RESP_TYPES.SIMPLE_STRING]: Buffer,
    [RESP_TYPES.NUMBER]: String,
  });
  client.on("error", () => {}); // a failed command reports it; reconnects are the client's
  await client.connect();
  return client;
}

// pipelineOf returns the pipeline function of a PlanHost over client.
export function pipelineOf(client) {
  return async (commands) => {
    const settled = await Promise.allSettled(commands.map((args) => client.sendCommand(args.map(arg))));
    return settled.map((s) => (s.status === "fulfilled" ? `{"value":${value(s.value)}}` : failure(s.reason)));
  };
}

// arg turns an argument of a call (a string, or {b: base64} for bytes
// that are not UTF-8) into what node-redis sends.
function arg(a) {
  return typeof a === "string" ? a : Buffer.from(a.b, "base64");
}

// value is the ABI text of a reply: nil is null, an integer its digits, a
// string its bytes, an array its items. A Lua script never returns an
// error inside an array; one reads as null.
function value(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "string") return v; // an integer, as digits
  if (Buffer.isBuffer(v)) return str(v);
  if (Array.isArray(v)) return `[${v.map(value).join(",")}]`;
  if (v instanceof ErrorReply) return "null";
  throw new TypeError(`unexpected reply ${typeof v}`);
}

// failure is the ABI result of a command that failed: Redis's error
// reply, or the connection's failure (which may be retried).
function failure(err) {
  if (err instanceof ErrorReply) {
    return JSON.stringify({ error: { code: errorCode(err.message), message: err.message } });
  }
  return unavailableResult(err && err.message ? err.message : String(err));
}
