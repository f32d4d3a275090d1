package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/orderjob/executor/internal/suggest"
)

// Default returns the configuration with every default applied.
func Default() *Config {
	c, err := LoadWith(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		panic("config: defaults do not parse: " + err.Error()) // a bad struct tag; caught by tests
	}
	return c
}

// LoadWith is LoadFileWith for YAML content without a file name, for tests
// and tools.
func LoadWith(yamlData []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return LoadFileWith("", yamlData, lookupEnv)
}

// LoadFileWith loads the configuration from a file's content (nil for no
// file), YAML or, when name ends in .properties, Java properties; then
// applies the environment through lookupEnv, then validates. name names
// the file in messages ("" for none). All problems are returned together;
// those in the file name it and the line. (The executor's command line
// reads the file itself, bounded in size and time.)
func LoadFileWith(name string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	c := &Config{}
	l := newLoader(name, c)
	l.defaults()
	if len(data) > 0 {
		if strings.EqualFold(filepath.Ext(name), ".properties") {
			doc, line, err := parseProperties(data)
			if err != nil {
				l.problems = append(l.problems, fmt.Errorf("%s%w", l.at(line), err))
			} else {
				l.applyMapping("", doc)
			}
		} else {
			var doc yaml.Node
			if err := yaml.Unmarshal(data, &doc); err != nil {
				l.problems = append(l.problems, l.yamlError(err))
			} else if len(doc.Content) > 0 {
				l.applyMapping("", doc.Content[0])
			}
		}
		l.fileConflicts()
	}
	l.environment(lookupEnv)
	l.impliedDefaults()
	l.problems = append(l.problems, c.validate()...)
	for i, p := range l.problems {
		l.problems[i] = oneLine(p)
	}
	if len(l.problems) > 0 {
		return nil, fmt.Errorf("config: %d problem(s):\n%w", len(l.problems), errors.Join(listed(l.problems)...))
	}
	return c, nil
}

// maxListedProblems bounds the problems an error lists: a file that
// reuses one wrong mapping under many sections (YAML aliases) can have
// thousands, and a message of megabytes helps nobody.
const maxListedProblems = 100

// listed returns the problems to list: all of them, or the first
// maxListedProblems and a line counting the rest.
func listed(problems []error) []error {
	if len(problems) <= maxListedProblems {
		return problems
	}
	out := slices.Clip(problems[:maxListedProblems])
	return append(out, fmt.Errorf("... and %d more problem(s)", len(problems)-maxListedProblems))
}

// springRoots are the top-level sections of a Spring Boot application file
// (the Java executor sample's server.port, logging.config): skipped with a
// notice, so the file a Java executor ran with loads unchanged.
var springRoots = map[string]bool{"server": true, "spring": true, "logging": true, "management": true}

// loader applies one file and the environment to a Config.
type loader struct {
	file     string // for messages; "" when the content came without a name
	c        *Config
	problems []error
	fields   map[string]field     // normalised path (canonical or alias) → its field
	sections map[string]bool      // normalised paths that hold keys
	set      map[string][]setting // canonical path of an aliased key → the keys of the file that set it
	leaves   map[string]setting   // normalised path of each key the file set, as written → its first setting
	given    map[string]bool      // canonical path of each key the file or the environment set
	// sectionNames caches didYouMean's names by normalised section path.
	sectionNames map[string]sectionNames
}

// setting is one key of the file that set an aliased value.
type setting struct {
	key   string
	line  int
	value string
}

func newLoader(file string, c *Config) *loader {
	l := &loader{file: file, c: c, fields: map[string]field{}, sections: map[string]bool{}, set: map[string][]setting{},
		leaves: map[string]setting{}, given: map[string]bool{}, sectionNames: map[string]sectionNames{}}
	walk(reflect.ValueOf(c).Elem(), "", func(f field) {
		for _, p := range append([]string{f.path}, f.aliases...) {
			np := normKey(p)
			l.fields[np] = f
			for i := strings.LastIndex(np, "."); i > 0; i = strings.LastIndex(np[:i], ".") {
				l.sections[np[:i]] = true
			}
		}
	})
	return l
}

// at is the position prefix of a problem on line n of the file.
func (l *loader) at(n int) string {
	if l.file == "" {
		return fmt.Sprintf("line %d: ", n)
	}
	return fmt.Sprintf("%s:%d: ", l.file, n)
}

func (l *loader) bad(line int, format string, args ...any) {
	l.problems = append(l.problems, errors.New(l.at(line)+fmt.Sprintf(format, args...)))
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError words a YAML syntax error as file:line: what, once.
func (l *loader) yamlError(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return errors.New(l.at(n) + m[2])
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if l.file != "" {
		msg = l.file + ": " + msg
	}
	return errors.New(msg)
}

func (l *loader) defaults() {
	walk(reflect.ValueOf(l.c).Elem(), "", func(f field) {
		if f.def != "" {
			if err := setText(f.v, f.def); err != nil {
				l.problems = append(l.problems, fmt.Errorf("default of %s: %w", f.path, err))
			}
		}
	})
}

// applyMapping sets the keys of a YAML mapping found at path. Keys may be
// dotted (`xxl.job.executor.port: 9999`, as in application.properties) and
// spelt as Spring's relaxed binding allows (logRetentionDays,
// log-retention-days).
func (l *loader) applyMapping(path string, n *yaml.Node) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		l.bad(n.Line, "%s must be a mapping", orRoot(path))
		return
	}
	keys := map[string]int{} // normalised key of this mapping → its line
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if val.Kind == yaml.AliasNode {
			val = val.Alias
		}
		full := joinPath(path, k.Value)
		norm := normKey(full)
		// A key or section written twice in one mapping: YAML forbids it
		// and the last one would silently win (or two sections merge).
		if first, dup := keys[normKey(k.Value)]; dup {
			l.bad(k.Line, "%s is given twice (lines %d and %d): keep one", full, first, k.Line)
			continue
		}
		keys[normKey(k.Value)] = k.Line
		root, _, _ := strings.Cut(norm, ".")
		f, isField := l.fields[norm]
		switch {
		case springRoots[root]:
			l.ignore(full, val)
		case isField && val.Kind == yaml.MappingNode && !isStructured(f):
			l.bad(k.Line, "%s: expected a value, found a mapping", full)
		case isField:
			l.setField(f, full, k.Line, val)
		case l.sections[norm] && val.Kind == yaml.MappingNode:
			l.applyMapping(full, val)
		case l.sections[norm] && val.Tag == "!!null":
			// an empty section
		case l.sections[norm]:
			l.bad(k.Line, "%s is a section: it holds keys, not a value", full)
		default:
			l.bad(k.Line, "unknown key %s%s", full, l.didYouMean(path, k.Value))
		}
	}
}

// didYouMean is "; did you mean order.schema.items?" when key, under
// section path ("" at the top), is a near miss of a key that section
// holds, else "". Keys compare as the relaxed binding folds them, so
// scanindex is no miss of scanIndex (it is accepted as it is).
func (l *loader) didYouMean(path, key string) string {
	np := normKey(path)
	s, ok := l.sectionNames[np]
	if !ok {
		s = l.namesUnder(path)
		l.sectionNames[np] = s
	}
	if guess := suggest.Closest(normKey(key), s.names); guess != "" {
		return "; did you mean " + joinPath(path, s.byNorm[guess]) + "?"
	}
	return ""
}

// sectionNames are the names a section holds, for didYouMean: worked out
// once per section, since a file may hold thousands of unknown keys.
type sectionNames struct {
	byNorm map[string]string // normalised name → as documented
	names  []string          // the normalised names, sorted
}

// namesUnder lists the names of the keys and sections under path.
func (l *loader) namesUnder(path string) sectionNames {
	depth := 0
	if path != "" {
		depth = strings.Count(path, ".") + 1
	}
	byNorm := map[string]string{}
	for np, f := range l.fields {
		if np != normKey(f.path) {
			continue // an alias: suggest the documented name
		}
		parts := strings.Split(f.path, ".")
		if len(parts) > depth && normKey(strings.Join(parts[:depth], ".")) == normKey(path) {
			byNorm[normKey(parts[depth])] = parts[depth]
		}
	}
	return sectionNames{byNorm: byNorm, names: slices.Sorted(maps.Keys(byNorm))}
}

// ignore records the leaves of a Spring Boot section for the notice.
func (l *loader) ignore(path string, n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		l.c.ignored = append(l.c.ignored, path)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		l.ignore(joinPath(path, n.Content[i].Value), n.Content[i+1])
	}
}

// setField sets f from the value of key (as written) on line. An aliased
// key's settings are remembered, so that two keys of one setting with
// different values can be reported; an empty one counts as unset there.
func (l *loader) setField(f field, key string, line int, val *yaml.Node) {
	// The same key reached twice, nested and dotted (redis: {db: 1} and
	// redis.db: 2) or in two spellings: the last one would silently win.
	if first, dup := l.leaves[normKey(key)]; dup {
		l.bad(line, "%s (line %d) and %s (line %d) are the same key: keep one of them", first.key, first.line, key, line)
		return
	}
	l.leaves[normKey(key)] = setting{key: key, line: line}
	l.given[f.path] = true
	if len(f.aliases) > 0 {
		if val.Tag == "!!null" || (val.Kind == yaml.ScalarNode && strings.TrimSpace(val.Value) == "") {
			return
		}
		l.set[f.path] = append(l.set[f.path], setting{key: key, line: line, value: strings.TrimSpace(val.Value)})
	}
	if err := setNode(f.v, val); err != nil {
		for _, e := range flatten(err) {
			l.bad(val.Line, "%s: %v", key, e)
		}
	}
}

// fileConflicts reports aliased keys that the file set to different values.
func (l *loader) fileConflicts() {
	paths := make([]string, 0, len(l.set))
	for p := range l.set {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		ss := l.set[path]
		for _, s := range ss[1:] {
			if s.value != ss[0].value && normKey(s.key) != normKey(ss[0].key) {
				l.bad(ss[0].line, "%s (line %d) and %s (line %d) are one setting (%s) with different values: keep one of them",
					ss[0].key, ss[0].line, s.key, s.line, path)
				break
			}
		}
	}
}

// environment applies the environment over the file. Of a key's names
// (ours and Spring's), any that are set must agree.
func (l *loader) environment(lookupEnv func(string) (string, bool)) {
	walk(reflect.ValueOf(l.c).Elem(), "", func(f field) {
		if f.env == "" {
			return
		}
		var names []string
		var value string
		for _, name := range append([]string{f.env}, f.envAliases...) {
			v, ok := lookupEnv(name)
			if !ok {
				continue
			}
			if len(names) > 0 && strings.TrimSpace(v) != strings.TrimSpace(value) {
				l.problems = append(l.problems, fmt.Errorf("%s and %s are one setting (%s) with different values: unset one of them",
					names[0], name, f.path))
				return
			}
			if len(names) == 0 {
				value = v
			}
			names = append(names, name)
		}
		if len(names) == 0 {
			return
		}
		l.given[f.path] = true
		if err := setText(f.v, value); err != nil {
			for _, e := range flatten(err) {
				l.problems = append(l.problems, fmt.Errorf("%s (from %s): %w", f.path, names[0], e))
			}
		}
	})
}

// impliedDefaults drops a default that another given key replaces. A
// declared schema's order.schema.timeoutMinutes says every order has the
// same timeout, so the per-order column's default (the executor's own
// timeout_minutes, which the shop's table rarely has) gives way to it;
// order.schema.dueTime names each order's deadline, so the defaults of
// createTime and timeoutColumn give way to it too. Given both kinds,
// validate asks for one of them.
func (l *loader) impliedDefaults() {
	s := &l.c.Order.Schema
	if l.given["order.schema.timeoutMinutes"] && !l.given["order.schema.timeoutColumn"] {
		s.TimeoutColumn = ""
	}
	if l.given["order.schema.dueTime"] {
		if !l.given["order.schema.timeoutColumn"] {
			s.TimeoutColumn = ""
		}
		if !l.given["order.schema.createTime"] {
			s.CreateTime = ""
		}
	}
}

// oneLine is the problem with its control characters written as Go
// escapes (\n, \x1b): a key or value holding a newline or a terminal
// escape would otherwise break the message into lines that look like
// problems of their own, or rewrite the operator's terminal.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.ContainsFunc(msg, unicode.IsControl) {
		return err
	}
	var b strings.Builder
	for _, r := range msg {
		if !unicode.IsControl(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return errors.New(b.String())
}

func orRoot(p string) string {
	if p == "" {
		return "the document"
	}
	return p
}

// structuredValue is a key whose value is more than a scalar or a list of
// scalars (order.sources): it reads its own YAML node, and its environment
// variable as YAML text.
type structuredValue interface {
	setYAML(n *yaml.Node) error
	setText(s string) error
}

func isStructured(f field) bool {
	_, ok := f.v.Addr().Interface().(structuredValue)
	return ok
}

func setNode(v reflect.Value, n *yaml.Node) error {
	if sv, ok := v.Addr().Interface().(structuredValue); ok {
		return sv.setYAML(n)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		return setText(v, n.Value)
	case yaml.SequenceNode:
		if v.Kind() != reflect.Slice {
			return errors.New("a list is not allowed here")
		}
		items := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return errors.New("list items must be plain values")
			}
			items = append(items, strings.TrimSpace(c.Value))
		}
		v.Set(reflect.ValueOf(items))
		return nil
	default:
		return errors.New("expected a value, found a mapping")
	}
}

// setText parses s into v according to v's type.
func setText(v reflect.Value, s string) error {
	s = strings.TrimSpace(s)
	if sv, ok := v.Addr().Interface().(structuredValue); ok {
		return sv.setText(s)
	}
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		v.SetInt(int64(n))
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var items []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				items = append(items, p)
			}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// maxSeconds is the most whole seconds a time.Duration holds.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// parseDuration accepts Go durations ("30s", "2m") and bare seconds ("30").
// Bare seconds beyond a Duration are refused: multiplied, they would wrap
// round to another duration (18446744074 to 290ms) and pass as it.
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || n > maxSeconds || n < -maxSeconds {
			return 0, fmt.Errorf("%q seconds is out of range (at most %d)", s, maxSeconds)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 30s, 2m)", s)
	}
	return d, nil
}
