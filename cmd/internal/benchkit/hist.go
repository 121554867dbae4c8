package benchkit

import (
	"math/bits"
	"time"
)

// histSub is the number of sub-buckets per power of two: 64 gives a
// relative precision of about 1.6 %.
const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	histBuckets = 64 * histSub
)

// Hist is a log-linear histogram of durations with about 1.6 % precision
// from 1 ns to hours. Its zero value is ready; Record never allocates. It is
// not safe for concurrent use: give each worker its own and Merge them.
type Hist struct {
	counts [histBuckets]uint64
	n      uint64
	max    int64
	sum    int64
}

func histIndex(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	v := uint64(ns)
	if v < 2*histSub {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits - 1
	return e*histSub + int(v>>uint(e))
}

// histValue is the lower bound of bucket i.
func histValue(i int) int64 {
	if i < 2*histSub {
		return int64(i)
	}
	e := i/histSub - 1
	m := i%histSub + histSub
	return int64(m) << uint(e)
}

// Record adds one duration.
func (h *Hist) Record(d time.Duration) {
	ns := int64(d)
	i := histIndex(ns)
	if i >= histBuckets {
		i = histBuckets - 1
	}
	h.counts[i]++
	h.n++
	h.sum += ns
	if ns > h.max {
		h.max = ns
	}
}

// Merge adds every sample of o to h.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.max > h.max {
		h.max = o.max
	}
}

// Count returns the number of samples.
func (h *Hist) Count() uint64 { return h.n }

// Max returns the largest sample, exactly.
func (h *Hist) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the mean of the samples, or 0 without samples.
func (h *Hist) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / int64(h.n))
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) to within the histogram's
// precision, or 0 without samples.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n))
	if rank >= h.n {
		rank = h.n - 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			v := histValue(i)
			if v > h.max {
				v = h.max
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
