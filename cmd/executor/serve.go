package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/orderjob/executor/internal/app"
)

func serveCommand() *command {
	return &command{name: "serve", flags: serveFlags,
		summary: "register with the admin and serve the XXL-JOB protocol and the API port",
		note: "serve takes its settings from the config file and the environment, not from flags (docs/configuration.md\n" +
			"lists every key and its variable). The ones to set against your own admin:\n" +
			"  XXL_JOB_ADMIN_ADDRESSES      xxl.job.admin.addresses      the admin's base URL\n" +
			"  XXL_JOB_ACCESS_TOKEN         xxl.job.accessToken          the admin's access token\n" +
			"  XXL_JOB_EXECUTOR_APPNAME     xxl.job.executor.appname     the executor group's AppName\n" +
			"  MYSQL_DSN                    mysql.dsn                    the shop database\n" +
			"  REDIS_ADDR                   redis.addr                   Redis\n" +
			"  EXECUTOR_API_TOKEN           api.token                    the API port's token\n" +
			"  EXECUTOR_API_CONSOLE_TOKENS  api.consoleTokens            console sign-in tokens, name:token\n" +
			"  LOG_FORMAT, LOG_LEVEL        log.format, log.level        auto|json|text, debug|info|warn|error"}
}

func serveFlags(_ *flag.FlagSet, env *cliEnv) runFunc {
	return func(ctx context.Context, _ []string) error {
		cfg, err := loadConfig(ctx, env)
		if err != nil {
			return err
		}
		logger := app.NewLogger(cfg, env.stdout)
		useLibLogger(logger)
		logger.Info("starting executor", "build", buildInfo())
		// The whole configuration is a line of its own, in text at debug
		// only: on a terminal the first line stays short.
		level := slog.LevelInfo
		if app.LogFormat(cfg, env.stdout) == "text" {
			level = slog.LevelDebug
		}
		logger.Log(ctx, level, "configuration", "config", cfg)
		app.LogNotices(logger, cfg)
		b := readBuild()
		return app.Serve(ctx, cfg, logger, app.Build{Version: b.Version, Commit: b.Commit})
	}
}
