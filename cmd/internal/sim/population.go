package sim

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/presencekit/presence/core"
)

// user is one simulated user.
type user struct {
	id     string
	devs   []int32
	dnd    bool        // sets DND now and then
	plan   core.Manual // the manual status the user last asked for
	manual core.Manual // the manual status in force (truth)

	// truth: status since an instant, evaluated up to evalAt
	status core.Status
	since  int64
	evalAt int64
	// pub is the status the engine last published for the user.
	pub core.Status

	watching int32 // video index, or -1
	viaDev   int32 // the device watching
	wgen     uint32
	mark     bool // in the batch being applied
}

// device is one simulated device: the client's state and the truth record.
type device struct {
	idx  int32
	id   string
	user int32
	kind core.Kind
	iv   int64

	online  bool // in a session
	bg      bool // app in the background
	paused  bool // connection lost, reconnecting
	busy    bool // the user interacts
	busyEnd int64
	edge    int
	token   string
	stale   string // the token of a kicked session, for its last heartbeat
	gen     uint32 // session generation: bumping it cancels pending events
	beatGen uint32 // beat generation

	rec record
}

// populate creates the users, their devices, the videos and the edges,
// and schedules the first sessions.
func (w *world) populate() {
	m := w.mix
	kinds := []core.Kind{core.KindWeb, core.KindDesktop, core.KindIOS, core.KindAndroid}
	weights := []float64{m.Web, m.Desktop, m.IOS, m.Android}
	w.users = make([]user, w.cfg.Users)
	w.byID = make(map[string]int32, w.cfg.Users)
	for i := range w.users {
		u := &w.users[i]
		u.id = "u" + strconv.Itoa(i)
		u.watching, u.viaDev = -1, -1
		w.byID[u.id] = int32(i)
		n := 1
		for extra := m.Devices - 1; extra > 0 && n < 4; extra-- {
			if w.rng.Float64() < math.Min(extra, 1) {
				n++
			}
		}
		for j := 0; j < n; j++ {
			kind := kinds[pick(w.rng, weights)]
			d := device{idx: int32(len(w.devs)), id: kind.String() + "-" + strconv.Itoa(j), user: int32(i), kind: kind,
				iv: interval(kind), edge: -1}
			u.devs = append(u.devs, d.idx)
			w.devs = append(w.devs, d)
			// Start some devices online, the rest after a first gap.
			share := float64(m.Session) / float64(m.Session+m.Gap)
			at := w.now + w.exp(m.Gap)
			if w.rng.Float64() < share {
				at = w.now + w.rng.Int64N(interval(kind))
			}
			w.at(at, event{kind: evStart, id: d.idx})
		}
		if w.rng.Float64() < m.DND {
			u.dnd = true
			w.at(w.now+w.exp(time.Hour), event{kind: evManual, id: int32(i)})
		}
	}
	w.videos = make([]video, m.Videos)
	w.vweight = make([]float64, m.Videos)
	for i := range w.videos {
		w.videos[i] = video{id: strconv.Itoa(10000 + i), members: map[int32]int64{}}
		w.vweight[i] = 1 / float64(i+1) // a few popular videos, a long tail
	}
	w.edges = make([]*edge, w.cfg.Edges)
	for i := range w.edges {
		w.edges[i] = &edge{idx: i, name: "edge-" + strconv.Itoa(i)}
	}
}

func interval(k core.Kind) int64 {
	if k == core.KindIOS || k == core.KindAndroid {
		return 60_000
	}
	return 30_000
}

func pick(r *rand.Rand, weights []float64) int {
	total := 0.0
	for _, x := range weights {
		total += x
	}
	x := r.Float64() * total
	for i, wt := range weights {
		if x < wt {
			return i
		}
		x -= wt
	}
	return len(weights) - 1
}
