package main

import (
	"context"

	"github.com/orderjob/executor/internal/app"
)

func init() {
	register(command{
		name:    "serve",
		summary: "register with the admin and serve the XXL-JOB protocol and the API port",
		run:     cmdServe,
	})
}

func cmdServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "serve")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	logger := app.NewLogger(cfg, env.stdout)
	logger.Info("starting executor", "config", cfg, "build", buildInfo())
	app.LogNotices(logger, cfg)
	b := readBuild()
	return app.Serve(ctx, cfg, logger, app.Build{Version: b.Version, Commit: b.Commit})
}
