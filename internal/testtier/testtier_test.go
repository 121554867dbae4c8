package testtier

import "testing"

func TestPick(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{
		{"", 1},
		{"0", 1},
		{"yes", 1},
		{"1", 2},
	} {
		t.Setenv(Env, tc.env)
		if got := Pick(1, 2); got != tc.want {
			t.Errorf("%s=%q: Pick(1, 2) = %d, want %d", Env, tc.env, got, tc.want)
		}
		if Deep() != (tc.want == 2) {
			t.Errorf("%s=%q: Deep() = %v", Env, tc.env, Deep())
		}
	}
}
