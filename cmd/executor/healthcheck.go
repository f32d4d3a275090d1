package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"
)

func healthcheckCommand() *command {
	return &command{name: "healthcheck", flags: healthcheckFlags,
		summary: "probe the API port's /healthz (for container healthchecks; the image has no curl)"}
}

func healthcheckFlags(fs *flag.FlagSet, env *cliEnv) runFunc {
	url := fs.String("url", "", "URL to probe (default: /healthz on api.addr, wildcard hosts probed on loopback)")
	return func(ctx context.Context, _ []string) error { return healthcheck(ctx, env, *url) }
}

func healthcheck(ctx context.Context, env *cliEnv, url string) error {
	if url == "" {
		cfg, err := loadConfig(env)
		if err != nil {
			return err
		}
		if cfg.API.Addr == "" {
			return usagef("api.addr is empty (API port disabled): give -url")
		}
		host, port, err := net.SplitHostPort(cfg.API.Addr)
		if err != nil {
			return fmt.Errorf("api.addr %q: %w", cfg.API.Addr, err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		url = "http://" + net.JoinHostPort(host, port) + "/healthz"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usagef("-url %q: %v", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: HTTP %d", url, resp.StatusCode)
	}
	fmt.Fprintln(env.stdout, "healthy")
	return nil
}
