package abi

import (
	"math"
	"strconv"
)

// A Duration travels as a decimal number of milliseconds, written and read
// digit for digit: through a float64, a duration of more than 2^53 ns
// would lose nanoseconds, and the module would link Go's float formatting
// and parsing for it.

// appendDuration writes d in milliseconds, with up to six decimals.
func appendDuration(b []byte, d Duration) []byte {
	ns := int64(d)
	if ns%1e6 == 0 {
		return strconv.AppendInt(b, ns/1e6, 10)
	}
	u := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		u = -u // also right for math.MinInt64
	}
	b = strconv.AppendUint(b, u/1e6, 10)
	frac := [7]byte{'.'}
	r := u % 1e6
	for i := 6; i > 0; i-- {
		frac[i] = byte('0' + r%10)
		r /= 10
	}
	n := len(frac)
	for frac[n-1] == '0' {
		n--
	}
	return append(b, frac[:n]...)
}

// parseDuration reads a JSON number literal of milliseconds, to the
// nearest nanosecond (halves away from zero).
func parseDuration(lit string) (Duration, error) {
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		if n > math.MaxInt64/1_000_000 || n < math.MinInt64/1_000_000 {
			return 0, &DecodeError{What: "value", Reason: "duration out of range: " + truncate(lit)}
		}
		return Duration(n * 1_000_000), nil
	}
	d, ok := parseMillis(lit)
	if !ok {
		return 0, &DecodeError{What: "value", Reason: "duration must be a number of milliseconds, got " + truncate(lit)}
	}
	return d, nil
}

// parseMillis reads a JSON number (-, digits, a fraction, an exponent) of
// milliseconds exactly; ok is false for anything else, and for a duration
// beyond time.Duration's range.
func parseMillis(s string) (d Duration, ok bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	var digits []byte
	exp, i := 0, 0
	for i < len(s) && isDigit(s[i]) {
		digits = append(digits, s[i])
		i++
	}
	if i == 0 {
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && isDigit(s[i]) {
			digits = append(digits, s[i])
			i++
		}
		if i == j {
			return 0, false
		}
		exp -= i - j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		negExp := i < len(s) && s[i] == '-'
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j, e := i, 0
		for ; i < len(s) && isDigit(s[i]); i++ {
			if e < 1e6 { // far beyond any duration either way
				e = e*10 + int(s[i]-'0')
			}
		}
		if i == j {
			return 0, false
		}
		if negExp {
			e = -e
		}
		exp += e
	}
	if i != len(s) {
		return 0, false
	}
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	// The value is digits × 10^exp ms, digits × 10^(exp+6) ns: whole is
	// the number of digits before the point in nanoseconds.
	whole := len(digits) + exp + 6
	if len(digits) == 0 || whole < 0 {
		return 0, true
	}
	if whole > 19 { // 10^19 ns and more: beyond int64
		return 0, false
	}
	var u uint64
	for k := range whole {
		u *= 10
		if k < len(digits) {
			u += uint64(digits[k] - '0')
		}
	}
	if whole < len(digits) && digits[whole] >= '5' {
		u++
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if u > limit {
		return 0, false
	}
	if neg {
		return Duration(-int64(u)), true // also right for math.MinInt64
	}
	return Duration(u), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
