package slot

import "testing"

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

// BenchmarkOf measures the CRC16 slot of a typical key.
func BenchmarkOf(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Of("presence:{u12}:d:user-1234")
	}
}
