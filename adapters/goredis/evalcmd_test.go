package goredis

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/presencekit/presence/core"
)

// TestEvalCmdAllocs holds a call's command to one allocation (the
// command; its argument list is the caller's), however many keys and
// arguments it has: each string goes in as a pointer into the call, which
// is not copied to the heap as a string in an interface is.
func TestEvalCmdAllocs(t *testing.T) {
	ctx := context.Background()
	call := core.Call{SHA: "0123456789abcdef0123456789abcdef01234567", Keys: []string{"k1", "k2", "k3"},
		Args: []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"}}
	args := make([]any, evalArgs(&call))
	if n := testing.AllocsPerRun(100, func() { _ = evalCmd(ctx, &call, args) }); n > 1 {
		t.Errorf("evalCmd allocates %.0f times, want at most 1", n)
	}
	for _, c := range []struct {
		call core.Call
		want []string // the command as sent
	}{
		{call, []string{"evalsha", call.SHA, "3", "k1", "k2", "k3", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"}},
		{core.Call{Source: "return 1", SHA: "x", Args: []string{"a"}}, []string{"eval", "return 1", "0", "a"}},
	} {
		args := evalCmd(ctx, &c.call, make([]any, evalArgs(&c.call))).Args()
		got := make([]string, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case string:
				got[i] = v
			case *string:
				got[i] = *v
			case int:
				got[i] = strconv.Itoa(v)
			default:
				t.Fatalf("argument %d is a %T, which go-redis may not write as a string", i, a)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("command %q, want %q", got, c.want)
		}
	}
}
