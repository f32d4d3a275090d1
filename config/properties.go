package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/magiconair/properties"
	"go.yaml.in/yaml/v3"
)

// parseProperties reads a Java .properties file (the Java executor's
// application.properties or xxl-job-executor.properties) into a YAML mapping
// of dotted keys, so one code path applies both formats. The syntax
// (comments, separators, escapes, \uXXXX, continuations) is
// magiconair/properties' reading of java.util.Properties, without its
// ${key} expansion; a malformed escape is a problem on its line. A key
// given twice keeps its last value, as in Java. An empty value keeps the
// key's default (the Java executor reads an empty ip or address as "find
// it out").
//
// The library keeps no positions, and messages name a key's line: each
// logical line (a line and those its trailing backslashes continue, joined
// as Java joins them, the leading blanks of each continuing line dropped)
// is read on its own.
func parseProperties(data []byte) (doc *yaml.Node, errLine int, err error) {
	doc = &yaml.Node{Kind: yaml.MappingNode}
	index := map[string]int{} // key → position of its value in doc.Content
	loader := properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		logical := lines[i]
		// Java joins a logical line before it reads the key: the library
		// would keep a continuation inside a key as a newline in it.
		for !comment(lines[start]) && continues(lines[i]) {
			logical = logical[:len(logical)-1]
			if i+1 == len(lines) {
				break // Java drops a continuation at the end of the file
			}
			i++
			logical += strings.TrimLeft(lines[i], " \t\f")
		}
		// A line starting with its separator has no key: the library
		// answers it with the value's first characters (a secret, for a
		// token whose key was lost) and a lexer goroutine left blocked.
		if t := strings.TrimLeft(logical, " \t\f"); t != "" && (t[0] == '=' || t[0] == ':') {
			return nil, start + 1, fmt.Errorf("a value without a key: the line starts with '%c'", t[0])
		}
		p, err := loader.LoadBytes([]byte(logical + "\n"))
		if err != nil {
			return nil, start + 1, errors.New(libPosition.ReplaceAllString(err.Error(), ""))
		}
		for _, key := range p.Keys() {
			value, _ := p.Get(key)
			k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: start + 1, Column: 1}
			v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Line: start + 1}
			if v.Value == "" {
				v.Tag = "!!null"
			}
			if at, dup := index[key]; dup {
				doc.Content[at] = v
				continue
			}
			doc.Content = append(doc.Content, k, v)
			index[key] = len(doc.Content) - 1
		}
	}
	return doc, 0, nil
}

// libPosition is the library's own prefix of a message, with a line
// counted within one logical line.
var libPosition = regexp.MustCompile(`^properties: Line \d+: `)

// comment reports a comment line ('#' or '!' first); it never continues.
func comment(line string) bool {
	t := strings.TrimLeft(line, " \t\f")
	return t != "" && (t[0] == '#' || t[0] == '!')
}

// continues reports a line ending in an odd number of backslashes: the
// next line goes on with it.
func continues(line string) bool {
	n := 0
	for n < len(line) && line[len(line)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}
