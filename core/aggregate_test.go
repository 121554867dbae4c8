package core_test

import (
	"testing"

	"github.com/presencekit/presence/core"
)

// TestAggregation covers the rules of docs/design.md §6: no live device is
// OFFLINE whatever the manual status; DND shows as DND and INVISIBLE as
// OFFLINE (still tracked); otherwise the most present device wins.
func TestAggregation(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"ONLINE beats AWAY", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{0, hb("u", "phone", core.KindIOS, active), "ok"},
			{2 * min, hb("u", "phone", core.KindIOS), "ok [u:OFFLINE→ONLINE]"},
			{4 * min, hb("u", "phone", core.KindIOS), "ok"},
			{4*min + 30*sec, hb("u", "web", core.KindWeb, active), "ok"},
			{5 * min, hb("u", "phone", core.KindIOS), "ok"},
			{5 * min, status("u"), "ONLINE phone:AWAY web:ONLINE"},
		}},
		{"AWAY beats PUSH_ONLINE", []step{
			{0, hb("u", "web", core.KindWeb), "ok"},
			{0, hb("u", "phone", core.KindIOS, background), "ok"},
			{50 * sec, hb("u", "web", core.KindWeb), "ok [u:OFFLINE→ONLINE]"},
			{100 * sec, hb("u", "web", core.KindWeb), "ok"},
			{150 * sec, hb("u", "web", core.KindWeb), "ok"},
			{200 * sec, hb("u", "web", core.KindWeb), "ok"},
			{250 * sec, hb("u", "web", core.KindWeb), "ok"},
			{300 * sec, hb("u", "web", core.KindWeb), "ok"},
			{300 * sec, status("u"), "AWAY phone:PUSH_ONLINE web:AWAY"},
		}},
		{"DND shows while a device lives, and expires", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{0, manual("u", core.ManualDND, 40*sec), "ok"},
			{1 * sec, status("u"), "DND web:ONLINE manual=DND"},
			{2 * sec, sweep, "swept [u:OFFLINE→DND]"},
			{30 * sec, hb("u", "web", core.KindWeb, active), "ok"},
			{40*sec - 1*ms, status("u"), "DND web:ONLINE manual=DND"},
			{40 * sec, status("u"), "ONLINE web:ONLINE"},
			{40 * sec, sweep, "swept"},
			{41 * sec, sweep, "swept [u:DND→ONLINE]"},
		}},
		{"INVISIBLE is OFFLINE to others, devices still tracked", []step{
			{0, manual("u", core.ManualInvisible, 0), "ok"},
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{5 * sec, status("u"), "OFFLINE web:ONLINE manual=INVISIBLE"},
			{5 * sec, sweep, "swept"},
			{10 * sec, manual("u", core.ManualNone, 0), "ok"},
			{10 * sec, status("u"), "ONLINE web:ONLINE"},
			{11 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
		}},
		{"a manual status never makes anyone online", []step{
			{0, manual("u", core.ManualDND, 0), "ok"},
			{1 * sec, status("u"), "OFFLINE manual=DND"},
			{2 * sec, sweep, "swept"},
		}},
		{"going INVISIBLE is published like any change", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{10 * sec, manual("u", core.ManualInvisible, 0), "ok"},
			{11 * sec, sweep, "swept [u:ONLINE→OFFLINE]"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runTable(t, core.Config{}, tt.steps) })
	}
}
