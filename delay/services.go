package delay

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/orderjob/executor/internal/redact"
)

// ParseServices reads HTTP task targets written "name=baseURL" (the
// delay.services config key) into the map Config.Services takes. Names are a
// letter then letters, digits, '.', '_', '-'; base URLs are http or https,
// without query or fragment; a trailing slash is dropped.
func ParseServices(specs []string) (map[string]string, error) {
	out := make(map[string]string, len(specs))
	for _, spec := range specs {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		name, base, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, fmt.Errorf("delay: service %q is not name=baseURL", redact.URL(spec))
		}
		name = strings.TrimSpace(name)
		u, err := parseService(name, strings.TrimSpace(base))
		if err != nil {
			return nil, fmt.Errorf("delay: service %q: %w", redact.Named([]string{spec})[0], err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("delay: service %q is configured twice", name)
		}
		out[name] = u
	}
	return out, nil
}

func parseService(name, base string) (string, error) {
	if !handlerNameRe.MatchString(name) {
		return "", fmt.Errorf("name %q is not a letter then letters, digits, . _ -", name)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("base URL: %w", redact.Err(err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("base URL %q is not http(s)://host[:port][/path]", redact.URL(base))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("base URL %q has a query or fragment", redact.URL(base))
	}
	return strings.TrimRight(base, "/"), nil
}
