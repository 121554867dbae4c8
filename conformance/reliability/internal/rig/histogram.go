package rig

import (
	"math"
	"sync"
	"time"
)

// histogramGrowth is the ratio of one latency bucket's upper bound to the
// previous one: quantiles are exact to within 5%.
const histogramGrowth = 1.05

// Histogram counts latencies in logarithmic buckets, so that a soak of
// any length keeps constant memory. It is safe for concurrent use.
type Histogram struct {
	mu     sync.Mutex
	counts map[int]int64
	n      int64
	max    time.Duration
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{counts: map[int]int64{}} }

func bucketOf(d time.Duration) int {
	if d < time.Microsecond {
		return 0
	}
	return int(math.Log(float64(d)/float64(time.Microsecond))/math.Log(histogramGrowth)) + 1
}

func bucketTop(b int) time.Duration {
	if b == 0 {
		return time.Microsecond
	}
	return time.Duration(float64(time.Microsecond) * math.Pow(histogramGrowth, float64(b)))
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[bucketOf(d)]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

// Merge adds every latency of o.
func (h *Histogram) Merge(o *Histogram) {
	o.mu.Lock()
	counts, n, max := make(map[int]int64, len(o.counts)), o.n, o.max
	for b, c := range o.counts {
		counts[b] = c
	}
	o.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	for b, c := range counts {
		h.counts[b] += c
	}
	h.n += n
	if max > h.max {
		h.max = max
	}
}

// Count returns how many latencies were recorded.
func (h *Histogram) Count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Max returns the largest latency recorded.
func (h *Histogram) Max() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.max
}

// Quantile returns the upper bound of the bucket holding quantile q (0 to
// 1), capped at the largest latency recorded; 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	top := 0
	for b := range h.counts {
		if b > top {
			top = b
		}
	}
	var seen int64
	for b := 0; b <= top; b++ {
		seen += h.counts[b]
		if seen >= rank {
			return min(bucketTop(b), h.max)
		}
	}
	return h.max
}
