package jsonwalk_test

import (
	"slices"
	"testing"

	"github.com/orderjob/executor/xxljob/jsonwalk"
)

func TestSkipValue(t *testing.T) {
	for _, tc := range []struct {
		b    string
		i    int
		want int
	}{
		{`{"a":1}`, 1, 4},                     // a member name
		{`{"a":1}`, 5, 6},                     // a number ends at the '}'
		{`{"a":"x\"}"}`, 5, 11},               // an escaped quote does not end the string
		{`{"a":"x\\"}`, 5, 10},                // an escaped backslash does not escape the quote
		{`{"a":{"b":[1,"]"]}, "c":2}`, 5, 18}, // nested, with brackets in a string
		{`{"a":true ,"b":2}`, 5, 9},           // a literal ends at white space
		{`{a:1}`, 1, 2},                       // an unquoted name ends at its ':'
		{`{"a`, 1, 4},                         // a string that never closes: one past the end
	} {
		if got := jsonwalk.SkipValue([]byte(tc.b), tc.i); got != tc.want {
			t.Errorf("SkipValue(%s, %d) = %d, want %d", tc.b, tc.i, got, tc.want)
		}
	}
}

func TestSkipSpace(t *testing.T) {
	if got := jsonwalk.SkipSpace([]byte("{ \t\r\n\"a\""), 1); got != 5 {
		t.Errorf("SkipSpace = %d, want 5", got)
	}
	if got := jsonwalk.SkipSpace([]byte("{  "), 1); got != 3 {
		t.Errorf("SkipSpace at the end = %d, want 3", got)
	}
}

func TestMembers(t *testing.T) {
	b := []byte(`{ "a" : 1 ,"b":{"c":[2]},"d":"x"}`)
	var got []string
	for m := range jsonwalk.Members(b) {
		got = append(got, string(b[m.Name:m.NameEnd])+"="+string(b[m.Value:m.ValueEnd]))
	}
	if want := []string{`"a"=1`, `"b"={"c":[2]}`, `"d"="x"`}; !slices.Equal(got, want) {
		t.Errorf("Members = %q, want %q", got, want)
	}
	for range jsonwalk.Members([]byte(`{}`)) {
		t.Error("a member in {}")
	}
}
