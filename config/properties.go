package config

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseProperties reads a Java .properties file (the Java executor's
// application.properties or xxl-job-executor.properties) into a YAML mapping
// of dotted keys, so one code path applies both formats. It follows
// java.util.Properties where a configuration can meet it: '#' and '!'
// comment lines, '=', ':' or white space between key and value, a trailing
// backslash continuing a line, the escapes \t \n \r \f \uXXXX and a
// backslash before any other character standing for that character. A key
// given twice keeps its last value, as in Java. An empty value keeps the
// key's default (the Java executor reads an empty ip or address as "find
// it out").
func parseProperties(data []byte) *yaml.Node {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	index := map[string]int{} // key → position of its value in doc.Content
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// A line ending in an odd number of backslashes continues on the
		// next, whose leading white space is dropped.
		for continues(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if continues(line) {
			line = line[:len(line)-1]
		}
		key, value := splitProperty(line)
		k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: unescape(key), Line: start, Column: 1}
		v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: unescape(value), Line: start}
		if v.Value == "" {
			v.Tag = "!!null"
		}
		if at, dup := index[k.Value]; dup {
			doc.Content[at] = v
			continue
		}
		doc.Content = append(doc.Content, k, v)
		index[k.Value] = len(doc.Content) - 1
	}
	return doc
}

// continues reports a line ending in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for n < len(line) && line[len(line)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line at the first unescaped '=', ':' or
// white space; white space around the separator is dropped.
func splitProperty(line string) (key, value string) {
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '\\':
			i++ // the next character is escaped
		case '=', ':', ' ', '\t', '\f':
			key, rest := line[:i], strings.TrimLeft(line[i:], " \t\f")
			if c == ' ' || c == '\t' || c == '\f' {
				if rest != "" && (rest[0] == '=' || rest[0] == ':') {
					rest = rest[1:]
				}
			} else {
				rest = rest[1:]
			}
			return key, strings.TrimLeft(rest, " \t\f")
		}
	}
	return line, ""
}

// unescape resolves the escapes of a key or value.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+4 < len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+5], 16, 32); err == nil {
					b.WriteRune(rune(r))
					i += 4
					continue
				}
			}
			b.WriteByte('u')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
