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
}

// Runtime holds the compiled module. It is safe for concurrent use.
type Runtime struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	output   io.Writer
	seq      atomic.Uint64
}

// exports the module must have.
var requiredExports = []string{"_initialize", "presence_abi_version", "presence_alloc", "presence_free", "presence_call"}

// NewRuntime compiles the module (the bytes of a build of wasm/module) and
// defines the host functions it imports.
func NewRuntime(ctx context.Context, module []byte, opt Options) (*Runtime, error) {
	cfg := wazero.NewRuntimeConfig()
	if opt.Interpreter {
		cfg = wazero.NewRuntimeConfigInterpreter()
	}
	if opt.Cache != nil {
		cfg = cfg.WithCompilationCache(opt.Cache)
	}
	r := &Runtime{rt: wazero.NewRuntimeWithConfig(ctx, cfg), output: opt.Output}
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
	i32 := api.ValueTypeI32
	_, err := r.rt.NewHostModuleBuilder("presence").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostEval), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("eval").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostEvalResult), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("eval_result").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostPublish), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).Export("publish").
		Instantiate(ctx)
	if err != nil {
		return fail("defining host functions", err)
	}
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

	mu      sync.Mutex
	buf     uint32 // request buffer in the module's memory
	bufCap  uint32
	pending []byte // the script response eval_result hands over
	closed  bool
}

type instanceKey struct{}

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
	in := &Instance{mod: mod, store: store, call: mod.ExportedFunction("presence_call"),
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

// Call hands the module one request (ABI JSON) and returns its response.
// The error is for a failure of the module itself (*ModuleError); what
// the module answers, errors included, is in the response.
func (in *Instance) Call(ctx context.Context, request []byte) ([]byte, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
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
	res, err := in.call.Call(context.WithValue(ctx, instanceKey{}, in), uint64(in.buf), uint64(size))
	in.pending = nil
	if err != nil {
		return nil, in.trapped(ctx, "presence_call", err)
	}
	out, ok := mem.Read(uint32(res[0]>>32), uint32(res[0]))
	if !ok {
		return nil, &ModuleError{Op: "presence_call", Err: errors.New("response outside memory")}
	}
	return bytes.Clone(out), nil
}

// trapped closes the instance after a trap and returns the error.
func (in *Instance) trapped(ctx context.Context, op string, err error) error {
	in.closed = true
	in.mod.Close(ctx)
	return &ModuleError{Op: op, Err: err}
}

// Do runs one operation: it encodes the request, calls the module and
// decodes the response. It returns the op's result type (abi.NewResult),
// or the error the module answered, rebuilt (abi.Error.Err), or a
// *ModuleError, or an *abi.DecodeError for a response that does not decode.
func (in *Instance) Do(ctx context.Context, op string, now int64, args any) (any, error) {
	req, err := abi.EncodeRequest(abi.Request{Op: op, Now: now, Args: args})
	if err != nil {
		return nil, err
	}
	out, err := in.Call(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := abi.DecodeResponse(op, out)
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error.Err()
	}
	return resp.Result, nil
}

// instance returns the instance a host function serves.
func instance(ctx context.Context) *Instance {
	in, _ := ctx.Value(instanceKey{}).(*Instance)
	return in
}

// hostEval implements the import presence.eval(ptr, size) → response size.
func hostEval(ctx context.Context, m api.Module, stack []uint64) {
	in := instance(ctx)
	if in == nil {
		stack[0] = 0
		return
	}
	ptr, size := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	var resp []byte
	if req, ok := m.Memory().Read(ptr, size); !ok {
		resp = abi.EncodeScriptFailure(&abi.DecodeError{What: "script request", Reason: "outside the module's memory"})
	} else if calls, err := abi.DecodeScriptRequest(req); err != nil {
		resp = abi.EncodeScriptFailure(err)
	} else {
		resp = in.eval(ctx, calls)
	}
	in.pending = resp
	stack[0] = api.EncodeU32(uint32(len(resp)))
}

// eval runs calls on the store; a panic or a wrong number of results
// fails the whole request.
func (in *Instance) eval(ctx context.Context, calls []core.Call) (resp []byte) {
	defer func() {
		if p := recover(); p != nil {
			resp = abi.EncodeScriptFailure(fmt.Errorf("presence/host: store panicked: %v", p))
		}
	}()
	res := in.store.Eval(ctx, calls)
	if len(res) != len(calls) {
		return abi.EncodeScriptFailure(fmt.Errorf("%w: store returned %d results for %d calls", core.ErrReply, len(res), len(calls)))
	}
	return abi.EncodeScriptResponse(res)
}

// hostEvalResult implements presence.eval_result(ptr, size) → 0 or 1.
func hostEvalResult(ctx context.Context, m api.Module, stack []uint64) {
	in := instance(ctx)
	ptr, size := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	if in == nil || int(size) != len(in.pending) || !m.Memory().Write(ptr, in.pending) {
		stack[0] = 1
		return
	}
	in.pending = nil
	stack[0] = 0
}

// hostPublish implements presence.publish(ch, chSize, msg, msgSize) → 0 or 1.
func hostPublish(ctx context.Context, m api.Module, stack []uint64) {
	in := instance(ctx)
	ch, ok1 := m.Memory().Read(api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	msg, ok2 := m.Memory().Read(api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
	if in == nil || !ok1 || !ok2 {
		stack[0] = 1
		return
	}
	if in.pub != nil {
		if err := in.publish(ctx, string(ch), bytes.Clone(msg)); err != nil {
			stack[0] = 1
			return
		}
	}
	stack[0] = 0
}

func (in *Instance) publish(ctx context.Context, channel string, msg []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("presence/host: publisher panicked: %v", p)
		}
	}()
	return in.pub.Publish(ctx, channel, msg)
}
