package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
)

// version and commit are set at build time:
//
//	go build -ldflags "-X main.version=1.4.0 -X main.commit=$(git rev-parse HEAD)"
//
// `make build` and the Dockerfile do it (VERSION and COMMIT). Without them
// the Go toolchain's build information fills in what it knows.
var version, commit string

func versionCommand() *command {
	return &command{name: "version", flags: versionFlags,
		summary: "print the version, commit and Go version this binary was built from"}
}

// build describes this binary.
type build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified"` // built from a tree with uncommitted changes
	GoVersion string `json:"goVersion"`
}

func readBuild() build {
	b := build{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = cmp.Or(b.Commit, s.Value)
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	b.Version = cmp.Or(b.Version, "dev")
	b.Commit = cmp.Or(b.Commit, "unknown")
	return b
}

// buildInfo is the build for the start-up log line.
func buildInfo() slog.Value {
	b := readBuild()
	return slog.GroupValue(slog.String("version", b.Version), slog.String("commit", b.Commit),
		slog.Bool("modified", b.Modified), slog.String("go", b.GoVersion))
}

func versionFlags(fs *flag.FlagSet, env *cliEnv) runFunc {
	jsonOut := new(bool)
	addJSON(fs, jsonOut)
	return func(context.Context, []string) error { return printVersion(env, *jsonOut) }
}

func printVersion(env *cliEnv, jsonOut bool) error {
	b := readBuild()
	if jsonOut {
		return printJSON(env.stdout, b)
	}
	modified := ""
	if b.Modified {
		modified = " (modified)"
	}
	fmt.Fprintf(env.stdout, "executor %s\ncommit %s%s\n%s %s/%s\n", b.Version, b.Commit, modified, b.GoVersion, runtime.GOOS, runtime.GOARCH)
	return nil
}
