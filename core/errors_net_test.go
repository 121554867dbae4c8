//go:build !wasm

package core

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
)

// TestClassifyNetErrors: closed connections and net.Errors are
// unavailability, wrapped or not; errors_wasm.go's test of them, by
// net.Error's methods, agrees with errors_net.go's on each.
func TestClassifyNetErrors(t *testing.T) {
	var dnsErr error = &net.DNSError{Err: "no answer", Name: "redis", IsTimeout: true}
	for _, err := range []error{
		net.ErrClosed,
		fmt.Errorf("reading: %w", net.ErrClosed),
		&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded},
		fmt.Errorf("dial: %w", dnsErr),
	} {
		if !errors.Is(ClassifyError(err), ErrUnavailable) {
			t.Errorf("ClassifyError(%v) does not match ErrUnavailable", err)
		}
		var ne netErr
		if !netError(err) || !errors.As(err, &ne) {
			t.Errorf("%v: not a net error by its methods", err)
		}
	}
	if netError(errors.New("ERR wrong")) {
		t.Error("a plain error is a net error")
	}
}

// netErr is errors_wasm.go's, for the comparison above.
type netErr interface {
	error
	Timeout() bool
	Temporary() bool
}
