// wasi.mjs: the few WASI preview 1 functions a Go reactor built with
// GOOS=wasip1 -buildmode=c-shared imports (wasm/module, see ../ABI.md),
// for JavaScript runtimes that have WebAssembly but no WASI of their own
// (workerd, browsers). No files, no arguments, no environment: the Go
// runtime asks for its clocks, random bytes, and a way to print a crash;
// everything else answers "not supported" or "bad descriptor", which Go
// takes in its stride. Standard JavaScript only.

const ESUCCESS = 0;
const EBADF = 8;
const EINVAL = 28;
const ENOSYS = 52;

// WasiExit is thrown by proc_exit: the module asked to stop (a Go runtime
// crash ends so, after printing to fd 2). The instance is unusable after.
export class WasiExit extends Error {
  constructor(code) {
    super(`wasi: proc_exit(${code})`);
    this.code = code;
  }
}

// wasiImports returns the import object of a WASI preview 1 module.
// memory() gives the instance's memory (known only once instantiated);
// write(fd, text) receives what the module writes to fd 1 or 2 (by
// default, console.log and console.error); now() gives the wall clock
// in ms (default Date.now), monotonic() the monotonic clock in ms
// (default performance.now, or now where there is none).
export function wasiImports(memory, options = {}) {
  const write =
    options.write ??
    ((fd, text) => (fd === 2 ? console.error(text) : console.log(text)));
  const now = options.now ?? (() => Date.now());
  const monotonic =
    options.monotonic ??
    (typeof performance !== "undefined" ? () => performance.now() : now);
  const decoder = new TextDecoder();
  const pending = { 1: "", 2: "" };
  const view = () => new DataView(memory().buffer);
  const bytes = (ptr, len) => new Uint8Array(memory().buffer, ptr, len);
  const ns = (ms) => BigInt(Math.round(ms * 1e6));

  const wasi = {
    args_sizes_get(argc, bufSize) {
      const v = view();
      v.setUint32(argc, 0, true);
      v.setUint32(bufSize, 0, true);
      return ESUCCESS;
    },
    args_get() {
      return ESUCCESS;
    },
    environ_sizes_get(count, bufSize) {
      const v = view();
      v.setUint32(count, 0, true);
      v.setUint32(bufSize, 0, true);
      return ESUCCESS;
    },
    environ_get() {
      return ESUCCESS;
    },
    clock_time_get(id, _precision, out) {
      // 0: realtime; 1: monotonic; 2, 3: CPU time, which no JS runtime
      // measures: give the monotonic clock.
      if (id > 3) return EINVAL;
      view().setBigUint64(out, id === 0 ? ns(now()) : ns(monotonic()), true);
      return ESUCCESS;
    },
    clock_res_get(_id, out) {
      view().setBigUint64(out, 1000n, true);
      return ESUCCESS;
    },
    random_get(ptr, len) {
      // getRandomValues fills at most 65536 bytes a call.
      for (let at = 0; at < len; at += 65536) {
        crypto.getRandomValues(bytes(ptr + at, Math.min(65536, len - at)));
      }
      return ESUCCESS;
    },
    fd_write(fd, iovs, iovsLen, nwritten) {
      if (fd !== 1 && fd !== 2) return EBADF;
      const v = view();
      let n = 0;
      let text = "";
      for (let i = 0; i < iovsLen; i++) {
        const ptr = v.getUint32(iovs + i * 8, true);
        const len = v.getUint32(iovs + i * 8 + 4, true);
        text += decoder.decode(bytes(ptr, len), { stream: true });
        n += len;
      }
      // Print whole lines; keep the rest for the next write.
      const lines = (pending[fd] + text).split("\n");
      pending[fd] = lines.pop();
      for (const l of lines) write(fd, l);
      view().setUint32(nwritten, n, true);
      return ESUCCESS;
    },
    fd_read() {
      return EBADF;
    },
    fd_close() {
      return EBADF;
    },
    fd_fdstat_get(fd, out) {
      if (fd > 2) return EBADF;
      // A character device, no flags, every right.
      const v = view();
      v.setUint8(out, 2);
      v.setUint16(out + 2, 0, true);
      v.setBigUint64(out + 8, 0xffffffffffffffffn, true);
      v.setBigUint64(out + 16, 0xffffffffffffffffn, true);
      return ESUCCESS;
    },
    fd_fdstat_set_flags() {
      return ENOSYS;
    },
    fd_prestat_get() {
      return EBADF; // no preopened directories
    },
    fd_prestat_dir_name() {
      return EBADF;
    },
    sched_yield() {
      return ESUCCESS;
    },
    poll_oneoff(inPtr, outPtr, nsubs, neventsPtr) {
      // Go polls only to sleep, when it has nothing to run. Nothing here
      // blocks: every clock subscription fires at once, every other one
      // fails (there are no descriptors to wait on).
      const v = view();
      for (let i = 0; i < nsubs; i++) {
        const sub = inPtr + i * 48;
        const ev = outPtr + i * 32;
        const tag = v.getUint8(sub + 8);
        v.setBigUint64(ev, v.getBigUint64(sub, true), true); // userdata
        v.setUint16(ev + 8, tag === 0 ? ESUCCESS : EBADF, true); // error
        v.setUint8(ev + 10, tag); // type
        for (let k = 11; k < 32; k++) v.setUint8(ev + k, 0);
      }
      v.setUint32(neventsPtr, nsubs, true);
      return ESUCCESS;
    },
    proc_exit(code) {
      for (const fd of [1, 2]) if (pending[fd]) write(fd, pending[fd]);
      throw new WasiExit(code);
    },
  };
  return { wasi_snapshot_preview1: wasi };
}
