package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
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

// healthcheckTimeout bounds a probe: a container's healthcheck must answer
// before its own timeout.
const healthcheckTimeout = 3 * time.Second

func healthcheck(ctx context.Context, env *cliEnv, url string) error {
	if url == "" {
		cfg, err := loadConfig(ctx, env)
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
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		// Not url.Error's text: it quotes the URL, password and all.
		return usagef("-url is not a URL: %v", urlCause(err))
	}
	// Every line below names the URL with its password masked: a probe's
	// error ends in a container's health log.
	shown := req.URL.Redacted()
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return usagef("-url %s: want an http:// or https:// URL", shown)
	}
	resp, err := http.DefaultClient.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("probe %s: no answer within %s", shown, healthcheckTimeout)
	}
	if err != nil {
		return fmt.Errorf("probe %s: %w", shown, urlCause(err))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: HTTP %d", shown, resp.StatusCode)
	}
	fmt.Fprintln(env.stdout, "healthy")
	return nil
}

// urlCause is what a *url.Error wraps: its own text names the operation
// and the URL (the client's with the password masked, the parser's
// without), which the probe's line already says.
func urlCause(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
