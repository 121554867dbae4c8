package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
)

// ErrModule is matched by every *ModuleError.
var ErrModule = errors.New("presence/host: module failed")

// ModuleError reports a failure of the module itself (a trap, a missing
// export, an ABI version mismatch), as opposed to an error the module
// returned. It matches ErrModule. An instance whose module trapped is
// closed.
type ModuleError struct {
	Op  string // what the host was doing, such as "presence_call"
	Err error
}

// Error returns "presence/host: OP: ERR".
func (e *ModuleError) Error() string { return "presence/host: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ModuleError) Unwrap() error { return e.Err }

// Is matches ErrModule.
func (e *ModuleError) Is(target error) bool { return target == ErrModule }

// Options configures a Runtime. The zero value is the default.
type Options struct {
	// Cache keeps compiled code across runtimes (and, with
	// wazero.NewCompilationCacheWithDir, across processes). Default none.
	Cache wazero.CompilationCache
	// Interpreter runs the module in wazero's interpreter instead of
	// compiling it to machine code: slower, but available everywhere.
	Interpreter bool
	// Output receives what the module writes to stdout and stderr (the Go
	// runtime's own messages). Default: discarded.
	Output io.Writer
	// JSON makes the instances speak only JSON. By default the requests
	// that have a compact form (heartbeat, heartbeat_batch, resume: see
	// abi.EncodeRequestCompact) travel in it, and so do their responses,
	// which costs the module several times less than JSON.
	JSON bool
}

// Runtime holds the compiled module. It is safe for concurrent use.
type Runtime struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	output   io.Writer
	json     bool
	seq      atomic.Uint64
}

// exports the module must have.
var requiredExports = []string{"_initialize", "presence_abi_version", "presence_alloc", "presence_free", "presence_call"}

// NewRuntime compiles the module (the bytes of a build of wasm/module). The
// module imports nothing from the host but WASI.
func NewRuntime(ctx context.Context, module []byte, opt Options) (*Runtime, error) {
	cfg := wazero.NewRuntimeConfig()
	if opt.Interpreter {
		cfg = wazero.NewRuntimeConfigInterpreter()
	}
	if opt.Cache != nil {
		cfg = cfg.WithCompilationCache(opt.Cache)
	}
	r := &Runtime{rt: wazero.NewRuntimeWithConfig(ctx, cfg), output: opt.Output, json: opt.JSON}
	if r.output == nil {
		r.output = io.Discard
	}
	fail := func(op string, err error) (*Runtime, error) {
		r.rt.Close(ctx)
		return nil, &ModuleError{Op: op, Err: err}
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r.rt); err != nil {
		return fail("instantiating WASI", err)
	}
	var err error
	if r.compiled, err = r.rt.CompileModule(ctx, module); err != nil {
		return fail("compiling", err)
	}
	exports := r.compiled.ExportedFunctions()
	for _, name := range requiredExports {
		if _, ok := exports[name]; !ok {
			return fail("compiling", fmt.Errorf("the module does not export %s: is it a build of wasm/module with -buildmode=c-shared?", name))
		}
	}
	return r, nil
}

// Close closes the runtime and every instance of it.
func (r *Runtime) Close(ctx context.Context) error { return r.rt.Close(ctx) }

// Instance is one instance of the module, with its own memory and engine,
// sending its script calls to one store. Calls into it are serialised: it
// is safe for concurrent use, one call at a time.
type Instance struct {
	mod                  api.Module
	call, alloc, release api.Function
	store                core.Store
	pub                  core.Publisher
	json                 bool // requests in JSON only (Options.JSON)

	mu        sync.Mutex // serialises calls into the module
	runMu     sync.Mutex // serialises Run: plan IDs are the instance's
	buf       uint32     // request buffer in the module's memory
	bufCap    uint32
	closed    bool
	delivered []string // outbox IDs of the messages Run published, to acknowledge
	quiet     bool     // drop the messages instead of publishing them (EngineOptions.Publish unset)
}

// NewInstance instantiates the module, runs _initialize and checks the ABI
// version. The instance's script calls go to store; its publications
// (EngineOptions.Publish) go to store if it implements core.Publisher and
// are dropped otherwise.
func (r *Runtime) NewInstance(ctx context.Context, store core.Store) (*Instance, error) {
	if store == nil {
		return nil, &core.InputError{Field: "store", Reason: "must not be nil"}
	}
	name := "presence-" + strconv.FormatUint(r.seq.Add(1), 10)
	cfg := wazero.NewModuleConfig().WithName(name).WithStartFunctions().
		WithSysWalltime().WithSysNanotime().WithSysNanosleep().WithRandSource(rand.Reader).
		WithStdout(r.output).WithStderr(r.output)
	mod, err := r.rt.InstantiateModule(ctx, r.compiled, cfg)
	if err != nil {
		return nil, &ModuleError{Op: "instantiating", Err: err}
	}
	in := &Instance{mod: mod, store: store, json: r.json, call: mod.ExportedFunction("presence_call"),
		alloc: mod.ExportedFunction("presence_alloc"), release: mod.ExportedFunction("presence_free")}
	in.pub, _ = store.(core.Publisher)
	if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
		mod.Close(ctx)
		return nil, &ModuleError{Op: "_initialize", Err: err}
	}
	res, err := mod.ExportedFunction("presence_abi_version").Call(ctx)
	if err != nil {
		mod.Close(ctx)
		return nil, &ModuleError{Op: "presence_abi_version", Err: err}
	}
	if v := int(api.DecodeU32(res[0])); v != abi.Version {
		mod.Close(ctx)
		return nil, &ModuleError{Op: "presence_abi_version", Err: &abi.VersionError{Got: v}}
	}
	return in, nil
}

// Close closes the instance.
func (in *Instance) Close(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	return in.mod.Close(ctx)
}

// Call hands the module one request (JSON, or the compact form) and
// returns its response.
// The error is for a failure of the module itself (*ModuleError); what
// the module answers, errors included, is in the response.
func (in *Instance) Call(ctx context.Context, request []byte) ([]byte, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	out, err := in.callLocked(ctx, request)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(out), nil
}

// callLocked is Call, with in.mu held, returning the response in the
// module's memory: valid until the next call.
func (in *Instance) callLocked(ctx context.Context, request []byte) ([]byte, error) {
	if in.closed {
		return nil, &ModuleError{Op: "presence_call", Err: errors.New("instance closed")}
	}
	if len(request) > abi.MaxMessage {
		return nil, &ModuleError{Op: "presence_call", Err: errors.New("request larger than abi.MaxMessage")}
	}
	size := uint32(len(request))
	if size > in.bufCap || in.buf == 0 {
		if in.buf != 0 {
			if _, err := in.release.Call(ctx, uint64(in.buf)); err != nil {
				return nil, in.trapped(ctx, "presence_free", err)
			}
			in.buf, in.bufCap = 0, 0
		}
		want := max(size, 64<<10)
		res, err := in.alloc.Call(ctx, uint64(want))
		if err != nil {
			return nil, in.trapped(ctx, "presence_alloc", err)
		}
		if in.buf = api.DecodeU32(res[0]); in.buf == 0 {
			return nil, &ModuleError{Op: "presence_alloc", Err: errors.New("no buffer")}
		}
		in.bufCap = want
	}
	mem := in.mod.Memory()
	if !mem.Write(in.buf, request) {
		return nil, &ModuleError{Op: "presence_call", Err: errors.New("request buffer outside memory")}
	}
	res, err := in.call.Call(ctx, uint64(in.buf), uint64(size))
	if err != nil {
		return nil, in.trapped(ctx, "presence_call", err)
	}
	out, ok := mem.Read(uint32(res[0]>>32), uint32(res[0]))
	if !ok {
		return nil, &ModuleError{Op: "presence_call", Err: errors.New("response outside memory")}
	}
	return out, nil
}

// trapped closes the instance after a trap and returns the error.
func (in *Instance) trapped(ctx context.Context, op string, err error) error {
	in.closed = true
	in.mod.Close(ctx)
	return &ModuleError{Op: op, Err: err}
}

// Op is one operation for Instance.Run: Op and Args as in an
// abi.Request; Run sets Result (the op's result type, abi.NewResult) or
// Err (the error the module answered, rebuilt by abi.Error.Err, or an
// *abi.DecodeError for a response that does not decode).
type Op struct {
	Op   string
	Args any

	Result any
	Err    error
}

// Do runs one operation: it encodes the request, runs its plan to the end
// over the instance's store and decodes the result. It returns the op's
// result type (abi.NewResult), or the error the module answered, rebuilt
// (abi.Error.Err), or a *ModuleError, or an *abi.DecodeError for a
// response that does not decode.
func (in *Instance) Do(ctx context.Context, op string, now int64, args any) (any, error) {
	o := &Op{Op: op, Args: args}
	if err := in.Run(ctx, func() int64 { return now }, o); err != nil {
		return nil, err
	}
	return o.Result, o.Err
}

// Run runs ops as plans in flight together in the instance: it starts
// each (at now()), then, round after round, sends the calls of every plan
// still waiting to the store in one Eval (one pipelined round trip where
// the store pipelines), splits the results back and resumes each plan
// with its own (at now() after the round trip), until every plan has
// ended. A plan publishes its messages through the store (when it
// implements core.Publisher and the engine was configured with Publish)
// as soon as it ends. More than abi.MaxPlans ops run in windows of
// abi.MaxPlans. The error is a *ModuleError only (the module trapped or
// the instance is closed); each op's outcome is in the op. Calls of Run
// on one instance are serialised.
func (in *Instance) Run(ctx context.Context, now func() int64, ops ...*Op) error {
	in.runMu.Lock()
	defer in.runMu.Unlock()
	for start := 0; start < len(ops); start += abi.MaxPlans {
		if err := in.run(ctx, now, ops[start:min(start+abi.MaxPlans, len(ops))]); err != nil {
			return err
		}
	}
	// The messages are out: their outbox entries may go (docs/design.md §7).
	// A failed acknowledgement costs a repeat, which readers drop.
	if len(in.delivered) > 0 {
		ack := &Op{Op: abi.OpAck, Args: &abi.AckArgs{IDs: in.delivered}}
		in.delivered = nil
		return in.run(ctx, now, []*Op{ack})
	}
	return nil
}

// flight is a plan of an op in flight, with the calls it waits for.
type flight struct {
	op    *Op
	plan  int64
	calls []core.Call
}

func (in *Instance) run(ctx context.Context, now func() int64, ops []*Op) error {
	live := make([]flight, 0, len(ops))
	for _, o := range ops {
		req, err := in.encode(abi.Request{Op: o.Op, Now: now(), Args: o.Args})
		if err != nil {
			o.Result, o.Err = nil, err
			continue
		}
		f, err := in.exchange(ctx, o, req)
		if err != nil {
			return err
		}
		if f != nil {
			live = append(live, *f)
		}
	}
	var calls []core.Call
	for len(live) > 0 {
		calls = calls[:0]
		for _, f := range live {
			calls = append(calls, f.calls...)
		}
		res := in.eval(ctx, calls)
		t := now()
		next := live[:0]
		for _, f := range live {
			part := res[:len(f.calls)]
			res = res[len(f.calls):]
			req, err := in.encode(abi.Request{Op: abi.OpResume, Now: t,
				Args: &abi.Resume{Plan: f.plan, Results: part}})
			if err != nil {
				f.op.Result, f.op.Err = nil, err
				continue
			}
			g, err := in.exchange(ctx, f.op, req)
			if err != nil {
				return err
			}
			if g != nil {
				next = append(next, *g)
			}
		}
		live = next
	}
	return nil
}

// encode returns the request r in the compact form where it has one, in
// JSON if it has not or the runtime speaks only JSON.
func (in *Instance) encode(r abi.Request) ([]byte, error) {
	if in.json {
		return abi.EncodeRequest(r)
	}
	return abi.EncodeRequestCompact(r)
}

// exchange hands the module one request of o's plan and reads the
// response: the plan's next calls (returned), or its end (set in o, and
// its messages published).
func (in *Instance) exchange(ctx context.Context, o *Op, req []byte) (*flight, error) {
	in.mu.Lock()
	out, err := in.callLocked(ctx, req)
	if err != nil {
		in.mu.Unlock()
		return nil, err
	}
	resp, err := abi.DecodeResponse(o.Op, out) // copies what it keeps
	in.mu.Unlock()
	switch {
	case err != nil:
		o.Result, o.Err = nil, err
	case resp.Calls != nil:
		return &flight{op: o, plan: resp.Plan, calls: resp.Calls}, nil
	case resp.Error != nil:
		o.Result, o.Err = nil, resp.Error.Err()
	default:
		o.Result, o.Err = resp.Result, nil
		delivered := true
		if in.pub != nil && !in.quiet {
			for _, m := range resp.Messages {
				delivered = in.publish(ctx, m.Channel, []byte(m.Payload)) && delivered
			}
		}
		for _, m := range resp.Messages {
			if delivered && m.ID != "" {
				in.delivered = append(in.delivered, m.ID)
			}
		}
	}
	return nil, nil
}

// eval runs calls on the store; a panic or a wrong number of results
// fails every call.
func (in *Instance) eval(ctx context.Context, calls []core.Call) (res []core.Result) {
	defer func() {
		if p := recover(); p != nil {
			res = failAll(len(calls), fmt.Errorf("presence/host: store panicked: %v", p))
		}
	}()
	res = in.store.Eval(ctx, calls)
	if len(res) != len(calls) {
		return failAll(len(calls), fmt.Errorf("%w: store returned %d results for %d calls", core.ErrReply, len(res), len(calls)))
	}
	return res
}

func failAll(n int, err error) []core.Result {
	res := make([]core.Result, n)
	for i := range res {
		res[i].Err = err
	}
	return res
}

// publish hands a message to the store's publisher; a failure (or panic)
// changes nothing the plan did, as for a native engine.
func (in *Instance) publish(ctx context.Context, channel string, msg []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return in.pub.Publish(ctx, channel, msg) == nil
}
