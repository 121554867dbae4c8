// Package slot computes Redis Cluster hash slots, for the check that every
// key of a call shares one (Check: the core's before a call leaves, the
// adapters' before they send one) and for the tests and tools that place
// keys on nodes.
package slot

import (
	"errors"
	"strconv"
	"strings"
)

// ErrCrossSlot means a call's keys span more than one cluster slot. It is
// core.ErrCrossSlot, defined here so that Check's errors match it without
// this package importing core.
var ErrCrossSlot = errors.New("presence: keys span cluster slots")

// Check returns an error matching ErrCrossSlot, naming the first key,
// unless every key maps to one Redis Cluster hash slot.
func Check(keys []string) error {
	for i := 1; i < len(keys); i++ {
		if Of(keys[i]) != Of(keys[0]) {
			return &crossError{keys: keys}
		}
	}
	return nil
}

// crossError reports a call whose keys span slots, naming the first key.
type crossError struct{ keys []string }

func (e *crossError) Error() string {
	return "presence: keys span cluster slots: " + strconv.Quote(e.keys[0]) + "…"
}

func (e *crossError) Is(target error) bool { return target == ErrCrossSlot }

// Of returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// hash tag, or of the whole key when it has no tag, modulo 16384.
func Of(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % 16384
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
