package wasmsize

import (
	"bytes"
	"encoding/binary"
	"sort"
)

// Part is one kind of content of the data section.
type Part struct {
	Name string
	Size int // bytes of the data section's segments
}

// segment is one active data segment: its bytes at addr in memory.
type segment struct {
	addr int
	b    []byte
}

// Data breaks the data section of a module Go built (GOARCH=wasm, stripped
// or not) down by what it holds, largest first: the pclntab's tables and
// read-only data (type descriptors, strings, static tables), from the
// bounds that the runtime's moduledata, which the data section holds,
// gives them; Lua scripts, the spans of the data that equal a piece of
// one of texts; and the variables with initial values.
func Data(b []byte, texts []string) ([]Part, error) {
	segs, err := dataSegments(b)
	if err != nil {
		return nil, err
	}
	m := memory(segs)
	// The pclntab starts with its header: the magic of Go 1.20 and later,
	// two zero bytes, the instruction size (1) and the pointer size (8).
	hdr := m.find([]byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8})
	if hdr < 0 {
		return nil, ErrFormat
	}
	// The moduledata starts with a pointer to that header, then the slice
	// of function names, which starts where the header says.
	var ptr [16]byte
	binary.LittleEndian.PutUint64(ptr[:], uint64(hdr))
	binary.LittleEndian.PutUint64(ptr[8:], uint64(hdr)+m.u64(hdr+32))
	md := m.find(ptr[:])
	if md < 0 {
		return nil, ErrFormat
	}
	field := func(off int) int { return int(m.u64(md + off)) }
	at := func(off int) int { return hdr + int(m.u64(hdr+off)) } // from the pcHeader
	ranges := []struct {
		name   string
		lo, hi int
	}{
		{"pclntab: header", hdr, at(32)},
		{"pclntab: function names", at(32), at(40)},
		{"pclntab: compilation units", at(40), at(48)},
		{"pclntab: file names", at(48), at(56)},
		{"pclntab: pc-value tables", at(56), at(64)},
		{"pclntab: function table", at(64), field(320)},                      // to gofunc
		{"pclntab: funcdata (stack maps, inlining)", field(320), field(328)}, // gofunc to epclntab
		// types to etypes: on GOARCH=wasm the whole of rodata.
		{"rodata: type descriptors, strings, static tables", field(296), field(304)},
		{"typelinks", field(360), field(360) + 4*field(368)},
		{"itablinks", field(384), field(384) + 8*field(392)},
		{"variables with pointers (data)", field(208), field(216)},
		{"variables without pointers (noptrdata)", field(192), field(200)},
	}
	owner := make([]int8, m.end()) // index+1 into ranges, or -1 for Lua
	for i, r := range ranges {
		for a := max(r.lo, 0); a < r.hi && a < len(owner); a++ {
			if owner[a] == 0 {
				owner[a] = int8(i + 1)
			}
		}
	}
	for _, t := range texts {
		for _, span := range m.spans(t) {
			for a := span[0]; a < span[1]; a++ {
				owner[a] = -1
			}
		}
	}
	sizes := make([]int, len(ranges))
	lua, rest := 0, 0
	for _, s := range segs {
		for a := s.addr; a < s.addr+len(s.b); a++ {
			switch o := owner[a]; {
			case o < 0:
				lua++
			case o == 0:
				rest++
			default:
				sizes[o-1]++
			}
		}
	}
	parts := []Part{{"Lua scripts (in rodata)", lua}, {"other", rest}}
	for i, r := range ranges {
		parts = append(parts, Part{r.name, sizes[i]})
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].Size > parts[j].Size })
	return parts, nil
}

// dataSegments reads the active segments of the module's data section.
func dataSegments(b []byte) ([]segment, error) {
	r := &reader{b: b}
	if string(r.bytes(4)) != "\x00asm" {
		return nil, ErrFormat
	}
	r.bytes(4)
	for r.off < len(b) && !r.err {
		id := r.byte()
		body := &reader{b: r.bytes(r.uleb())}
		if id != 11 {
			continue
		}
		var segs []segment
		for n := body.uleb(); n > 0 && !body.err; n-- {
			// Go writes active segments of memory 0 at an i32.const.
			if body.uleb() != 0 || body.byte() != 0x41 {
				return nil, ErrFormat
			}
			addr := body.sleb()
			if body.byte() != 0x0b {
				return nil, ErrFormat
			}
			segs = append(segs, segment{addr: addr, b: body.bytes(body.uleb())})
		}
		if body.err {
			return nil, ErrFormat
		}
		return segs, nil
	}
	return nil, ErrFormat
}

func (r *reader) sleb() int {
	var v int64
	var shift uint
	for {
		c := r.byte()
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return int(v)
		}
		if shift >= 64 || r.err {
			r.err = true
			return 0
		}
	}
}

// memory is the module's initial memory, as its segments write it.
type memory []segment

func (m memory) end() int {
	e := 0
	for _, s := range m {
		e = max(e, s.addr+len(s.b))
	}
	return e
}

// find returns the address of the first occurrence of p in the memory, or
// -1. It looks across segments: the linker leaves runs of zeros out of
// them, and such a run may fall inside p.
func (m memory) find(p []byte) int {
	flat := make([]byte, m.end())
	for _, s := range m {
		copy(flat[s.addr:], s.b)
	}
	return bytes.Index(flat, p)
}

// u64 reads a little-endian uint64 at addr (zero outside the segments).
func (m memory) u64(addr int) uint64 {
	var b [8]byte
	for i := range b {
		for _, s := range m {
			if a := addr + i - s.addr; a >= 0 && a < len(s.b) {
				b[i] = s.b[a]
				break
			}
		}
	}
	return binary.LittleEndian.Uint64(b[:])
}

// spans returns the address ranges of the memory that hold pieces of t
// (at least 64 bytes each): the module may keep a text in parts, which
// it joins when it first needs it.
func (m memory) spans(t string) [][2]int {
	const least = 64
	var out [][2]int
	for i := 0; i+least <= len(t); {
		found := false
		for _, s := range m {
			j := bytes.Index(s.b, []byte(t[i:i+least]))
			if j < 0 {
				continue
			}
			n := least
			for i+n < len(t) && j+n < len(s.b) && s.b[j+n] == t[i+n] {
				n++
			}
			out = append(out, [2]int{s.addr + j, s.addr + j + n})
			i += n
			found = true
			break
		}
		if !found {
			i++
		}
	}
	return out
}
