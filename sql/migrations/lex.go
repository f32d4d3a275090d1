package migrations

import "strings"

// A small lexer for the DDL the migrator reads: enough to cut statements
// into words, quoted strings and parenthesised groups, and to split lists at
// commas outside quotes and parentheses.

// token is a word (identifier, keyword, number), a quoted string, a
// parenthesised group (text is its inside) or one punctuation character.
type token struct {
	kind     tokKind
	text     string
	pos, end int  // byte offsets in the tokenized string
	quoted   bool // a backquoted identifier: never a keyword
}

type tokKind int

const (
	tokWord tokKind = iota
	tokString
	tokGroup
	tokPunct
)

// tokenize cuts SQL into tokens. Backquoted identifiers are words without
// their quotes; strings keep their quotes.
func tokenize(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			i++
		case ch == '\'' || ch == '"':
			j := skipQuoted(s, i)
			out = append(out, token{kind: tokString, text: s[i:j], pos: i, end: j})
			i = j
		case ch == '`':
			j := strings.IndexByte(s[i+1:], '`')
			if j < 0 {
				j = len(s) - i - 1
			}
			out = append(out, token{tokWord, s[i+1 : i+1+j], i, i + j + 2, true})
			i += j + 2
		case ch == '(':
			j := matchParen(s, i)
			inner := s[i+1 : max(i+1, j-1)]
			out = append(out, token{kind: tokGroup, text: inner, pos: i, end: j})
			i = j
		case isWordChar(ch):
			j := i
			for j < len(s) && isWordChar(s[j]) {
				j++
			}
			out = append(out, token{kind: tokWord, text: s[i:j], pos: i, end: j})
			i = j
		default:
			out = append(out, token{kind: tokPunct, text: s[i : i+1], pos: i, end: i + 1})
			i++
		}
	}
	return out
}

func isWordChar(c byte) bool {
	return c == '_' || c == '.' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// skipQuoted returns the offset after the string starting at i (” and \'
// escape the quote).
func skipQuoted(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

// matchParen returns the offset after the parenthesis matching the one at i.
func matchParen(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\'', '"':
			j = skipQuoted(s, j) - 1
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(s)
}

// splitTop splits s at commas outside parentheses and quotes.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '\'', '"':
			j = skipQuoted(s, j) - 1
		case '`':
			if k := strings.IndexByte(s[j+1:], '`'); k >= 0 {
				j += k + 1
			}
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:j]))
				start = j + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

// squeeze trims s and collapses runs of white space outside quotes to one
// space.
func squeeze(s string) string {
	var b strings.Builder
	space := false
	for j := 0; j < len(s); j++ {
		switch c := s[j]; c {
		case ' ', '\t', '\n', '\r':
			space = true
		case '\'', '"':
			k := skipQuoted(s, j)
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteString(s[j:k])
			j = k - 1
		default:
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteByte(c)
		}
	}
	return b.String()
}

func identLower(t token) string { return strings.ToLower(t.text) }

// keyword is the upper-cased text of an unquoted word, or "".
func keyword(t token) string {
	if t.kind != tokWord || t.quoted {
		return ""
	}
	return strings.ToUpper(t.text)
}
