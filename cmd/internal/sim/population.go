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
	id              string
	devices         []int32
	togglesDND      bool        // sets DND now and then
	requestedManual core.Manual // the manual status the user last asked for
	manual          core.Manual // the manual status in force (truth)

	// truth: status since an instant, evaluated up to evaluatedTo
	status      core.Status
	since       int64
	evaluatedTo int64
	// published is the status the engine last published for the user.
	published core.Status

	watching        int32  // video index, or -1
	watchDevice     int32  // the device watching
	watchGeneration uint32 // bumping it cancels pending watch events
	inBatch         bool   // in the batch being applied
}

// device is one simulated device: the client's state and the truth record.
type device struct {
	index        int32
	id           string
	user         int32
	kind         core.Kind
	beatInterval int64 // the kind's heartbeat interval, in ms

	online            bool // in a session
	background        bool // app in the background
	paused            bool // connection lost, reconnecting
	busy              bool // the user interacts
	busyEnd           int64
	edge              int
	token             string
	staleToken        string // the token of a kicked session, for its last heartbeat
	sessionGeneration uint32 // bumping it cancels the session's pending events
	beatGeneration    uint32 // bumping it cancels pending heartbeats and background moves

	record record
}

// populate creates the users, their devices, the videos and the edges,
// and schedules the first sessions.
func (w *world) populate() {
	mix := w.mix
	kinds := []core.Kind{core.KindWeb, core.KindDesktop, core.KindIOS, core.KindAndroid}
	weights := []float64{mix.Web, mix.Desktop, mix.IOS, mix.Android}
	w.users = make([]user, w.cfg.Users)
	w.userByID = make(map[string]int32, w.cfg.Users)
	for i := range w.users {
		u := &w.users[i]
		u.id = "u" + strconv.Itoa(i)
		u.watching, u.watchDevice = -1, -1
		w.userByID[u.id] = int32(i)
		n := 1
		for extra := mix.Devices - 1; extra > 0 && n < 4; extra-- {
			if w.rng.Float64() < math.Min(extra, 1) {
				n++
			}
		}
		for j := 0; j < n; j++ {
			kind := kinds[pick(w.rng, weights)]
			d := device{index: int32(len(w.devices)), id: kind.String() + "-" + strconv.Itoa(j), user: int32(i), kind: kind,
				beatInterval: interval(kind), edge: -1}
			u.devices = append(u.devices, d.index)
			w.devices = append(w.devices, d)
			// Start some devices online, the rest after a first gap.
			share := float64(mix.Session) / float64(mix.Session+mix.Gap)
			at := w.now + w.exp(mix.Gap)
			if w.rng.Float64() < share {
				at = w.now + w.rng.Int64N(interval(kind))
			}
			w.at(at, event{kind: evStart, index: d.index})
		}
		if w.rng.Float64() < mix.DND {
			u.togglesDND = true
			w.at(w.now+w.exp(time.Hour), event{kind: evManual, index: int32(i)})
		}
	}
	w.videos = make([]video, mix.Videos)
	w.videoWeights = make([]float64, mix.Videos)
	for i := range w.videos {
		w.videos[i] = video{id: strconv.Itoa(10000 + i), lastTouch: map[int32]int64{}}
		w.videoWeights[i] = 1 / float64(i+1) // a few popular videos, a long tail
	}
	w.edges = make([]*edge, w.cfg.Edges)
	for i := range w.edges {
		w.edges[i] = &edge{index: i, name: "edge-" + strconv.Itoa(i)}
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
