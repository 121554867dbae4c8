package core

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// jsonStrings are strings that encoding/json writes in every way it has.
var jsonStrings = []string{
	"", "alice", "a\"b\\c/d", "<script>&amp;</script>", "\b\f\n\r\t\x00\x01\x1f\x7f", "é漢字🎉",
	"\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "\uFFFD", "\xf4\x90\x80\x80", strings.Repeat("ab<", 50),
}

// TestMessageJSONMatchesEncodingJSON: the hand-written encoder writes what
// json.Marshal writes.
func TestMessageJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonStrings {
		for _, at := range []int64{0, -1, 1772366400123, 1<<63 - 1, -1 << 63} {
			checkMarshal(t, s, at)
		}
	}
}

func checkMarshal(t *testing.T, s string, at int64) {
	t.Helper()
	c := changeMessage{User: s, From: "ONLINE" + s, To: s + "x", At: at}
	want, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.appendJSON(nil); !bytes.Equal(got, want) {
		t.Fatalf("changeMessage %q: got %s, encoding/json %s", s, got, want)
	}
	for _, gw := range []string{"", s, "gw"} {
		k := kickMessage{User: s, Device: "d" + s, Kind: s, Gateway: gw, At: at}
		want, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.appendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("kickMessage %q: got %s, encoding/json %s", s, got, want)
		}
	}
}

// jsonInputs are messages to decode: valid, malformed and of the wrong
// shape, in the ways that encoding/json tells apart.
var jsonInputs = []string{
	`{"user":"u","from":"ONLINE","to":"AWAY","at":5}`,
	`{"user":"u","device":"d","kind":"web","gateway":"g","at":5}`,
	` {"user" : "u" , "at" : -0 } `, `null`, ` null `, `{}`, `[]`, `"x"`, `1`, `true`, ``, ` `, `{`, `}`,
	`{"user":"a","user":"b"}`, `{"user":"a","user":null}`, `{"at":1,"at":null}`, `{"USER":"a","From":"b","tO":"c","AT":1}`,
	`{"uſer":"a","ᴋind":"x","Kind":"web","\u212aind":"k","u\u017fer":"s"}`, `{"us\u0065r":"esc"}`,
	`{"user":1}`, `{"at":"1"}`, `{"at":1.0}`, `{"at":1e3}`, `{"at":9223372036854775808}`, `{"at":-9223372036854775808}`,
	`{"at":01}`, `{"at":-}`, `{"at":1.}`, `{"at":.5}`, `{"at":1e}`, `{"at":1E+2}`, `{"at":true}`, `{"at":[1]}`, `{"at":{}}`,
	`{"user":{"a":1}}`, `{"user":[]}`, `{"user":false}`, `{"other":{"a":[1,2,{"b":null}]},"user":"u"}`,
	`{"other":[1,2,]}`, `{"other":[,]}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{'a':1}`, `{"a":nul}`,
	`{"a":truex}`, `{"a":1}x`, `{"a":1}{}`, `[1,2]`, `{"user":"a\u00e9\ud83c\udf89"}`, `{"user":"\ud800"}`,
	`{"user":"\udc00\ud800"}`, `{"user":"\ud800\u0041"}`, `{"user":"\ud800\"}`, `{"user":"\u12"}`, `{"user":"\x"}`,
	`{"user":"\'"}`, "{\"user\":\"a\tb\"}", "{\"user\":\"\xff\xfe\"}", "{\"user\":\"\xed\xa0\x80\"}", "{\"\xff\":1}",
	`{"user":"\/\b\f\n\r\t\\\""}`, "\xef\xbb\xbf{}", `{"user":"u"}` + "\x00", "\t\r\n{}\t\r\n", `{"user":"unterminated}`,
	`{"user":"u","from":"ONLINE","to":"AWAY","at":5,"extra":[true,false,null,-1.5e-3,"s",{}]}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, `{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
}

// TestMessageJSONDecodeMatchesEncodingJSON: the hand-written decoder
// accepts what json.Unmarshal accepts and reads the same fields from it.
func TestMessageJSONDecodeMatchesEncodingJSON(t *testing.T) {
	for _, in := range jsonInputs {
		checkUnmarshal(t, []byte(in))
	}
	for _, s := range jsonStrings {
		checkUnmarshal(t, changeMessage{User: s, From: s, To: s}.appendJSON(nil))
		checkUnmarshal(t, kickMessage{User: s, Device: s, Kind: s, Gateway: s}.appendJSON(nil))
	}
}

func checkUnmarshal(t *testing.T, in []byte) {
	t.Helper()
	var want, got changeMessage
	errWant, errGot := json.Unmarshal(in, &want), got.decodeJSON(in)
	if (errWant == nil) != (errGot == nil) || errWant == nil && got != want {
		t.Fatalf("changeMessage %q: got %+v, %v; encoding/json %+v, %v", in, got, errGot, want, errWant)
	}
	var wantK, gotK kickMessage
	errWant, errGot = json.Unmarshal(in, &wantK), gotK.decodeJSON(in)
	if (errWant == nil) != (errGot == nil) || errWant == nil && gotK != wantK {
		t.Fatalf("kickMessage %q: got %+v, %v; encoding/json %+v, %v", in, gotK, errGot, wantK, errWant)
	}
}

// FuzzMessageJSON compares the hand-written encoder and decoder with
// encoding/json.
func FuzzMessageJSON(f *testing.F) {
	for _, in := range jsonInputs {
		if len(in) < 1000 {
			f.Add(in)
		}
	}
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkUnmarshal(t, []byte(in))
		checkMarshal(t, in, int64(len(in)))
	})
}
