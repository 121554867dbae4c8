// phases.mjs: an isolate's first request in Node.js or Deno, part by part,
// started by `go run ./wasm/bench -phases`: instantiating the compiled
// module with Go's runtime initialised, the first configure, the first
// heartbeat (over the recorded replies, as run.mjs).
//
//   node phases.mjs --wasm presence.wasm --replies replies.json [--until init|configure]
//   node phases.mjs --wasm bare.wasm --floor
//
// Prints one JSON line on stderr: each part's CPU in ms (getrusage, every
// thread). stdout is left to V8's trace of what it compiles
// (--trace-wasm-compilation-times), which it prints through a buffer of
// its own that a line of this script's would land in the middle of; for
// the same reason main.go counts what each part compiles in runs that
// stop after it (--until). With --floor the module is a reactor
// with nothing of ours (wasm/internal/sizefloor), of which only the first
// part runs.
import fs from "node:fs";
import process from "node:process";
import { parseArgs } from "node:util";
import { PlanHost } from "../js/plans.mjs";
import { Reactor } from "../js/reactor.mjs";
import { wasiImports } from "../js/wasi.mjs";
import { beat, config, replayOf, T0 } from "./shared.mjs";

const { values: opt } = parseArgs({
  args: globalThis.Deno ? globalThis.Deno.args : process.argv.slice(2),
  options: {
    wasm: { type: "string" },
    replies: { type: "string" },
    floor: { type: "boolean", default: false },
    until: { type: "string", default: "first_beat" },
  },
});

function cpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

const module = new WebAssembly.Module(fs.readFileSync(opt.wasm));
const out = {};
let c = cpuMs();
if (opt.floor) {
  let memory = null;
  const instance = new WebAssembly.Instance(module, wasiImports(() => memory));
  memory = instance.exports.memory;
  instance.exports._initialize();
  out.init_ms = cpuMs() - c;
} else {
  const replay = replayOf(JSON.parse(fs.readFileSync(opt.replies, "utf8")));
  const reactor = new Reactor(module);
  const host = new PlanHost({ call: (r) => reactor.call(r), pipeline: replay, now: () => T0, compact: true });
  out.init_ms = cpuMs() - c;
  if (opt.until !== "init") {
    c = cpuMs();
    await host.do("configure", config, T0);
    out.configure_ms = cpuMs() - c;
  }
  if (opt.until === "first_beat") {
    c = cpuMs();
    const resp = (await host.run([{ v: 2, op: "heartbeat", now: T0, args: beat(0) }]))[0];
    out.first_beat_ms = cpuMs() - c;
    if (!resp.startsWith('{"v":2,"result"')) throw new Error(`bench: ${resp}`);
  }
}
console.error(JSON.stringify(out));
