package fuzz

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriteSeeds writes the named seed corpora under testdata/fuzz in the
// "go test fuzz v1" format. The files are committed; rewrite them after
// changing a target's arguments with
//
//	FUZZ_WRITE_SEEDS=1 go test ./fuzz -run TestWriteSeeds
//
// Inputs that once failed keep the hash names go gave them and are never
// rewritten.
func TestWriteSeeds(t *testing.T) {
	if os.Getenv("FUZZ_WRITE_SEEDS") == "" {
		t.Skip("set FUZZ_WRITE_SEEDS=1 to rewrite the seed corpora")
	}
	for target, seeds := range seedCorpora() {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, args := range seeds {
			var b strings.Builder
			b.WriteString("go test fuzz v1\n")
			for _, a := range args {
				switch a := a.(type) {
				case string:
					fmt.Fprintf(&b, "string(%q)\n", a)
				case []byte:
					fmt.Fprintf(&b, "[]byte(%q)\n", a)
				case uint8:
					fmt.Fprintf(&b, "byte(%q)\n", a)
				case int64:
					fmt.Fprintf(&b, "int64(%d)\n", a)
				case int:
					fmt.Fprintf(&b, "int(%d)\n", a)
				default:
					t.Fatalf("%s/%s: no encoding for %T", target, name, a)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// randomBytes is a deterministic byte string for the byte-stream targets.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func seedCorpora() map[string]map[string][]any {
	s127, s128, s129 := strings.Repeat("a", 127), strings.Repeat("b", 128), strings.Repeat("c", 129)
	euro128, euro129 := strings.Repeat("€", 42)+"xy", strings.Repeat("€", 43) // 128 and 129 bytes
	big := strings.Repeat("v", 1024)
	nowMs := int64(1_000_000_000_000) // FuzzTimes' "now" for nowOff 0

	return map[string]map[string][]any{
		// user, device, gateway, scopeID, member, metaKey, metaVal, token, sel
		"FuzzIdentifiers": {
			"braces":         {"{", "}", "{gw}", "{s}", "}{", "{k}", "}", "", uint8(0)},
			"braces-class":   {"{u}", "{d}", "", "{", "}", "{", "{", "{t}", uint8(0xc1)},
			"separators":     {"a:b", "c:d", "g:w", "s:1", "m:1", ":", "=", ":", uint8(0x42)},
			"star-space":     {"*", " ", " gw ", "* *", "  ", "k k", " v ", "t t", uint8(0x83)},
			"invalid-utf8":   {"\xff", "d", "", "s", "m", "k", "v", "", uint8(1)},
			"invalid-utf8-2": {"u", "\xc3\x28", "\xed\xa0\x80", "s\xfe", "\x80", "k\xc0", "\xe2\x82", "\xf0\x9f\x98", uint8(0x44)},
			"control":        {"u\x00", "d\n", "gw\t", "s\x7f", "m\u0085", "k\x1e", "v\x1f", "t\r", uint8(2)},
			"control-meta":   {"u", "d", "", "s", "m", "k", "a\x1eb", "", uint8(0)},
			"format-chars":   {"\u200b", "\u202e", "\ufeff", "\u2028", "\ufffd", "\u00a7", "é", "\U0001F600", uint8(3)},
			"len-127":        {s127, s127, s127, s127, s127, s127, s127, s127, uint8(0x81)},
			"len-128":        {s128, s128, s128, s128, s128, s128, s128, s128, uint8(0x41)},
			"len-129":        {s129, s129, s129, s129, s129, s129, s129, s129, uint8(0x01)},
			"len-128-runes":  {euro128, euro128, euro128, euro128, euro128, "k", "v", euro128, uint8(0x40)},
			"len-129-runes":  {euro129, "d", "", "s", euro129, "k", "v", euro129, uint8(0)},
			"empty":          {"", "", "", "", "", "", "", "", uint8(0)},
			"empty-meta-key": {"u", "d", "gw", "s", "m", "", "v", "", uint8(4)},
			"meta-1024":      {"u", "d", "", "s", "m", "k", big[:1023], "", uint8(0)},
			"meta-1025":      {"u", "d", "", "s", "m", "k", big, "", uint8(0)},
			"bad-kind":       {"u", "d", "", "s", "m", "k", "v", "", uint8(7)},
			"cursor-neg":     {"u", "d", "", "s", "m", "k", "1.-1", "", uint8(0x40)},
			"cursor-big":     {"u", "d", "", "s", "m", "k", "65537.0", "", uint8(0x40)},
			"cursor-junk":    {"u", "d", "", "s", "m", "k", "+1.0x", "", uint8(0x48)},
			"cursor-dot":     {"u", "d", "", "s", "m", "k", ".", "", uint8(0x40)},
			"unknown-class":  {"u", "d", "", "s", "m", "VIDEO", "v", "", uint8(0xc0)},
		},
		// u1, d1, s1, m1, u2, d2, s2, m2, sel
		"FuzzKeyLayout": {
			"split-colon":  {"a", "b:c", "s", "m", "a:b", "c", "s:m", "m", uint8(0)},
			"braces":       {"{u}", "{d}", "{s}", "{m}", "u", "d", "s", "m", uint8(0x05)},
			"open-brace":   {"{", "}", "{", "}", "}", "{", "}", "{", uint8(0x0a)},
			"suffix":       {"b", "d", "s", "m", "ab", "d", "as", "m", uint8(0x00)},
			"layout-words": {"st", "d:", "reg", "rel", "due", "lock", "z:room:x", "n:", uint8(0x10)},
			"same-ids":     {"x", "x", "x", "x", "x", "x", "x", "y", uint8(0x2f)},
			"spaces-stars": {"* *", " ", "*", " ", "*", "* ", " *", "**", uint8(0x3a)},
			"max-len":      {s128, s128, s128, s128, euro128, euro128, euro128, euro128, uint8(0x15)},
			"unicode":      {"é", "\u00a7", "ü", "\U0001F600", "e\u0301", "§", "u", "😀", uint8(0x20)},
		},
		// key, tag
		"FuzzSlot": {
			"redis-example": {"{user1000}.following", "user1000"},
			"empty-tag":     {"foo{}{bar}", "bar"},
			"nested":        {"foo{{bar}}zap", "{bar"},
			"two-tags":      {"foo{bar}{zap}", "zap"},
			"braces":        {"}{", "{"},
			"invalid-utf8":  {"\xff{\xfe}", "\xfd"},
		},
		// nowOff, atRaw, skewNs, ttlNs, dNs, sel
		"FuzzTimes": {
			"at-min-int64":        {int64(0), int64(math.MinInt64), int64(0), int64(0), int64(0), uint8(0)},
			"at-max-int64":        {int64(0), int64(math.MaxInt64), int64(0), int64(0), int64(0), uint8(0)},
			"model-overflow":      {int64(0), nowMs + math.MinInt64, int64(0), int64(time.Second), int64(time.Second), uint8(0)},
			"at-zero-time":        {int64(0), int64(-62135596800000), int64(0), int64(0), int64(time.Second), uint8(0)},
			"skew-edge-in":        {int64(77), int64(2), int64(0), int64(0), int64(0), uint8(3)},
			"skew-edge-out":       {int64(77), int64(4), int64(0), int64(0), int64(0), uint8(3)},
			"skew-1ms":            {int64(5), int64(2), int64(time.Millisecond), int64(time.Millisecond), int64(time.Millisecond), uint8(1)},
			"skew-sub-ms":         {int64(5), int64(2), int64(999_999), int64(0), int64(0), uint8(1)},
			"skew-max":            {int64(5), int64(-1), int64(math.MaxInt64), int64(0), int64(0), uint8(0)},
			"seconds-min":         {int64(0), int64(math.MinInt64), int64(0), int64(0), int64(0), uint8(2)},
			"seconds-wrap":        {int64(0), int64(2305843010213693952), int64(0), int64(0), int64(0), uint8(2)},
			"ttl-sub-ms":          {int64(0), int64(0), int64(0), int64(999_999), int64(0), uint8(0)},
			"ttl-negative":        {int64(0), int64(0), int64(0), int64(-1), int64(0), uint8(0)},
			"ttl-max":             {int64(0), int64(0), int64(0), int64(math.MaxInt64), int64(0), uint8(0)},
			"d-window":            {int64(0), int64(0), int64(0), int64(0), int64(time.Minute), uint8(0)},
			"d-window-plus-1ms":   {int64(0), int64(0), int64(0), int64(0), int64(time.Minute + time.Millisecond), uint8(0)},
			"d-window-plus-0.5ms": {int64(0), int64(0), int64(0), int64(0), int64(time.Minute + 500*time.Microsecond), uint8(0)},
			"d-negative":          {int64(0), int64(0), int64(0), int64(0), int64(math.MinInt64), uint8(0)},
		},
		// idle, push, leave, coalesce, grace, interval, window, bucket, maxDev, buckets, shards, sel
		"FuzzConfig": {
			"derived-bucket": {int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(5 * time.Millisecond), int64(0), 0, 0, 0, uint8(0)},
			"all-max":        {int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), 1024, 16384, 65536, uint8(0x24)},
			"all-min":        {int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), math.MinInt, math.MinInt, math.MinInt, uint8(0x20)},
			"short-all":      {int64(time.Millisecond), int64(time.Millisecond), int64(-1), int64(-1), int64(time.Millisecond), int64(time.Millisecond), int64(time.Millisecond), int64(time.Millisecond), 1, 1, 1, uint8(0x28)},
			"approx-fine":    {int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(time.Second), int64(time.Millisecond), 0, 0, 0, uint8(0x08)},
			"bad-enums":      {int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), 0, 0, 0, uint8(0x0f)},
			"ms-scale":       {int64(90_000), int64(180_000), int64(3_250), int64(2_500), int64(10_000), int64(20_000), int64(120_000), int64(12_000), 3, 2, 3, uint8(0x34)},
		},
		"FuzzReplies": {
			"random-1": {randomBytes(1, 64)},
			"random-2": {randomBytes(2, 256)},
			"random-3": {randomBytes(3, 1024)},
			"valid":    {[]byte("\x00\x09\x0f\x0f\x0f\x0f\x0f\x0f\x0f\x0f\x0f\x0f")},
			"cached":   {[]byte("\x01\x09\x00\x03\x02\x0f\x0f\x0f")},
			// Inputs that reach the known bugs (found by a search over
			// randomBytes seeds).
			"enum-truncation": {randomBytes(1002, 102)},
			"negative-count":  {randomBytes(1011, 111)},
			"members-cursor":  {randomBytes(1037, 137)},
			"report-overflow": {randomBytes(1142, 242)},
		},
		"FuzzStateMachine": {
			"random-1": {randomBytes(11, 300)},
			"random-2": {randomBytes(12, 600)},
			"random-3": {randomBytes(13, 900)},
			"random-4": {randomBytes(14, 1200)},
			"random-5": {randomBytes(15, 1500)},
		},
	}
}
