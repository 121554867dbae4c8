package core

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// TestTokenIsBase64URL checks that newToken writes its 8 random bytes as
// encoding/base64's RawURLEncoding does, which readers of tokens (the
// conformance suite's race checker) decode.
func TestTokenIsBase64URL(t *testing.T) {
	for _, raw := range [][]byte{
		{0, 0, 0, 0, 0, 0, 0, 0},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef},
		{0xfb, 0xef, 0xbe, 0x00, 0x10, 0x83, 0x7f, 0x80},
	} {
		p := &planner{rand: bytes.NewReader(raw)}
		got, err := p.newToken()
		if err != nil {
			t.Fatal(err)
		}
		if want := base64.RawURLEncoding.EncodeToString(raw); got != want {
			t.Errorf("token of %x: %q, want %q", raw, got, want)
		}
	}
}
