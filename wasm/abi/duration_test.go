package abi

import (
	"math"
	"testing"
	"time"
)

func TestDurationDigits(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		text string
	}{
		{0, "0"},
		{time.Millisecond, "1"},
		{1500 * time.Microsecond, "1.5"},
		{time.Nanosecond, "0.000001"},
		{-time.Nanosecond, "-0.000001"},
		{-2*time.Second - 50*time.Microsecond, "-2000.05"},
		{1<<62 + 3, "4611686018427.387907"},
		{math.MaxInt64, "9223372036854.775807"},
		{math.MinInt64, "-9223372036854.775808"},
	} {
		if got := string(appendDuration(nil, Duration(c.d))); got != c.text {
			t.Errorf("appendDuration(%d) = %s, want %s", c.d, got, c.text)
		}
		back, err := parseDuration(c.text)
		if err != nil || time.Duration(back) != c.d {
			t.Errorf("parseDuration(%s) = %d, %v; want %d", c.text, back, err, c.d)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		lit string
		d   time.Duration
		bad bool
	}{
		{lit: "1e3", d: time.Second},
		{lit: "1.5E+3", d: 1500 * time.Millisecond},
		{lit: "25e-1", d: 2500 * time.Microsecond},
		{lit: "0.0000005", d: 1},   // half a nanosecond: away from zero
		{lit: "-0.0000005", d: -1}, // the same, negative
		{lit: "0.00000049", d: 0},
		{lit: "0.0001e-9", d: 0},
		{lit: "-0.0", d: 0},
		{lit: "000.0015", d: 1500},
		{lit: "9223372036854.775807", d: math.MaxInt64},
		{lit: "9223372036854.7758075", bad: true}, // rounds past the top
		{lit: "9223372036854.775808", bad: true},
		{lit: "-9223372036854.775808", d: math.MinInt64},
		{lit: "1e300", bad: true},
		{lit: "1e99999999999", bad: true},
		{lit: "1.", bad: true},
		{lit: ".5", bad: true},
		{lit: "1e", bad: true},
		{lit: "1.5x", bad: true},
		{lit: "-", bad: true},
		{lit: "", bad: true},
	} {
		d, err := parseDuration(c.lit)
		if c.bad {
			if err == nil {
				t.Errorf("parseDuration(%q) = %d, want an error", c.lit, d)
			}
			continue
		}
		if err != nil || time.Duration(d) != c.d {
			t.Errorf("parseDuration(%q) = %d, %v; want %d", c.lit, d, err, c.d)
		}
	}
}
