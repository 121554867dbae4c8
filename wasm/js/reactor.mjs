// reactor.mjs: one instance of the presence module (the WASI reactor,
// wasm/module, ABI v2, see ../ABI.md) in any JavaScript runtime with
// WebAssembly — Node.js, Deno, workerd, browsers — through the WASI shim
// of wasi.mjs. The instance's call is synchronous and does no I/O; a
// PlanHost (plans.mjs) drives its plans. Standard JavaScript only.

import { wasiImports } from "./wasi.mjs";

const encoder = new TextEncoder();

// Reactor is one instance of the module: its own memory and engine.
export class Reactor {
  // constructor instantiates a compiled WebAssembly.Module synchronously
  // and initialises Go's runtime. In workerd, do it inside a handler, not
  // at global scope: the runtime draws random bytes as it starts.
  constructor(module, options = {}) {
    let memory = null;
    const instance = new WebAssembly.Instance(module, wasiImports(() => memory, options));
    memory = instance.exports.memory;
    this.exports = instance.exports;
    this.memory = memory;
    this.exports._initialize();
    const v = this.exports.presence_abi_version();
    if (v !== 2) throw new Error(`presence module speaks ABI v${v}, this host v2`);
    this.cap = 0;
    this.buf = 0;
    this.grow(64 << 10);
  }

  // grow replaces the request buffer with one of at least size bytes.
  grow(size) {
    if (this.buf) this.exports.presence_free(this.buf);
    this.cap = Math.max(size, this.cap * 2);
    this.buf = this.exports.presence_alloc(this.cap);
    if (this.buf === 0) throw new Error(`presence_alloc(${this.cap}) refused`);
  }

  // call hands the module one request, JSON text or bytes (JSON, or the
  // compact form), and returns the response's bytes: a view of the
  // module's memory, valid until the next call.
  call(request) {
    let written;
    if (typeof request === "string") {
      // A UTF-8 text is at most three bytes per UTF-16 unit.
      if (request.length * 3 > this.cap) this.grow(request.length * 3);
      ({ written } = encoder.encodeInto(request, new Uint8Array(this.memory.buffer, this.buf, this.cap)));
    } else {
      if (request.length > this.cap) this.grow(request.length);
      new Uint8Array(this.memory.buffer, this.buf, request.length).set(request);
      written = request.length;
    }
    const r = this.exports.presence_call(this.buf, written);
    const ptr = Number(BigInt.asUintN(64, r) >> 32n);
    const len = Number(BigInt.asUintN(64, r) & 0xffffffffn);
    return new Uint8Array(this.memory.buffer, ptr, len);
  }
}

