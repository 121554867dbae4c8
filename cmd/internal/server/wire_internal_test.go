package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBadText: badText finds exactly what encoding/json would replace
// with U+FFFD, and leaves everything else, malformed or not, to the
// decoder.
func TestBadText(t *testing.T) {
	tests := []struct {
		body string
		at   int // -1: nothing found
	}{
		{`{"user":"alice"}`, -1},
		{`{"user":"bad\ufffd"}`, -1},
		{`{"user":"\ud83d\ude00"}`, -1},
		{`{"user":"\uD83D\uDE00"}`, -1},
		{`{"user":"a\\ud800"}`, -1},  // an escaped backslash, then text
		{`{"user":"a\"\ud800"}`, 12}, // an escaped quote stays inside the string
		{`{"user":"é€😀"}`, -1},
		{"{\"user\":\"bad\xff\"}", 12},
		{"{\"user\":\"bad\xfe\"}", 12},
		{"{\"bad\xc0\xaf\":1}", 5},      // an overlong encoding, in a key
		{"{\"u\":\"\xed\xa0\x80\"}", 6}, // a surrogate encoded in UTF-8
		{"\xef\xbb\xbf{}", -1},          // a BOM is valid UTF-8; the decoder refuses it
		{`{"user":"bad\ud800"}`, 12},
		{`{"user":"bad\udc00"}`, 12},
		{`{"user":"\udc00\ud800"}`, 9},
		{`{"user":"\ud800\u0041"}`, 9},
		{`{"user":"\ud800\ud800"}`, 9},
		{`{"user":"\ud800`, 9},    // cut short after a high half
		{`{"user":"\ud8"}`, -1},   // malformed: the decoder's
		{`{"user":"\uzzzz"}`, -1}, // malformed: the decoder's
		{`{"user":"\`, -1},        // cut short: the decoder's
		{`{"\ud800":1}`, 2},       // in a key
		{`["x", "\udfff"]`, 7},
	}
	for _, tt := range tests {
		if at, what := badText([]byte(tt.body)); at != tt.at {
			t.Errorf("badText(%q) = %d %q, want %d", tt.body, at, what, tt.at)
		}
		// Whatever badText lets through, encoding/json decodes without
		// inventing a U+FFFD, or refuses.
		if at, _ := badText([]byte(tt.body)); at < 0 {
			var v any
			if json.Unmarshal([]byte(tt.body), &v) == nil {
				if b, _ := json.Marshal(v); containsFFFD(string(b)) && !containsFFFD(tt.body) {
					t.Errorf("badText let %q through and decoding made a U+FFFD", tt.body)
				}
			}
		}
	}
}

// containsFFFD reports a U+FFFD in s, as itself or as a JSON escape.
func containsFFFD(s string) bool {
	return strings.ContainsRune(s, '\ufffd') || strings.Contains(strings.ToLower(s), `\ufffd`)
}
