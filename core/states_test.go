package core_test

import (
	"testing"
	"time"

	"github.com/presencekit/presence/core"
)

const (
	ms  = time.Millisecond
	sec = time.Second
	min = time.Minute
)

// TestDeviceStates walks every row of the state table (docs/design.md §5)
// with the default intervals: web 30 s (alive while its last beat is at most
// 60 s old), ios 60 s (120 s), IdleAfter 5 min, PushWindow 10 min.
func TestDeviceStates(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"ONLINE: foreground and active", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{1 * sec, status("u"), "ONLINE web:ONLINE"},
		}},
		{"OFFLINE: one lost heartbeat is tolerated, two are not", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{60 * sec, status("u"), "ONLINE web:ONLINE"},
			{60*sec + 1*ms, status("u"), "OFFLINE"},
		}},
		{"OFFLINE: mobile interval is 60 s", []step{
			{0, hb("u", "phone", core.KindIOS, active), "ok"},
			{120 * sec, status("u"), "ONLINE phone:ONLINE"},
			{120*sec + 1*ms, status("u"), "OFFLINE"},
		}},
		{"AWAY: alive but idle for IdleAfter", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{50 * sec, hb("u", "web", core.KindWeb), "ok [u:OFFLINE→ONLINE]"},
			{100 * sec, hb("u", "web", core.KindWeb), "ok"},
			{150 * sec, hb("u", "web", core.KindWeb), "ok"},
			{200 * sec, hb("u", "web", core.KindWeb), "ok"},
			{250 * sec, hb("u", "web", core.KindWeb), "ok"},
			{5*min - 1*ms, status("u"), "ONLINE web:ONLINE"},
			{5 * min, status("u"), "AWAY web:AWAY"},
			{5*min + 30*sec, hb("u", "web", core.KindWeb, active), "ok"},
			{5*min + 31*sec, status("u"), "ONLINE web:ONLINE"},
		}},
		{"PUSH_ONLINE: background within PushWindow", []step{
			{0, hb("u", "phone", core.KindAndroid, active), "ok"},
			{10 * sec, hb("u", "phone", core.KindAndroid, background), "ok [u:OFFLINE→PUSH_ONLINE]"},
			{5 * min, status("u"), "PUSH_ONLINE phone:PUSH_ONLINE"},
			{10*min + 10*sec, status("u"), "PUSH_ONLINE phone:PUSH_ONLINE"},
			{10*min + 10*sec + 1*ms, status("u"), "OFFLINE"},
		}},
		{"back to the foreground", []step{
			{0, hb("u", "phone", core.KindIOS, background), "ok"},
			{3 * min, hb("u", "phone", core.KindIOS, active), "ok [u:OFFLINE→ONLINE]"},
			{3*min + 1*sec, status("u"), "ONLINE phone:ONLINE"},
		}},
		{"OFFLINE: logged out", []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{1 * sec, logout("u", "web"), "removed"},
			{1 * sec, status("u"), "OFFLINE"},
		}},
		{"a login counts as activity", []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{1 * min, hb("u", "web", core.KindWeb, withToken), "ok [u:OFFLINE→ONLINE]"},
			{2 * min, hb("u", "web", core.KindWeb, withToken), "ok"},
			{3 * min, hb("u", "web", core.KindWeb, withToken), "ok"},
			{4 * min, hb("u", "web", core.KindWeb, withToken), "ok"},
			{5*min - 1*ms, status("u"), "ONLINE web:ONLINE"},
			{5 * min, status("u"), "AWAY web:AWAY"},
		}},
		{"a client timestamp sets last-active, within the skew guard", []step{
			{0, hb("u", "web", core.KindWeb), "ok"},
			{1 * min, hb("u", "web", core.KindWeb, active, clientAt(30*sec)), "ok [u:OFFLINE→ONLINE]"},
			{2 * min, hb("u", "web", core.KindWeb), "ok"},
			{3 * min, hb("u", "web", core.KindWeb), "ok"},
			{4 * min, hb("u", "web", core.KindWeb), "ok"},
			{5 * min, hb("u", "web", core.KindWeb), "ok"},
			{5*min + 30*sec - 1*ms, status("u"), "ONLINE web:ONLINE"},
			{5*min + 30*sec, status("u"), "AWAY web:AWAY"},
			{6 * min, hb("u", "web", core.KindWeb, active, clientAt(30*sec)), "skew"},
			{6 * min, hb("u", "web", core.KindWeb, active, clientAt(11*min+1*ms)), "skew"},
			{6 * min, status("u"), "AWAY web:AWAY"},
			{6 * min, hb("u", "web", core.KindWeb, active, clientAt(11*min)), "ok"},
			{6 * min, status("u"), "ONLINE web:ONLINE"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runTable(t, core.Config{}, tt.steps) })
	}
}
