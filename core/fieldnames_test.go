package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
)

// TestBatchItemFieldNames: a batch's bad item is named by its place, the
// field of a field by its path, though valid input names none.
func TestBatchItemFieldNames(t *testing.T) {
	m, err := core.NewModel(core.Config{Clock: (&manualClock{t: time.UnixMilli(1_700_000_000_000)}).Now})
	if err != nil {
		t.Fatal(err)
	}
	e, err := core.New(newCannedStore(1), core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	room := core.Scope{Class: "room", ID: "1"}
	for _, tc := range []struct {
		name  string
		op    core.Op
		field string
	}{
		{"touch member", core.TouchBatch{{Scope: room, Member: "a"}, {Scope: room, Member: ""}}, "touches[1].Member"},
		{"touch scope", core.TouchBatch{{Scope: room, Member: "a"}, {Scope: core.Scope{Class: "room", ID: "x\x00"}, Member: "b"}}, "touches[1].Scope.ID"},
		{"touch class", core.TouchBatch{{Scope: core.Scope{Class: "nope", ID: "1"}, Member: "a"}}, "touches[0].Scope.Class"},
		{"count scope", core.ReadCount{Scope: core.Scope{Class: "room", ID: ""}}, "scope.ID"},
		{"statuses", core.ReadStatuses{Users: []string{"a", "b", " c"}}, "users[2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []core.Presence{e, m} {
				_, err := p.Do(context.Background(), tc.op)
				var ie *core.InputError
				if !errors.As(err, &ie) || ie.Field != tc.field {
					t.Errorf("%T: %v, want an InputError of field %q", p, err, tc.field)
				}
			}
		})
	}
}
