package benchkit

import "testing"

func TestParseCallgrindTotals(t *testing.T) {
	const status = `PID 17426: redis-server --port 23520
sending command status internal to pid 17426

  Totals:        Ir 
   Th 1  28,349,504 
   Th 2         518 
   Th 5       8,196 
`
	for _, tc := range []struct {
		name string
		out  string
		want int64
		ok   bool
	}{
		{"three threads summed", status, 28_358_218, true},
		{"no totals", "PID 1: redis-server\nsending command status internal to pid 1\n", 0, false},
		{"garbled count", "  Totals:        Ir\n   Th 1  28,3x9\n", 0, false},
	} {
		got, err := parseCallgrindTotals([]byte(tc.out))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: got %d, %v; want %d, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
	}
}
