// Package slot computes Redis Cluster hash slots, for the core's check
// that every key of a call shares one (core.SameSlot) and for the tests
// and tools that place keys on nodes.
package slot

import "strings"

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
