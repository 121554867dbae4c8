// redis-sync.mjs: a synchronous Redis script runner for the presence
// module's JS build. The module calls its store synchronously, so this
// client does the network I/O in a worker thread and blocks the main
// thread with Atomics.wait until the replies are in (Node.js allows that
// on its main thread).
import { Worker } from "node:worker_threads";

const SHARED_BYTES = 16 << 20;

export class SyncRedis {
  // addr is "host:port".
  constructor(addr) {
    const i = addr.lastIndexOf(":");
    this.shared = new SharedArrayBuffer(8 + SHARED_BYTES);
    this.state = new Int32Array(this.shared, 0, 2);
    this.out = new Uint8Array(this.shared, 8);
    this.worker = new Worker(new URL("./redis-worker.mjs", import.meta.url), {
      workerData: { host: addr.slice(0, i), port: Number(addr.slice(i + 1)), shared: this.shared },
    });
    this.decoder = new TextDecoder();
    this.calls = 0;
  }

  // pipeline sends commands (arrays of strings, or {b: base64} for binary
  // arguments) in one round trip and returns the script response text.
  pipeline(commands) {
    Atomics.store(this.state, 0, 0);
    this.worker.postMessage(commands);
    while (Atomics.wait(this.state, 0, 0, 10000) === "timed-out") {
      return JSON.stringify({ v: 1, error: { code: "unavailable", message: "redis: timed out" } });
    }
    this.calls += commands.length;
    return this.decoder.decode(this.out.slice(0, Atomics.load(this.state, 1)));
  }

  close() {
    return this.worker.terminate();
  }
}

// scriptRunner returns the eval function presence.newInstance takes: it
// turns a script request (JSON text) into EVALSHA/EVAL commands on redis
// and returns the script response (JSON text).
export function scriptRunner(redis) {
  return (requestText) => {
    const req = JSON.parse(requestText);
    if (req.v !== 1) {
      return JSON.stringify({ v: 1, error: { code: "version", message: `script request version ${req.v}` } });
    }
    const commands = req.calls.map((c) =>
      c.src !== undefined
        ? ["EVAL", c.src, String(c.keys.length), ...c.keys, ...c.args]
        : ["EVALSHA", c.sha, String(c.keys.length), ...c.keys, ...c.args],
    );
    return redis.pipeline(commands);
  };
}
