package core_test

import (
	"errors"
	"testing"

	"github.com/presencekit/presence/core"
)

// TestErrorMessagesNameThePackageOnce: an error wrapping another of the
// package says "presence: " once, at its start.
func TestErrorMessagesNameThePackageOnce(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	tests := []struct {
		err  error
		want string
	}{
		{&core.StoreError{Op: "heartbeat", Unavailable: true, Err: core.ClassifyError(refused)},
			"presence: heartbeat: redis unavailable: dial tcp 127.0.0.1:6379: connect: connection refused"},
		{&core.StoreError{Op: "count", Err: core.ErrReply},
			"presence: count: unexpected reply"},
		{&core.StoreError{Op: "status", Err: errors.New("ERR something")},
			"presence: status: ERR something"},
		{core.ClassifyError(errors.New("NOSCRIPT No matching script")),
			"presence: NOSCRIPT: NOSCRIPT No matching script"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
