// Package metricstest scrapes and reads a Prometheus text exposition in
// tests: series by name and labels, as PromQL would see them (a histogram is
// its _bucket, _sum and _count series). Imported only from _test.go files.
package metricstest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sample is one series' value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples is a parsed exposition.
type Samples []Sample

// Scrape GETs url (a /metrics endpoint) and parses the answer; any failure
// fails the test.
func Scrape(t testing.TB, url string) Samples {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("metricstest: scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("metricstest: scrape %s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("metricstest: scrape %s: Content-Type %q, want the text format", url, ct)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		t.Fatalf("metricstest: scrape %s: %v", url, err)
	}
	return s
}

// Parse reads the text format (comments skipped).
func Parse(r io.Reader) (Samples, error) {
	var out Samples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n, line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseLine(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no name")
	}
	s.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " ,")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			eq := strings.Index(line, `="`)
			if eq <= 0 {
				return s, fmt.Errorf("bad label")
			}
			key := line[:eq]
			line = line[eq+2:]
			var val strings.Builder
			for {
				if line == "" {
					return s, fmt.Errorf("unterminated label value")
				}
				c := line[0]
				line = line[1:]
				if c == '"' {
					break
				}
				if c == '\\' && line != "" {
					switch line[0] {
					case 'n':
						c = '\n'
					default:
						c = line[0]
					}
					line = line[1:]
				}
				val.WriteByte(c)
			}
			s.Labels[key] = val.String()
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// Find returns the series of name whose labels include the given pairs
// (key, value, key, value...).
func (ss Samples) Find(name string, labels ...string) Samples {
	var out Samples
next:
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.Labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// Value returns the value of the one series of name with those labels, and
// false if there is none; more than one panics (a test bug: give more labels).
func (ss Samples) Value(name string, labels ...string) (float64, bool) {
	f := ss.Find(name, labels...)
	switch len(f) {
	case 0:
		return 0, false
	case 1:
		return f[0].Value, true
	}
	panic(fmt.Sprintf("metricstest: %d series of %s match %v", len(f), name, labels))
}

// Sum adds up the series of name with those labels (0 if none).
func (ss Samples) Sum(name string, labels ...string) float64 {
	var t float64
	for _, s := range ss.Find(name, labels...) {
		t += s.Value
	}
	return t
}

// Names returns the distinct series names.
func (ss Samples) Names() map[string]bool {
	out := map[string]bool{}
	for _, s := range ss {
		out[s.Name] = true
	}
	return out
}
