package slot

import (
	"errors"
	"testing"
)

// TestOf checks the CRC16 slot function against Redis Cluster's examples.
func TestOf(t *testing.T) {
	tests := []struct {
		key  string
		slot uint16
	}{
		{"foo", 12182},
		{"123456789", 0x31C3},
		{"{user1000}.following", Of("user1000")},
		{"{user1000}.followers", Of("user1000")},
		{"foo{}{bar}", Of("foo{}{bar}")},
		{"foo{{bar}}zap", Of("{bar")},
		{"foo{bar}{zap}", Of("bar")},
	}
	for _, tt := range tests {
		if got := Of(tt.key); got != tt.slot {
			t.Errorf("Of(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
	if Of("{user1000}.following") == Of("foo") {
		t.Error("distinct tags should differ here")
	}
}

// TestCheck: keys of one tag pass, keys of two fail with an error that
// matches ErrCrossSlot and names the first key.
func TestCheck(t *testing.T) {
	if err := Check([]string{"{a}x", "{a}y", "z{a}"}); err != nil {
		t.Errorf("one tag: %v", err)
	}
	if err := Check(nil); err != nil {
		t.Errorf("no keys: %v", err)
	}
	err := Check([]string{"{a}x", "{b}x"})
	if !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("two tags: %v, want ErrCrossSlot", err)
	}
	if want := `presence: keys span cluster slots: "{a}x"…`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// BenchmarkOf measures the CRC16 slot of a typical key.
func BenchmarkOf(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Of("presence:{u12}:d:user-1234")
	}
}
