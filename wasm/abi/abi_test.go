package abi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/slot"
	"github.com/presencekit/presence/wasm/abi"
)

// roundTrip encodes v as JSON and decodes it strictly into a new T, the way
// DecodeResponse reads a result.
func roundTrip[T any](t *testing.T, op string, v T) T {
	t.Helper()
	b := abi.EncodeResponse(abi.Response{Result: &v})
	if !json.Valid(b) {
		t.Fatalf("%s: invalid JSON %s", op, b)
	}
	resp, err := abi.DecodeResponse(op, b)
	if err != nil {
		t.Fatalf("%s: %v\n%s", op, err, b)
	}
	return *resp.Result.(*T)
}

var at = time.UnixMilli(1772366400123)

func TestResultsRoundTrip(t *testing.T) {
	changes := []core.Change{{User: "u", From: core.StatusOffline, To: core.StatusDND, At: at}}
	ack := core.Ack{Token: "t", Err: core.ErrSessionReplaced, Changes: changes}
	if got := roundTrip(t, abi.OpHeartbeat, abi.FromAck(ack)).Core(); !reflect.DeepEqual(got, ack) {
		t.Errorf("ack: got %+v want %+v", got, ack)
	}
	lr := core.LoginResult{Token: "x", Kicked: []core.Kick{{User: "u", Device: "d", Kind: core.KindIOS, Gateway: "g", At: at}}}
	if got := roundTrip(t, abi.OpLogin, abi.FromLoginResult(lr)).Core(); !reflect.DeepEqual(got, lr) {
		t.Errorf("login: got %+v want %+v", got, lr)
	}
	st := core.UserStatus{User: "u", Status: core.StatusAway, Manual: core.ManualInvisible, ManualUntil: at, At: at,
		Devices: []core.Device{
			{ID: "a", Kind: core.KindWeb, Gateway: "g", State: core.StatusAway, LoginAt: at, LastSeen: at, LastActive: at,
				Meta: map[string]string{"k": "v\x1f"}},
			{ID: "b", Kind: core.Kind(9), State: core.Status(7), Background: true, Meta: map[string]string{}},
		}}
	if got := roundTrip(t, abi.OpStatus, abi.FromUserStatus(st)).Core(); !reflect.DeepEqual(got, st) {
		t.Errorf("status: got %+v want %+v", got, st)
	}
	empty := core.UserStatus{User: "v", At: at}
	if got := roundTrip(t, abi.OpStatus, abi.FromUserStatus(empty)).Core(); !reflect.DeepEqual(got, empty) {
		t.Errorf("empty status: got %+v want %+v", got, empty)
	}
	pg := core.MemberPage{Members: []core.Member{}, Next: "1.2"}
	if got := roundTrip(t, abi.OpMembers, abi.FromMemberPage(pg)).Core(); !reflect.DeepEqual(got, pg) {
		t.Errorf("members: got %+v want %+v", got, pg)
	}
	c := core.Count{N: 1 << 40, AsOf: at, Stale: true}
	if got := roundTrip(t, abi.OpCount, abi.FromCount(c)).Core(); !reflect.DeepEqual(got, c) {
		t.Errorf("count: got %+v want %+v", got, c)
	}
	sr := core.SweepReport{Buckets: 1, Held: 2, Visited: 3, Removed: 4, Released: 5, Changes: changes, Steps: 6, Duration: 1500 * time.Microsecond}
	if got := roundTrip(t, abi.OpSweepUsers, abi.FromSweepReport(sr)).Core(); !reflect.DeepEqual(got, sr) {
		t.Errorf("sweep: got %+v want %+v", got, sr)
	}
	end := core.Ended{Removed: true}
	if got := roundTrip(t, abi.OpLogout, abi.FromEnded(end)).Core(); !reflect.DeepEqual(got, end) {
		t.Errorf("ended: got %+v want %+v", got, end)
	}
}

func TestArgumentsRoundTrip(t *testing.T) {
	pol := core.PolicyExclusivePerKind
	hbs := []core.Heartbeat{
		{User: "u", Device: "d", Kind: core.KindAndroid, Gateway: "g", Token: "t", Active: true, Background: true,
			Meta: map[string]string{"a": "b"}, At: at},
		{User: "u", Device: "d", Meta: map[string]string{}},
		{User: "\xff", Device: "d", Kind: core.Kind(200)},
	}
	for _, hb := range hbs {
		w := abi.FromHeartbeat(hb)
		b, err := abi.EncodeRequest(abi.Request{Op: abi.OpHeartbeat, Now: 5, Args: &w})
		if err != nil {
			t.Fatal(err)
		}
		req, err := abi.DecodeRequest(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		got := req.Args.(*abi.Heartbeat).Core()
		if !reflect.DeepEqual(got, hb) || req.Now != 5 {
			t.Errorf("heartbeat: got %+v want %+v", got, hb)
		}
	}
	l := core.Login{User: "u", Device: "d", Kind: core.KindDesktop, Policy: &pol, Meta: map[string]string{"x": "y"}}
	w := abi.FromLogin(l)
	b, _ := abi.EncodeRequest(abi.Request{Op: abi.OpLogin, Args: &w})
	req, err := abi.DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Args.(*abi.Login).Core(); !reflect.DeepEqual(got, l) {
		t.Errorf("login: got %+v want %+v", got, l)
	}
}

// TestConfigCarriesEveryField fails when core.Config gains a field that
// the wire configuration does not carry.
func TestConfigCarriesEveryField(t *testing.T) {
	var c core.Config
	v := reflect.ValueOf(&c).Elem()
	// the host's own, and GroupCommit, which combines the blocking Engine's
	// concurrent calls: a module drives plans, one at a time
	skip := map[string]bool{"Clock": true, "Rand": true, "Metrics": true, "Logger": true, "GroupCommit": true}
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), v.Type().Field(i).Name
		if skip[name] {
			continue
		}
		switch {
		case f.Type() == reflect.TypeOf(time.Duration(0)):
			f.SetInt(int64(1500*time.Millisecond) + int64(i))
		case f.Type() == reflect.TypeOf(core.Policy(0)):
			f.SetUint(2)
		case f.Kind() == reflect.Int:
			f.SetInt(int64(7 + i))
		case f.Kind() == reflect.String:
			f.SetString("p" + name)
		case f.Type() == reflect.TypeOf(map[core.Kind]time.Duration{}):
			f.Set(reflect.ValueOf(map[core.Kind]time.Duration{core.KindIOS: time.Minute, core.Kind(9): time.Second}))
		case f.Type() == reflect.TypeOf(map[string]core.ScopeClass{}):
			f.Set(reflect.ValueOf(map[string]core.ScopeClass{"v": {Layout: core.LayoutApprox, Window: time.Hour, Shards: 3,
				Spread: true, SweepInterval: 2 * time.Second, Bucket: 1500 * time.Microsecond}}))
		default:
			t.Fatalf("core.Config.%s (%s): teach abi.Config and this test about it", name, f.Type())
		}
	}
	w := abi.FromConfig(c)
	b, _ := abi.EncodeRequest(abi.Request{Op: abi.OpConfigure, Args: &w})
	req, err := abi.DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := req.Args.(*abi.Config).Core()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("config round trip:\n got %+v\nwant %+v", got, c)
	}
}

func TestErrorsRoundTrip(t *testing.T) {
	for _, err := range []error{
		&core.InputError{Field: "Heartbeat.User", Reason: "must not be empty"},
		core.ErrSessionReplaced, core.ErrNoSession, core.ErrTooManyDevices, core.ErrClockSkew, core.ErrUnsupported,
		&core.StoreError{Op: "heartbeat", Unavailable: true, Err: fmt.Errorf("%w: dial tcp: refused", core.ErrUnavailable)},
		&core.StoreError{Op: "count", Err: errors.New("ERR boom")},
		fmt.Errorf("%w: NOSCRIPT No matching script", core.ErrNoScript),
		slot.Check([]string{"{a}", "{b}"}),
		&abi.DecodeError{What: "request", Field: "op", Reason: "x"},
		errors.New("something else"),
	} {
		e := abi.EncodeError(err)
		b, _ := abi.Marshal(e)
		var back abi.Error
		if err := abi.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got := back.Err()
		if got.Error() != err.Error() {
			t.Errorf("%v: message %q", err, got.Error())
		}
		for _, s := range []error{core.ErrInvalid, core.ErrSessionReplaced, core.ErrNoSession, core.ErrUnavailable,
			core.ErrNoScript, core.ErrCrossSlot, core.ErrReply, abi.ErrMalformed} {
			if errors.Is(got, s) != errors.Is(err, s) {
				t.Errorf("%v: errors.Is(%v) = %v", err, s, errors.Is(got, s))
			}
		}
		if reflect.TypeOf(err) == reflect.TypeOf(&core.InputError{}) && !reflect.DeepEqual(got, err) {
			t.Errorf("input error rebuilt as %#v", got)
		}
		if errors.Is(err, core.ErrSessionReplaced) && got != core.ErrSessionReplaced {
			t.Errorf("sentinel rebuilt as %#v", got)
		}
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	for _, in := range []string{
		``, ` `, `null`, `[]`, `"x"`, `{`, `{"v":2,"op":"count"`, `{"v":2,"op":"count"} {}`,
		`{"v":2,"op":"count","extra":1}`, `{"v":2,"op":"teleport"}`, `{"v":2,"op":"count","now":-1}`,
		`{"v":2,"op":"count","now":1.5}`, `{"v":2,"op":"count","args":[]}`, `{"v":2,"op":"count","args":{"scope":1}}`,
		`{"v":2,"op":"heartbeat","args":{"kind":"fridge"}}`, `{"v":2,"op":"heartbeat","args":{"kind":256}}`,
		`{"v":2,"op":"heartbeat","args":{"kind":-1}}`, `{"v":2,"op":"heartbeat","args":{"user":"u","unknown":true}}`,
		`{"v":2,"op":"set_manual","args":{"ttl_ms":"1"}}`, `{"v":2,"op":"set_manual","args":{"ttl_ms":1e300}}`,
		`{"v":2,"op":"configure","args":{"classes":{"x":{"layout":"pyramid"}}}}`,
		`{"v":2,"op":"heartbeat_batch","args":{"beats":[{"user":"u","device":"d","kind":"web","meta":{"a":1}}]}}`,
	} {
		_, err := abi.DecodeRequest([]byte(in))
		if !errors.Is(err, abi.ErrMalformed) {
			t.Errorf("%q: got %v, want ErrMalformed", in, err)
		}
	}
	for _, in := range []string{`{"op":"count"}`, `{"v":0,"op":"count"}`, `{"v":1,"op":"count"}`} {
		_, err := abi.DecodeRequest([]byte(in))
		var ve *abi.VersionError
		if !errors.As(err, &ve) || !errors.Is(err, abi.ErrVersion) {
			t.Errorf("%q: got %v, want a VersionError", in, err)
		}
	}
	if _, err := abi.DecodeRequest([]byte(`{"v":2,"op":"heartbeat","args":{"kind":7}}`)); err != nil {
		t.Errorf("an unknown kind number is the core's to refuse: %v", err)
	}
	// Configure validation happens in Core.
	req, err := abi.DecodeRequest([]byte(`{"v":2,"op":"configure","args":{"clock":"sundial"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := req.Args.(*abi.Config).Core(); !errors.Is(err, abi.ErrMalformed) {
		t.Errorf("clock: %v", err)
	}
}

func TestDecodeResponseRejects(t *testing.T) {
	for _, in := range []string{
		`{"v":2}`, `{"v":2,"result":null}`, `{"v":2,"result":{},"error":{"code":"x","message":"y"}}`,
		`{"v":2,"error":{"message":"no code"}}`, `{"v":2,"result":{"n":"1"}}`, `{"v":2,"result":{"n":1,"bogus":2}}`,
		`{"v":2,"error":{"code":"a","message":"b","cause":{"code":"a","cause":{"code":"a","cause":{"code":"a","cause":{"code":"a","cause":{"code":"a","cause":{"code":"a","cause":{"code":"a","cause":{"code":"a"}}}}}}}}}}`,
	} {
		if _, err := abi.DecodeResponse(abi.OpCount, []byte(in)); !errors.Is(err, abi.ErrMalformed) {
			t.Errorf("%q: got %v, want ErrMalformed", in, err)
		}
	}
}

func TestPlanMessages(t *testing.T) {
	calls := []core.Call{
		{SHA: "abc", Keys: []string{"k{1}", "\x00bin\xff"}, Args: []string{"", "\"q\"\\\n\x1f", "ünï", "\xc3"}},
		{Source: "return 1", Keys: []string{}, Args: nil},
	}
	resp, err := abi.DecodeResponse(abi.OpHeartbeat, abi.EncodeResponse(abi.Response{Plan: 7, Calls: calls}))
	if err != nil {
		t.Fatal(err)
	}
	calls[1].Args = []string{}
	if resp.Plan != 7 || resp.Result != nil || resp.Error != nil || !reflect.DeepEqual(resp.Calls, calls) {
		t.Fatalf("calls: got %+v want %q", resp, calls)
	}
	results := []core.Result{
		{Value: core.Value{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueInt, Int: -1 << 63}, {Kind: core.ValueInt, Int: 1<<63 - 1}, {Kind: core.ValueString, Str: "x\xff"}, {},
			{Kind: core.ValueArray}, {Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueString, Str: ""}}}}}},
		{Err: fmt.Errorf("%w: NOSCRIPT No matching script", core.ErrNoScript)},
		{Value: core.Value{}},
	}
	req, err := abi.EncodeRequest(abi.Request{Op: abi.OpResume, Now: 5, Args: &abi.Resume{Plan: 7, Results: results}})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := abi.DecodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	r := dec.Args.(*abi.Resume)
	back := r.Results
	if r.Plan != 7 || len(back) != 3 || !reflect.DeepEqual(back[0].Value, results[0].Value) || back[2].Value.Kind != core.ValueNil {
		t.Fatalf("resume: got %+v", r)
	}
	if !errors.Is(back[1].Err, core.ErrNoScript) || back[1].Err.Error() != results[1].Err.Error() {
		t.Errorf("noscript: got %v", back[1].Err)
	}
	// A result with its messages.
	done := abi.EncodeResponse(abi.Response{Result: &abi.Empty{}, Messages: []abi.Message{{Kind: "change", Channel: "p:changes", Payload: "{}"}}})
	if resp, err := abi.DecodeResponse(abi.OpTouch, done); err != nil || len(resp.Messages) != 1 || resp.Messages[0].Channel != "p:changes" {
		t.Fatalf("messages: %s %+v %v", done, resp, err)
	}
	for _, in := range []string{
		`{"v":2,"op":"resume","args":{"plan":1,"results":[{"value":1.5}]}}`,
		`{"v":2,"op":"resume","args":{"plan":1,"results":[{"value":true}]}}`,
		`{"v":2,"op":"resume","args":{"plan":1,"results":[{}]}}`,
		`{"v":2,"op":"resume","args":{"plan":1,"results":[{"value":1,"error":{"code":"x","message":""}}]}}`,
		`{"v":2,"op":"resume","args":{"plan":1,"results":[{"value":{"b":"!!"}}]}}`,
		`{"v":2,"op":"resume","args":{"plan":1,"results":[{"value":99999999999999999999}]}}`,
		`{"v":2,"op":"resume","args":{"plan":1,"results":[],"x":0}}`,
		`{"v":2,"op":"resume","args":{"plan":1,"plan":2,"results":[]}}`,
		`{"v":2,"op":"resume","args":{"plan":1,"results":[{"value":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}]}}`,
		`{"v":2,"op":"cancel","args":{"plan":"1"}}`,
	} {
		if _, err := abi.DecodeRequest([]byte(in)); !errors.Is(err, abi.ErrMalformed) {
			t.Errorf("%q: got %v", in, err)
		}
	}
	for _, in := range []string{
		`{"v":2,"plan":1}`, `{"v":2,"calls":[{"sha":"a"}]}`, `{"v":2,"plan":1,"calls":[]}`, `{"v":2,"plan":0,"calls":[{"sha":"a"}]}`,
		`{"v":2,"plan":1,"calls":[{}]}`, `{"v":2,"plan":1,"calls":[{"sha":"a","src":"b"}]}`, `{"v":2,"plan":1,"calls":[{"sha":""}]}`,
		`{"v":2,"plan":1,"calls":[{"sha":"a","keys":[1]}]}`, `{"v":2,"plan":1,"calls":[{"sha":"a","what":[]}]}`,
		`{"v":2,"plan":1,"calls":[{"sha":"a"}],"result":{}}`, `{"v":2,"result":{},"plan":1}`,
		`{"v":2,"error":{"code":"x","message":"y"},"messages":[]}`,
		`{"v":2,"result":{},"messages":[{"kind":"change","channel":"c","payload":"p","x":1}]}`,
	} {
		if _, err := abi.DecodeResponse(abi.OpTouch, []byte(in)); !errors.Is(err, abi.ErrMalformed) {
			t.Errorf("%q: got %v", in, err)
		}
	}
}

func TestSeededRand(t *testing.T) {
	a, b := make([]byte, 32), make([]byte, 32)
	io.ReadFull(abi.SeededRand("s"), a)
	io.ReadFull(abi.SeededRand("s"), b)
	if string(a) != string(b) {
		t.Fatal("same seed, different streams")
	}
	io.ReadFull(abi.SeededRand("t"), b)
	if string(a) == string(b) {
		t.Fatal("different seeds, same stream")
	}
}

func TestDuration(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, 1500 * time.Microsecond, -time.Second, time.Nanosecond, 1<<62 + 3} {
		b, _ := abi.Duration(d).MarshalJSON()
		var back abi.Duration
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("%v: %s: %v", d, b, err)
		}
		if diff := time.Duration(back) - d; diff > time.Microsecond || diff < -time.Microsecond {
			t.Errorf("%v: %s came back as %v", d, b, time.Duration(back))
		}
	}
}

func TestDecodeErrorNamesTheField(t *testing.T) {
	_, err := abi.DecodeRequest([]byte(`{"v":2,"op":"heartbeat_batch","args":{"beats":[{"user":"u"},{"user":"v","kind":"fridge"}]}}`))
	var de *abi.DecodeError
	if !errors.As(err, &de) || de.Field != "args.beats[1].kind" {
		t.Fatalf("got %v", err)
	}
	_, err = abi.DecodeRequest([]byte(`{"v":2,"op":"configure","args":{"classes":{"video":{"layout":"compact","shards":"x"}}}}`))
	if !errors.As(err, &de) || de.Field != "args.classes.video.shards" {
		t.Fatalf("got %v", err)
	}
}

func TestMapKeysThatAreNotUTF8(t *testing.T) {
	hb := core.Heartbeat{User: "u", Device: "d", Meta: map[string]string{"\xe2": "v", "ok": "\xff"}}
	w := abi.FromHeartbeat(hb)
	b, err := abi.EncodeRequest(abi.Request{Op: abi.OpHeartbeat, Args: &w})
	if err != nil || !json.Valid(b) {
		t.Fatalf("%q: %v", b, err)
	}
	req, err := abi.DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Args.(*abi.Heartbeat).Core(); !reflect.DeepEqual(got.Meta, hb.Meta) {
		t.Fatalf("meta came back as %q", got.Meta)
	}
	cfg := abi.FromConfig(core.Config{Classes: map[string]core.ScopeClass{"\xffbad": {}, "good": {Layout: core.LayoutApprox}}})
	b, _ = abi.Marshal(&cfg)
	var back abi.Config
	if err := abi.Unmarshal(b, &back); err != nil || !json.Valid(b) {
		t.Fatalf("%q: %v", b, err)
	}
	c, err := back.Core()
	if err != nil || len(c.Classes) != 2 || c.Classes["good"].Layout != core.LayoutApprox {
		t.Fatalf("classes came back as %v, %v", c.Classes, err)
	}
	for _, bad := range []string{`[["a","b"],["a","c"]]`, `[["a"]]`, `[["a","b","c"]]`, `[{"a":"b"}]`} {
		if err := abi.Unmarshal([]byte(`{"user":"u","device":"d","kind":"web","meta":`+bad+`}`), new(abi.Heartbeat)); err == nil {
			t.Errorf("meta %s accepted", bad)
		}
	}
}
