package abi_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
)

// fill sets every exported field of the value v points to, recursively, to
// something other than its zero value, so that a round trip that drops a
// field shows. Types it does not know make the test fail: teach the ABI
// about the new field, then this function.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.UnixMilli(1772366400123)))
		return
	case reflect.TypeOf(time.Duration(0)):
		v.SetInt(int64(1500 * time.Millisecond))
		return
	case reflect.TypeOf((*error)(nil)).Elem():
		v.Set(reflect.ValueOf(core.ErrSessionReplaced))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.String:
		v.SetString("x" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint8:
		v.SetUint(1) // a valid value of every enumeration
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), path+"[0]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, path+".key")
		fill(t, e, path+".value")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), path)
		v.Set(p)
	default:
		t.Fatalf("%s: a %s; teach the ABI and this test about it", path, v.Type())
	}
}

func filled[T any](t *testing.T) T {
	var v T
	fill(t, reflect.ValueOf(&v).Elem(), reflect.TypeOf(v).Name())
	return v
}

// TestTypesCarryEveryField fails when a core type gains a field that its
// wire form does not carry.
func TestTypesCarryEveryField(t *testing.T) {
	check := func(name string, want, got any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s does not survive the ABI:\n got %+v\nwant %+v", name, got, want)
		}
	}
	hb := filled[core.Heartbeat](t)
	w := abi.FromHeartbeat(hb)
	check("Heartbeat", hb, decode[abi.Heartbeat](t, &w).Core())
	l := filled[core.Login](t)
	lw := abi.FromLogin(l)
	check("Login", l, decode[abi.Login](t, &lw).Core())
	ack := filled[core.Ack](t)
	aw := abi.FromAck(ack)
	check("Ack", ack, decode[abi.Ack](t, &aw).Core())
	lr := filled[core.LoginResult](t)
	lrw := abi.FromLoginResult(lr)
	check("LoginResult", lr, decode[abi.LoginResult](t, &lrw).Core())
	end := filled[core.Ended](t)
	ew := abi.FromEnded(end)
	check("Ended", end, decode[abi.Ended](t, &ew).Core())
	st := filled[core.UserStatus](t)
	sw := abi.FromUserStatus(st)
	check("UserStatus", st, decode[abi.UserStatus](t, &sw).Core())
	c := filled[core.Count](t)
	cw := abi.FromCount(c)
	check("Count", c, decode[abi.Count](t, &cw).Core())
	pg := filled[core.MemberPage](t)
	pw := abi.FromMemberPage(pg)
	check("MemberPage", pg, decode[abi.MemberPage](t, &pw).Core())
	sr := filled[core.SweepReport](t)
	srw := abi.FromSweepReport(sr)
	check("SweepReport", sr, decode[abi.SweepReport](t, &srw).Core())
	lc := []core.LoggedChange{filled[core.LoggedChange](t)}
	lcw := abi.FromChangeLog(lc, true)
	gotLC, gap := decode[abi.ChangeLog](t, &lcw).Core()
	check("LoggedChange", lc, gotLC)
	if !gap {
		t.Error("ChangeLog.Gap lost")
	}
}

func decode[T any](t *testing.T, v any) T {
	t.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := abi.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return out
}
