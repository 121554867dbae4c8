package rig

import (
	"slices"
	"testing"
	"time"
)

func TestParseMonitorLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Command
	}{
		{`+1700000000.123456 [0 127.0.0.1:5000] "SET" "k" "v"`, Command{Name: "SET", Args: []string{"k", "v"}}},
		{`+1700000000.123456 [0 lua] "hgetall" "P:{u1}:d:a b"`, Command{Name: "HGETALL", Args: []string{"P:{u1}:d:a b"}, Lua: true}},
		{`+1.0 [0 127.0.0.1:1] "ECHO" "a\"b\\c\x1f\r\n"`, Command{Name: "ECHO", Args: []string{"a\"b\\c\x1f\r\n"}}},
	} {
		got, err := parseMonitorLine(tc.line)
		if err != nil || got.Name != tc.want.Name || got.Lua != tc.want.Lua || !slices.Equal(got.Args, tc.want.Args) {
			t.Errorf("%s: %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
	if _, err := parseMonitorLine(`+1.0 [0 x] SET`); err == nil {
		t.Error("an unquoted word was accepted")
	}
}

func TestHistogramQuantiles(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, time.Second}} {
		got := h.Quantile(tc.q)
		if got < tc.want || float64(got) > float64(tc.want)*histogramGrowth {
			t.Errorf("quantile %v: %v, want %v within 5%%", tc.q, got, tc.want)
		}
	}
	o := NewHistogram()
	o.Record(2 * time.Second)
	h.Merge(o)
	if h.Count() != 1001 || h.Max() != 2*time.Second {
		t.Errorf("after a merge: %d latencies, max %v", h.Count(), h.Max())
	}
	if NewHistogram().Quantile(0.99) != 0 {
		t.Error("an empty histogram has a quantile")
	}
}

func TestClock(t *testing.T) {
	c := NewClock(T0)
	c.Add(-time.Minute)
	if !c.Now().Equal(T0.Add(-time.Minute)) {
		t.Fatalf("after a step back: %v", c.Now())
	}
	c.Set(T0)
	if !c.Now().Equal(T0) {
		t.Fatalf("after Set: %v", c.Now())
	}
}
