package conformance

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
)

// fingerprint renders the whole state of a model canonically (maps sorted,
// pointers followed), reading its fields by reflection, so that the
// linearizability checker can tell equal states apart from different ones
// without the model exporting them. It leaves out what is not state: the
// lock, the settings and the token source.
func fingerprint(m *core.Model) string {
	var b strings.Builder
	v := reflect.ValueOf(m).Elem()
	t := v.Type()
	for i := 0; i < v.NumField(); i++ {
		switch t.Field(i).Name {
		case "mu", "s", "rand":
			continue
		}
		b.WriteString(t.Field(i).Name)
		b.WriteByte('=')
		walk(&b, v.Field(i), 0)
		b.WriteByte(';')
	}
	return b.String()
}

var timeType = reflect.TypeOf(time.Time{})

// maxDepth guards walk against cycles, which model state does not have.
const maxDepth = 32

func walk(b *strings.Builder, v reflect.Value, depth int) {
	if depth > maxDepth {
		b.WriteString("…")
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		walk(b, v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == timeType {
			// wall and ext hold the instant; the location is not state.
			b.WriteString(strconv.FormatUint(v.Field(0).Uint(), 10) + "/" + strconv.FormatInt(v.Field(1).Int(), 10))
			return
		}
		b.WriteByte('{')
		for i := 0; i < v.NumField(); i++ {
			walk(b, v.Field(i), depth+1)
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case reflect.Map:
		keys := make([]string, 0, v.Len())
		vals := map[string]reflect.Value{}
		iter := v.MapRange()
		for iter.Next() {
			var kb strings.Builder
			walk(&kb, iter.Key(), depth+1)
			keys = append(keys, kb.String())
			vals[kb.String()] = iter.Value()
		}
		sort.Strings(keys)
		b.WriteByte('[')
		for _, k := range keys {
			b.WriteString(k)
			b.WriteByte(':')
			walk(b, vals[k], depth+1)
			b.WriteByte(' ')
		}
		b.WriteByte(']')
	case reflect.Slice, reflect.Array:
		b.WriteByte('(')
		for i := 0; i < v.Len(); i++ {
			walk(b, v.Index(i), depth+1)
			b.WriteByte(' ')
		}
		b.WriteByte(')')
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		b.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	default:
		b.WriteString(v.Kind().String())
	}
}
