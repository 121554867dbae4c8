package core

import (
	"context"
	"strconv"
	"testing"
)

// Benchmarks of the core's pure paths that are not exported: the debounce
// decision, key building, the shard hash and reply decoding.

func benchSettings(b *testing.B) *settings {
	s, err := newSettings(Config{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchPlanner is the planner of an engine of the default configuration,
// whose methods these benchmarks call as the engine's plans do.
func benchPlanner(b *testing.B) *planner {
	e, err := New(nopStore{}, Config{})
	if err != nil {
		b.Fatal(err)
	}
	return e.plans
}

// nopStore is a Store for an engine that never calls it.
type nopStore struct{}

func (nopStore) Eval(_ context.Context, calls []Call) []Result { return make([]Result, len(calls)) }

func BenchmarkDebounce(b *testing.B) {
	s := benchSettings(b)
	b.ReportAllocs()
	now := int64(1_700_000_000_000)
	for b.Loop() {
		var d debounce
		d.observe(StatusOnline, causeChange, now, s)
		d.observe(StatusAway, causeChange, now+500, s)
		if _, _, ok := d.observe(StatusAway, causeChange, now+2000, s); !ok {
			b.Fatal("no change published")
		}
	}
}

func BenchmarkDeviceState(b *testing.B) {
	s := benchSettings(b)
	r := record{kind: KindIOS, seen: 1000, active: 1000, interval: 60000}
	b.ReportAllocs()
	for b.Loop() {
		if s.state(r, 2000) != StatusOnline {
			b.Fatal("wrong state")
		}
	}
}

func BenchmarkUserArgs(b *testing.B) {
	p := benchPlanner(b)
	b.ReportAllocs()
	for b.Loop() {
		b := p.settings.keys.userBucket("user-1234")
		_ = p.userArgs("", b, 12)
	}
}

func BenchmarkShardHash(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = fnv64("viewer-123456") % 256
	}
}

func BenchmarkDecodeBeats(b *testing.B) {
	p := benchPlanner(b)
	beats := make([]Heartbeat, 100)
	run := make([]int, 100)
	items := make([]Value, 0, 500)
	for i := range beats {
		beats[i] = Heartbeat{User: "u", Device: "d"}
		run[i] = i
		items = append(items, Value{Kind: ValueString, Str: ""}, Value{Kind: ValueString, Str: "tok"}, Value{Kind: ValueInt, Int: -1}, Value{Kind: ValueInt, Int: -1}, Value{Kind: ValueString, Str: ""}, Value{Kind: ValueString, Str: ""})
	}
	reply := Value{Kind: ValueArray, Array: []Value{Value{Kind: ValueInt, Int: 1_700_000_000_000}, Value{Kind: ValueArray, Array: items}, Value{Kind: ValueString, Str: ""}}}
	acks := make([]Ack, 100)
	ids := make([]string, 100)
	b.ReportAllocs()
	for b.Loop() {
		var m machine
		if err := p.decodeBeats(&m, 0, reply, beats, run, acks, ids); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeStatus(b *testing.B) {
	p := benchPlanner(b)
	r := record{kind: KindWeb, gateway: "gw-1", token: "0123456789abcdef.0", loginAt: 1_700_000_000_000,
		seen: 1_700_000_000_000, active: 1_700_000_000_000, interval: 30000}
	static := "web" + unitSep + "0" + unitSep + itoa(int64(r.kind)) + unitSep + r.gateway + unitSep + r.token +
		unitSep + itoa(r.interval) + unitSep + strconv.FormatInt(r.loginAt, 16)
	v := Value{Kind: ValueArray, Array: []Value{{Kind: ValueString, Str: "0"}, {Kind: ValueString, Str: "0"}, {Kind: ValueString, Str: "3" + itemSep + static},
		{Kind: ValueString, Str: unitSep + itemSep + strconv.FormatInt(r.seen, 16) + unitSep + "0"}}}
	b.ReportAllocs()
	for b.Loop() {
		st, err := p.decodeStatus("u", v, 1_700_000_001_000)
		if err != nil || st.Status != StatusOnline {
			b.Fatal(st, err)
		}
	}
}
