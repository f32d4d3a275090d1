// Package doclinks checks the relative links of the repository's Markdown
// documentation: every link to a file must name one that exists, and every
// #anchor must name a heading (or an explicit id) of the file it points to,
// with GitHub's rules for turning a heading into an anchor. Links to other
// sites are not checked: CI has no internet.
package doclinks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Link is one link found in a Markdown file.
type Link struct {
	Line   int    // 1-based line of the link
	Target string // as written, e.g. "../config/jobs.yml" or "operations.md#shutdown"
}

// Problem is a link that does not resolve.
type Problem struct {
	File   string // path of the file holding the link, as given to Check
	Line   int
	Target string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Target, p.Reason)
}

var (
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// [text](target) or ![alt](target); the target ends at whitespace or ')'.
	// Nested brackets in the text are rare in our docs and not supported.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// [label]: target (reference definitions).
	refDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// Inline code spans, removed before links are looked for.
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	atxHeading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlID     = regexp.MustCompile(`<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"`)
	// Markup that GitHub drops from a heading's text before making its anchor.
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	scheme      = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// lines yields the lines of md outside fenced code blocks, with their numbers.
func lines(md string, f func(n int, line string)) {
	inFence := false
	for i, line := range strings.Split(md, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			f(i+1, line)
		}
	}
}

// Links returns the links of a Markdown document outside code blocks and
// code spans.
func Links(md string) []Link {
	var out []Link
	lines(md, func(n int, line string) {
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Line: n, Target: m[1]})
			return
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: n, Target: m[1]})
		}
	})
	return out
}

// Slug is the anchor GitHub gives a heading: the heading's text without
// markup, lower-cased, without punctuation other than '-' and '_', spaces
// turned into '-'. Duplicates are numbered by Anchors, not here.
func Slug(heading string) string {
	text := headingLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors returns the anchors a Markdown document defines: one per heading
// (a repeated heading gets -1, -2, ... as on GitHub) and one per HTML
// id or name attribute.
func Anchors(md string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	lines(md, func(_ int, line string) {
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := Slug(m[2])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	})
	return out
}

// Check reads each Markdown file (paths relative to root) and returns every
// relative link that does not resolve, sorted by file and line.
func Check(root string, files []string) ([]Problem, error) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := Anchors(string(b))
		anchorsOf[path] = a
		return a, nil
	}
	var problems []Problem
	for _, file := range files {
		path := filepath.Join(root, file)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
		}
		for _, l := range Links(string(b)) {
			if scheme.MatchString(l.Target) || strings.HasPrefix(l.Target, "//") {
				continue // another site (or mailto:): not checked offline
			}
			bad := func(reason string) {
				problems = append(problems, Problem{File: file, Line: l.Line, Target: l.Target, Reason: reason})
			}
			ref, frag, _ := strings.Cut(l.Target, "#")
			target := path
			if ref != "" {
				if strings.HasPrefix(ref, "/") {
					bad("absolute path: write it relative to the file")
					continue
				}
				target = filepath.Join(filepath.Dir(path), filepath.FromSlash(ref))
				rel, err := filepath.Rel(root, target)
				if err != nil || strings.HasPrefix(rel, "..") {
					bad("points outside the repository")
					continue
				}
				if _, err := os.Stat(target); err != nil {
					bad("no such file")
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(strings.ToLower(target), ".md") {
				continue // line anchors of source files (#L12) are GitHub's, not checkable here
			}
			a, err := anchors(target)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", target, err)
			}
			if !a[frag] {
				bad("no heading with anchor #" + frag)
			}
		}
	}
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	return problems, nil
}

// Files returns README.md and every .md file under docs/ of root, relative
// to root: the documentation Check is run on.
func Files(root string) ([]string, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}
