package benchkit

import "sort"

// MedianRow folds rows of the same workload, measured in several rounds,
// into one: rates, latencies and costs per item are the median of the
// rounds (each figure on its own), counts and seconds their sum, and Runs
// the number of rounds. Commands are the median round's by rate. It
// returns the zero row for no rows.
func MedianRow(rows []ThroughputRow) ThroughputRow {
	if len(rows) == 0 {
		return ThroughputRow{}
	}
	med := func(f func(*ThroughputRow) float64) float64 {
		v := make([]float64, len(rows))
		for i := range rows {
			v[i] = f(&rows[i])
		}
		return Median(v)
	}
	byRate := make([]int, len(rows))
	for i := range byRate {
		byRate[i] = i
	}
	sort.Slice(byRate, func(a, b int) bool { return rows[byRate[a]].ItemsPerSec < rows[byRate[b]].ItemsPerSec })
	out := rows[byRate[(len(rows)-1)/2]]
	out.Ops, out.Items, out.Errors, out.Seconds = 0, 0, 0, 0
	for _, r := range rows {
		out.Ops += r.Ops
		out.Items += r.Items
		out.Errors += r.Errors
		out.Seconds += r.Seconds
	}
	out.Seconds = round(out.Seconds, 3)
	out.OpsPerSec = round(med(func(r *ThroughputRow) float64 { return r.OpsPerSec }), 0)
	out.ItemsPerSec = round(med(func(r *ThroughputRow) float64 { return r.ItemsPerSec }), 0)
	out.P50us = round(med(func(r *ThroughputRow) float64 { return r.P50us }), 1)
	out.P99us = round(med(func(r *ThroughputRow) float64 { return r.P99us }), 1)
	out.Maxus = round(med(func(r *ThroughputRow) float64 { return r.Maxus }), 1)
	out.ServerCPUus = round(med(func(r *ThroughputRow) float64 { return r.ServerCPUus }), 2)
	out.ServerInstr = round(med(func(r *ThroughputRow) float64 { return r.ServerInstr }), 0)
	out.ClientCPUus = round(med(func(r *ThroughputRow) float64 { return r.ClientCPUus }), 2)
	out.ClientAllocs = round(med(func(r *ThroughputRow) float64 { return r.ClientAllocs }), 1)
	out.Runs = len(rows)
	return out
}

// Median returns the median of v (the mean of the middle two for an even
// count), or 0 for none. It sorts a copy.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
