package doclinks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepositoryLinks is the CI check: every relative link of README.md and
// docs/ resolves, anchors included.
func TestRepositoryLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found only %v: docs/ is missing", files)
	}
	problems, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestEveryDocHasContents: each topic file under docs/ (not the index)
// opens with a table of contents linking to its own headings.
func TestEveryDocHasContents(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasPrefix(f, "docs/") || f == "docs/README.md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		own := 0
		for _, l := range Links(string(b)) {
			if strings.HasPrefix(l.Target, "#") {
				own++
			}
		}
		if !strings.Contains(string(b), "\n## Contents\n") || own < 2 {
			t.Errorf("%s: no table of contents (a \"## Contents\" list of links to its own headings)", f)
		}
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quick start: two commands", "quick-start-two-commands"},
		{"Dead letters: `deadLetterRetryJob` and `executor deadletter`", "dead-letters-deadletterretryjob-and-executor-deadletter"},
		{"Measured (2-core machine shared with other test runs; MariaDB 10.11, Redis 7)", "measured-2-core-machine-shared-with-other-test-runs-mariadb-1011-redis-7"},
		{"The payment side, late payments and remote stock", "the-payment-side-late-payments-and-remote-stock"},
		{"**Bold** and [a link](x.md) and snake_case", "bold-and-a-link-and-snake_case"},
		{"执行器管理 → 新增", "执行器管理--新增"},
	} {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestAnchorsNumberRepeats(t *testing.T) {
	a := Anchors("# Top\n## Setup\ntext\n## Setup\n```\n## not a heading\n```\n<a id=\"custom\"></a>\n")
	for _, want := range []string{"top", "setup", "setup-1", "custom"} {
		if !a[want] {
			t.Errorf("anchor %q missing from %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a heading inside a code block made an anchor")
	}
}

func TestLinksSkipsCode(t *testing.T) {
	md := "see [a](a.md) and `[b](b.md)`\n```\n[c](c.md)\n```\n![img](pic.png \"title\")\n[ref]: ref.md\n[`code`](code.go#L3)\n"
	var got []string
	for _, l := range Links(md) {
		got = append(got, l.Target)
	}
	want := "a.md pic.png ref.md code.go#L3"
	if strings.Join(got, " ") != want {
		t.Fatalf("Links = %v, want %s", got, want)
	}
}

func TestCheckFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n[ok](docs/ops.md#shut-down) [dir](docs/) [self](#top) [web](https://example.org/x)\n"+
		"[gone](docs/missing.md)\n[bad anchor](docs/ops.md#nope)\n[own](#missing)\n[abs](/etc/passwd)\n[out](../x.md)\n")
	write("docs/ops.md", "# Ops\n## Shut down\n[back](../README.md#top) [src](../main.go#L1)\n")
	write("main.go", "package main\n")
	problems, err := Check(root, []string{"README.md", "docs/ops.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"README.md:3: docs/missing.md: no such file",
		"README.md:4: docs/ops.md#nope: no heading with anchor #nope",
		"README.md:5: #missing: no heading with anchor #missing",
		"README.md:6: /etc/passwd: absolute path: write it relative to the file",
		"README.md:7: ../x.md: points outside the repository",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
