package rueidis

import (
	"errors"
	"testing"

	"github.com/presencekit/presence/core"
)

func TestFenceKeyKeepsTheSlot(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"P:{s3}:r", "P:{s3}:cache-fence"},
		{"{u}", "{u}:cache-fence"},
		{"a{b}c{d}", "a{b}:cache-fence"},
		{"count", "{count}:cache-fence"},
		{"a{b", "{a{b}:cache-fence"}, // no tag: the whole key hashes
	} {
		if got, err := fenceKey(tc.key); err != nil || got != tc.want {
			t.Errorf("fenceKey(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	for _, key := range []string{"{}x", "a}b", "{}"} {
		if _, err := fenceKey(key); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("fenceKey(%q): %v; want an error matching core.ErrInvalid", key, err)
		}
	}
}
