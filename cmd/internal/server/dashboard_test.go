package server_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/presencekit/presence/cmd/internal/server"
)

// TestDashboardRedisHealth checks the overview's Redis health, which the
// dashboard's outage banner shows: up, then down since the first failed
// read with the error and a growing duration, then up again.
func TestDashboardRedisHealth(t *testing.T) {
	m := miniredis.RunT(t)
	in := startServer(t, newStore(t, m.Addr()), testConfig())
	admin := in.as(t, token(t, "ops", "presence_admin"))
	health := func() server.RedisHealth {
		var ov server.OverviewResponse
		admin.must("GET", "/v1/admin/overview", nil, &ov)
		return ov.Redis
	}
	before := health()
	if !before.Up || before.DownSince != 0 || before.CheckedAt == 0 {
		t.Fatalf("before the outage: %+v; want up, checked", before)
	}
	m.Close()
	var h server.RedisHealth
	waitFor(t, 5*time.Second, "the overview to say Redis is down", func() bool { h = health(); return !h.Up })
	// the outage starts with the first check that failed, which may have
	// begun just before the close, but after the last check that passed
	if h.DownSince < before.CheckedAt || h.DownSince > time.Now().UnixMilli() || h.Error == "" || h.DownMS < 0 {
		t.Fatalf("during the outage: %+v; want down since the last good check at %d, with an error", h, before.CheckedAt)
	}
	first := h
	waitFor(t, 5*time.Second, "the outage to last", func() bool { h = health(); return h.DownMS > first.DownMS })
	if h.DownSince != first.DownSince {
		t.Fatalf("the outage's start moved from %d to %d", first.DownSince, h.DownSince)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the overview to say Redis is back", func() bool { h = health(); return h.Up })
	if h.DownSince != 0 || h.Error != "" {
		t.Fatalf("after the outage: %+v; want up, no error", h)
	}
}
