// Package wasmsize breaks a WebAssembly module built by Go down by section
// and its code down by Go package, using the module's "name" section (so
// the module must be built without -ldflags=-s).
//
// The linker writes function names with every character other than a
// letter, digit, '_' or '.' replaced by '_' ("github.com_x_y.(*T).M" for
// "github.com/x/y.(*T).M"), so the import paths cannot be read back from
// them: Parse takes the paths the module was built from (go list -deps)
// and matches each name against them.
//
// Go's nm and objdump do not read WebAssembly, and the linker writes no
// map; the function bodies are most of a Go module (the data section, with
// the pclntab, type descriptors and strings, is the rest), so their sizes
// by package show what each package costs.
package wasmsize

import (
	"errors"
	"regexp"
	"sort"
)

// Section is one section of a module.
type Section struct {
	Name string // "code", "data", "custom:name", ...
	Size int    // bytes, with the section's header
}

// Package is the code of one Go package.
type Package struct {
	Path  string // import path, or "(other)" for linker-made functions
	Funcs int
	Size  int // bytes of function bodies, with their size prefixes
}

// Func is the code of one function.
type Func struct {
	Name    string // as the linker wrote it, in the name section
	Package string // import path, or Other
	Size    int    // bytes of its body, with its size prefix
}

// Report is the breakdown of a module.
type Report struct {
	Total    int
	Sections []Section // in file order
	Packages []Package // largest first
	Funcs    []Func    // largest first
}

// Section returns the size of the named section, 0 if absent.
func (r *Report) Section(name string) int {
	n := 0
	for _, s := range r.Sections {
		if s.Name == name {
			n += s.Size
		}
	}
	return n
}

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "datacount"}

// ErrFormat is returned for a module that cannot be parsed.
var ErrFormat = errors.New("wasmsize: malformed module")

type reader struct {
	b   []byte
	off int
	err bool
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.err = true
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) uleb() int {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		c := r.byte()
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if v > uint64(len(r.b)) {
				r.err = true
				return 0
			}
			return int(v)
		}
	}
	r.err = true
	return 0
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.off {
		r.err = true
		r.off = len(r.b)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) name() string { return string(r.bytes(r.uleb())) }

func (r *reader) limits() {
	if r.byte()&1 != 0 {
		r.uleb()
	}
	r.uleb()
}

// Parse breaks the module b down; paths are the import paths of the
// packages linked into it, which the function names are matched against.
func Parse(b []byte, paths []string) (*Report, error) {
	r := &reader{b: b}
	if string(r.bytes(4)) != "\x00asm" {
		return nil, ErrFormat
	}
	r.bytes(4) // version
	rep := &Report{Total: len(b)}
	var (
		importedFuncs int
		bodies        []int // size of each function body, with its prefix
		names         = map[int]string{}
	)
	for r.off < len(b) && !r.err {
		start := r.off
		id := int(r.byte())
		size := r.uleb()
		body := &reader{b: r.bytes(size)}
		name := "unknown"
		if id < len(sectionNames) {
			name = sectionNames[id]
		}
		switch id {
		case 0:
			name = "custom:" + body.name()
			if name == "custom:name" {
				parseNames(body, names)
			}
		case 2:
			for n := body.uleb(); n > 0 && !body.err; n-- {
				body.name()
				body.name()
				switch body.byte() {
				case 0:
					importedFuncs++
					body.uleb()
				case 1:
					body.byte()
					body.limits()
				case 2:
					body.limits()
				case 3:
					body.byte()
					body.byte()
				default:
					body.err = true
				}
			}
		case 10:
			for n := body.uleb(); n > 0 && !body.err; n-- {
				s := body.off
				body.bytes(body.uleb())
				bodies = append(bodies, body.off-s)
			}
		}
		if body.err {
			return nil, ErrFormat
		}
		rep.Sections = append(rep.Sections, Section{Name: name, Size: r.off - start})
	}
	if r.err {
		return nil, ErrFormat
	}
	match := newMatcher(paths)
	byPath := map[string]*Package{}
	for i, size := range bodies {
		name := names[importedFuncs+i]
		path := match.packageOf(name)
		rep.Funcs = append(rep.Funcs, Func{Name: name, Package: path, Size: size})
		p := byPath[path]
		if p == nil {
			p = &Package{Path: path}
			byPath[path] = p
		}
		p.Funcs++
		p.Size += size
	}
	for _, p := range byPath {
		rep.Packages = append(rep.Packages, *p)
	}
	sort.Slice(rep.Packages, func(i, j int) bool {
		a, b := rep.Packages[i], rep.Packages[j]
		if a.Size != b.Size {
			return a.Size > b.Size
		}
		return a.Path < b.Path
	})
	sort.SliceStable(rep.Funcs, func(i, j int) bool { return rep.Funcs[i].Size > rep.Funcs[j].Size })
	return rep, nil
}

func parseNames(r *reader, names map[int]string) {
	for r.off < len(r.b) && !r.err {
		id := r.byte()
		sub := &reader{b: r.bytes(r.uleb())}
		if id != 1 {
			continue
		}
		for n := sub.uleb(); n > 0 && !sub.err; n-- {
			i := sub.uleb()
			names[i] = sub.name()
		}
	}
}

// Other is the package of functions that belong to none: the linker's
// (type equality and hash functions, wrappers) and unnamed ones.
const Other = "(other)"

var unsafeChars = regexp.MustCompile(`[^\w.]`) // as cmd/link/internal/wasm

type matcher map[string]string // sanitized path -> path

func newMatcher(paths []string) matcher {
	m := matcher{}
	for _, p := range paths {
		m[unsafeChars.ReplaceAllString(p, "_")] = p
	}
	return m
}

// packageOf returns the import path of the package that the function named
// sym (as the linker wrote it) belongs to: the longest known path that sym
// starts with, followed by a dot; Other if none.
func (m matcher) packageOf(sym string) string {
	best := ""
	for i := 0; i < len(sym); i++ {
		if sym[i] != '.' {
			continue
		}
		if p, ok := m[sym[:i]]; ok && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return Other
	}
	return best
}
