// Package jsonwalk finds the ends of JSON values in a body's bytes without
// decoding them, for checks that read only a JSON object's member names:
// the xxljob executor's and the order executor's API port's matching of
// members by their exact names. A walk allocates nothing and reads each
// byte about once (quotes are found with bytes.IndexByte), where a
// decoder's tokens would copy every value. It uses only the standard
// library.
package jsonwalk

import (
	"bytes"
	"iter"
)

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space (len(b) if none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// SkipValue returns the end of the JSON value starting at b[i] (a member
// name too): the index just past it. It trusts b to be valid JSON; on
// bytes that are not, it returns some index after i, at most len(b), or
// past it by one for a string that never closes (callers compare with
// len(b)). An unquoted name ends at its ':'.
func SkipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = closingQuote(b, i+1)
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of a number or literal
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ':', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// Member locates one member of an object in its bytes b: the name (quoted,
// if b is valid JSON) is b[Name:NameEnd] and the value b[Value:ValueEnd].
// On bytes that are not JSON, NameEnd may be past len(b) (see SkipValue):
// check it before slicing.
type Member struct{ Name, NameEnd, Value, ValueEnd int }

// Members yields the members of the object that starts at b[0] ('{'), in
// order, up to its closing '}' or the end of b. It trusts b as SkipValue
// does: on bytes that are not JSON it yields some spans and stops, without
// reading past b.
func Members(b []byte) iter.Seq[Member] {
	return func(yield func(Member) bool) {
		for i := SkipSpace(b, 1); i < len(b) && b[i] != '}'; {
			m := Member{Name: i, NameEnd: SkipValue(b, i)}
			m.Value = SkipSpace(b, SkipSpace(b, m.NameEnd)+1) // past the ':'
			m.ValueEnd = SkipValue(b, m.Value)
			if !yield(m) {
				return
			}
			i = SkipSpace(b, m.ValueEnd)
			if i < len(b) && b[i] == ',' {
				i = SkipSpace(b, i+1)
			}
		}
	}
}

// closingQuote returns the index of the quote that ends the string whose
// text starts at b[i], or len(b) if none does.
func closingQuote(b []byte, i int) int {
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		q += i
		escapes := 0 // the backslashes right before it: odd, it is escaped
		for j := q - 1; j >= i && b[j] == '\\'; j-- {
			escapes++
		}
		if escapes%2 == 0 {
			return q
		}
		i = q + 1
	}
}
