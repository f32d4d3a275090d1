package handlers

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// MaxParamBytes bounds a job param; the console field is a short text.
const MaxParamBytes = 4096

// params is a job param parsed into key/value pairs. The console's param
// field ("任务参数") takes `key=value` pairs separated by commas, or a JSON
// object; empty means every default.
type params map[string]string

// parseParams parses s and rejects keys not in allowed, naming the allowed
// ones, so a typo in the console fails the run instead of being ignored.
func parseParams(s string, allowed ...string) (params, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxParamBytes {
		return nil, fmt.Errorf("job param is %d bytes, the limit is %d", len(s), MaxParamBytes)
	}
	p := params{}
	if s == "" {
		return p, nil
	}
	if strings.HasPrefix(s, "{") {
		var err error
		if p, err = parseJSONParams(s); err != nil {
			return nil, err
		}
	} else {
		for _, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			k, v, ok := strings.Cut(part, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return nil, fmt.Errorf("job param %q: expected key=value pairs separated by commas (or a JSON object)", part)
			}
			if _, dup := p[k]; dup {
				return nil, fmt.Errorf("job param key %q given twice", k)
			}
			p[k] = v
		}
	}
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	var unknown []string
	for k := range p {
		if !ok[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown job param key(s) %s; allowed: %s", strings.Join(unknown, ", "), strings.Join(allowed, ", "))
	}
	return p, nil
}

// parseJSONParams reads a JSON object of scalar values token by token, so a
// key given twice is refused like in the key=value form: encoding/json would
// keep the last value, and {"dryRun":true,"dryRun":false} would run for real.
func parseJSONParams(s string) (params, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	bad := func(err error) error { return fmt.Errorf("job param looks like JSON but does not parse: %w", err) }
	if _, err := dec.Token(); err != nil { // the '{' the caller saw
		return nil, bad(err)
	}
	p := params{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		k, _ := t.(string) // inside an object the decoder yields only string keys
		if t, err = dec.Token(); err != nil {
			return nil, bad(err)
		}
		if _, dup := p[k]; dup {
			return nil, fmt.Errorf("job param key %q given twice", k)
		}
		switch v := t.(type) {
		case string:
			p[k] = v
		case json.Number:
			p[k] = v.String()
		case bool:
			p[k] = strconv.FormatBool(v)
		default:
			return nil, fmt.Errorf("job param key %q: value must be a string, number or boolean", k)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("job param has text after the JSON object")
	}
	return p, nil
}

// intKey reads a whole number in [min, max]; def when absent.
func (p params) intKey(key string, def, min, max int) (int, error) {
	v, ok := p[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("job param %s=%q: want a whole number from %d to %d", key, v, min, max)
	}
	return n, nil
}

// floatKey reads a number in [min, max]; def when absent.
func (p params) floatKey(key string, def, min, max float64) (float64, error) {
	v, ok := p[key]
	if !ok {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < min || f > max {
		return 0, fmt.Errorf("job param %s=%q: want a number from %g to %g", key, v, min, max)
	}
	return f, nil
}

// boolKey reads true/false (also 1/0); def when absent.
func (p params) boolKey(key string, def bool) (bool, error) {
	v, ok := p[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("job param %s=%q: want true or false", key, v)
	}
	return b, nil
}

// pageKeys reads the keys every batch job takes, with the same bounds in
// each: pageSize (1 to 5000, 0 for the job's default) and its cap on the
// rows one run handles, limitKey (0, the default, for none).
func (p params) pageKeys(limitKey string) (pageSize, limit int, err error) {
	if pageSize, err = p.intKey(paramPageSize, 0, 1, 5000); err != nil {
		return 0, 0, err
	}
	if limit, err = p.intKey(limitKey, 0, 0, 1<<30); err != nil {
		return 0, 0, err
	}
	return pageSize, limit, nil
}

// dryRunNote is what a run's first line adds when it changes nothing.
func dryRunNote(dryRun bool) string {
	if dryRun {
		return " (dry run: nothing is changed)"
	}
	return ""
}
