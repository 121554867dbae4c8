// plans.mjs: the host side of the presence module's plans (ABI v2, see
// ../ABI.md), for any JavaScript runtime. The module answers each request
// at once, with its end or the script calls its plan waits for; a
// PlanHost sends those calls to Redis through the pipeline it is given
// and resumes each plan with its results, many plans in flight together.
// It does no I/O of its own; standard JavaScript only.

import { callCommand } from "./resp.mjs";

const text = new TextDecoder();

// PlanHost drives plans of one module instance.
//
// call(requestText) is the instance's synchronous call, returning the
// response as text or bytes. pipeline(commands) sends Redis commands in
// one round trip and resolves to one ABI result text per command
// ({"value":…} or {"error":…}). now() gives the now of a resume (the
// host's clock, ms); without it, a resume carries the now of the request
// that started its plan, which makes a scripted run exact.
export class PlanHost {
  constructor({ call, pipeline, now }) {
    this.call = call;
    this.pipeline = pipeline;
    this.now = now;
    this.rounds = 0;
  }

  // send hands the module one request and returns its response text.
  send(request) {
    const out = this.call(typeof request === "string" ? request : JSON.stringify(request));
    return typeof out === "string" ? out : text.decode(out);
  }

  // run runs requests (objects or JSON texts) as plans in flight together:
  // each round sends the calls of every plan still waiting in one
  // pipeline, in the order the plans started, then resumes each plan with
  // its own results. It resolves to the final response text of each
  // request ({"v":2,"result":…} or {"v":2,"error":…}).
  async run(requests) {
    const out = new Array(requests.length);
    let live = [];
    requests.forEach((req, i) => {
      const r = typeof req === "string" ? JSON.parse(req) : req;
      this.settle(out, live, i, r.now ?? 0, this.send(req));
    });
    while (live.length > 0) {
      const commands = live.flatMap((f) => f.calls.map(callCommand));
      this.rounds++;
      const results = await this.pipeline(commands);
      const waiting = live;
      live = [];
      let at = 0;
      for (const f of waiting) {
        const mine = results.slice(at, at + f.calls.length);
        at += f.calls.length;
        const now = this.now ? this.now() : f.now;
        const resume = `{"v":2,"op":"resume","now":${now},"args":{"plan":${f.plan},"results":[${mine.join(",")}]}}`;
        this.settle(out, live, f.i, f.now, this.send(resume));
      }
    }
    return out;
  }

  // settle records a response: the plan's end in out, or its calls in live.
  settle(out, live, i, now, response) {
    const r = JSON.parse(response);
    if (r.calls) live.push({ i, now, plan: r.plan, calls: r.calls });
    else out[i] = response;
  }

  // do runs one operation and returns its result, or throws the error the
  // module answered.
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
