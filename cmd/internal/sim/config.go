package sim

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/host"
)

// Engine selects what runs on the edges.
type Engine string

const (
	// EngineWASM runs each edge in its own instance of the WebAssembly
	// module (wasm/host). The default.
	EngineWASM Engine = "wasm"
	// EngineNative runs each edge on a native core.Engine, for comparison.
	EngineNative Engine = "native"
)

// Config configures a run. Zero values mean the defaults.
type Config struct {
	// Seed makes the run; the same seed and configuration give the same
	// results. Default 1.
	Seed uint64
	// Users is the number of users. Default 10,000.
	Users int
	// Edges is the number of edge nodes. Default 4.
	Edges int
	// Duration is the virtual time simulated. Default 1 h.
	Duration time.Duration
	// Tick is the virtual time step: events are delivered, and each edge
	// flushes its batch, once per tick; instants are whole ticks. Default 5 s.
	Tick time.Duration
	// SweepEvery is how often (virtual) the user and scope sweeps run, on
	// one edge in turn; each sweep writes a row of the time series.
	// Default 5 s.
	SweepEvery time.Duration
	// CensusEvery is how often every user's status is read and compared
	// with the truth exactly. Default 10 min; negative: never.
	CensusEvery time.Duration
	// Mix is the behaviour of users and devices. The zero Mix means
	// DefaultMix().
	Mix Mix

	// Engine is EngineWASM (default) or EngineNative.
	Engine Engine
	// Module is the WebAssembly module (a build of wasm/module); required
	// for EngineWASM unless Runtime is set.
	Module []byte
	// Runtime, if set, runs the edges instead of a runtime compiled from
	// Module for this run: a caller running several simulations compiles
	// the module once. The run does not close it.
	Runtime *host.Runtime
	// Store is the Redis the edges share. Default: an embedded miniredis,
	// whose clock follows the virtual time.
	Store core.Store
	// Mini is the embedded server behind Store, if Store is one; its clock
	// is moved with the virtual time.
	Mini *miniredis.Miniredis
	// Prefix is the key prefix. Default "presence-sim".
	Prefix string
	// Start is the virtual start instant. Default 2026-01-01 09:00 UTC.
	Start time.Time
	// Progress, if set, receives a line per virtual minute: the virtual
	// and wall time, the users online and the video viewers as the edges'
	// engines count them ("engine=") and as the simulation's truth does
	// ("truth="), the events published and the script calls sent.
	Progress io.Writer
}

// Mix is the behaviour of the simulated population. Rates are per event;
// durations are means of exponential distributions unless said otherwise.
type Mix struct {
	// Devices is the mean number of devices per user (1 to 4).
	Devices float64 `mix:"devices"`
	// Web, Desktop, IOS and Android weigh the kinds of devices.
	Web     float64 `mix:"web"`
	Desktop float64 `mix:"desktop"`
	IOS     float64 `mix:"ios"`
	Android float64 `mix:"android"`
	// Session is how long a device stays online; Gap how long it stays away.
	Session time.Duration `mix:"session"`
	Gap     time.Duration `mix:"gap"`
	// Jitter is the spread of heartbeat intervals: each interval is I·(1−U·Jitter).
	Jitter float64 `mix:"jitter"`
	// Loss is the probability that a heartbeat is lost on the way.
	Loss float64 `mix:"loss"`
	// Switch is the probability, per heartbeat, of a network switch: a
	// disconnect and a reconnect within SwitchDelay (uniform, at least 1 s).
	Switch      float64       `mix:"switch"`
	SwitchDelay time.Duration `mix:"switch-delay"`
	// Foreground is how long a mobile app stays in front before going to
	// the background; Background how long it stays there.
	Foreground time.Duration `mix:"foreground"`
	Background time.Duration `mix:"background"`
	// Busy is how long a user keeps interacting, Idle how long they
	// leave a device alone (no activity: it turns AWAY after 5 min).
	Busy time.Duration `mix:"busy"`
	Idle time.Duration `mix:"idle"`
	// Logout and Disconnect are the shares of session ends that are an
	// explicit logout or a closed connection; the rest vanish (expire).
	Logout     float64 `mix:"logout"`
	Disconnect float64 `mix:"disconnect"`
	// Implicit is the share of logins done by a first heartbeat without a
	// token; Exclusive the share of explicit logins that kick the user's
	// other devices.
	Implicit  float64 `mix:"implicit"`
	Exclusive float64 `mix:"exclusive"`
	// DND is the share of users who set DND now and then, for DNDFor.
	DND    float64       `mix:"dnd"`
	DNDFor time.Duration `mix:"dnd-for"`
	// Videos is the number of videos; Watch the share of online users
	// who start watching one per minute; WatchFor how long they watch;
	// Leave the share who leave explicitly (the others just stop).
	Videos   int           `mix:"videos"`
	Watch    float64       `mix:"watch"`
	WatchFor time.Duration `mix:"watch-for"`
	Leave    float64       `mix:"leave"`
	// Crash is when an edge crashes, as a fraction of the run (0: never);
	// its users reconnect elsewhere within CrashReconnect (uniform), and
	// the edge comes back after CrashDown.
	Crash          float64       `mix:"crash"`
	CrashReconnect time.Duration `mix:"crash-reconnect"`
	CrashDown      time.Duration `mix:"crash-down"`
}

// DefaultMix returns the default behaviour.
func DefaultMix() Mix {
	return Mix{
		Devices: 1.3, Web: 3, Desktop: 2, IOS: 2.5, Android: 2.5,
		Session: 20 * time.Minute, Gap: 40 * time.Minute,
		Jitter: 0.1, Loss: 0.02, Switch: 0.003, SwitchDelay: 5 * time.Second,
		Foreground: 4 * time.Minute, Background: 6 * time.Minute,
		Busy: 8 * time.Minute, Idle: 6 * time.Minute,
		Logout: 0.3, Disconnect: 0.4, Implicit: 0.6, Exclusive: 0.1,
		DND: 0.05, DNDFor: 20 * time.Minute,
		Videos: 20, Watch: 0.05, WatchFor: 6 * time.Minute, Leave: 0.7,
		Crash: 0.4, CrashReconnect: 10 * time.Second, CrashDown: 2 * time.Minute,
	}
}

// Set parses "key=value,key=value" into m, keys as MixKeys lists them:
// durations as Go durations ("90s"), the rest as numbers.
func (m *Mix) Set(s string) error {
	v := reflect.ValueOf(m).Elem()
	fields := map[string]reflect.Value{}
	for i := 0; i < v.NumField(); i++ {
		fields[v.Type().Field(i).Tag.Get("mix")] = v.Field(i)
	}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		f, known := fields[strings.TrimSpace(k)]
		if !ok || !known {
			return fmt.Errorf("sim: mix %q: want key=value with a key of %s", kv, strings.Join(MixKeys(), ", "))
		}
		val = strings.TrimSpace(val)
		switch f.Interface().(type) {
		case time.Duration:
			d, err := time.ParseDuration(val)
			if err != nil || d < 0 {
				return fmt.Errorf("sim: mix %s: %q is not a duration", k, val)
			}
			f.SetInt(int64(d))
		case int:
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return fmt.Errorf("sim: mix %s: %q is not a count", k, val)
			}
			f.SetInt(int64(n))
		default:
			x, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return fmt.Errorf("sim: mix %s: %q is not a number", k, val)
			}
			f.SetFloat(x)
		}
	}
	return nil
}

// String renders m as Set reads it.
func (m Mix) String() string {
	v := reflect.ValueOf(m)
	var parts []string
	for i := 0; i < v.NumField(); i++ {
		parts = append(parts, v.Type().Field(i).Tag.Get("mix")+"="+fmt.Sprint(v.Field(i).Interface()))
	}
	return strings.Join(parts, ",")
}

// MixKeys returns the keys Mix.Set knows, sorted.
func MixKeys() []string {
	t := reflect.TypeOf(Mix{})
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = t.Field(i).Tag.Get("mix")
	}
	sort.Strings(keys)
	return keys
}

func (m Mix) check() error {
	switch {
	case m.Devices < 1 || m.Devices > 4:
		return fmt.Errorf("sim: mix devices must be 1 to 4, got %v", m.Devices)
	case m.Web < 0 || m.Desktop < 0 || m.IOS < 0 || m.Android < 0 || m.Web+m.Desktop+m.IOS+m.Android <= 0:
		return fmt.Errorf("sim: mix kind weights must be non-negative, not all zero")
	}
	for _, p := range []struct {
		name  string
		value float64
	}{{"jitter", m.Jitter}, {"loss", m.Loss}, {"switch", m.Switch}, {"logout", m.Logout}, {"disconnect", m.Disconnect},
		{"implicit", m.Implicit}, {"exclusive", m.Exclusive}, {"dnd", m.DND}, {"watch", m.Watch}, {"leave", m.Leave}} {
		if p.value < 0 || p.value > 1 {
			return fmt.Errorf("sim: mix %s must be 0 to 1, got %v", p.name, p.value)
		}
	}
	if m.Logout+m.Disconnect > 1 {
		return fmt.Errorf("sim: mix logout + disconnect must be at most 1")
	}
	if m.Crash < 0 || m.Crash >= 1 {
		return fmt.Errorf("sim: mix crash must be 0 (none) or a fraction of the run below 1")
	}
	if m.Videos > 100000 {
		return fmt.Errorf("sim: mix videos must be at most 100000")
	}
	return nil
}

// withDefaults returns c with every default applied.
func (c Config) withDefaults() (Config, error) {
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Users == 0 {
		c.Users = 10000
	}
	if c.Edges == 0 {
		c.Edges = 4
	}
	if c.Duration == 0 {
		c.Duration = time.Hour
	}
	if c.Tick == 0 {
		c.Tick = 5 * time.Second
	}
	if c.SweepEvery == 0 {
		c.SweepEvery = 5 * time.Second
	}
	if c.CensusEvery == 0 {
		c.CensusEvery = 10 * time.Minute
	}
	if c.Engine == "" {
		c.Engine = EngineWASM
	}
	if c.Prefix == "" {
		c.Prefix = "presence-sim"
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	}
	if c.Mix == (Mix{}) {
		c.Mix = DefaultMix()
	}
	switch {
	case c.Users < 1 || c.Users > 10_000_000:
		return c, fmt.Errorf("sim: users must be 1 to 10,000,000, got %d", c.Users)
	case c.Edges < 1 || c.Edges > 64:
		return c, fmt.Errorf("sim: edges must be 1 to 64, got %d", c.Edges)
	case c.Tick < time.Millisecond || c.Tick > 10*time.Second || c.Tick%time.Millisecond != 0:
		return c, fmt.Errorf("sim: tick must be whole milliseconds, 1ms to 10s, got %v", c.Tick)
	case c.Duration < c.Tick:
		return c, fmt.Errorf("sim: duration must be at least one tick")
	case c.SweepEvery < c.Tick:
		return c, fmt.Errorf("sim: sweep interval must be at least one tick")
	case c.Engine != EngineWASM && c.Engine != EngineNative:
		return c, fmt.Errorf("sim: engine must be %q or %q, got %q", EngineWASM, EngineNative, c.Engine)
	case c.Engine == EngineWASM && len(c.Module) == 0 && c.Runtime == nil:
		return c, fmt.Errorf("sim: the WASM engine needs Config.Module or Config.Runtime")
	}
	return c, c.Mix.check()
}
