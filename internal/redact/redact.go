// Package redact takes secrets out of what the executor logs: the password
// of a URL's user info and the values of query parameters that look like
// credentials (token, key, secret, signature, ...), so an endpoint such as
// http://svc:p4ss@host/close?token=... can be logged and put into errors.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Mask replaces each secret.
const Mask = "xxxxx"

// secretWords mark a query parameter as a credential when its name, lower
// cased, contains one of them.
var secretWords = []string{"token", "key", "secret", "sign", "password", "passwd", "pwd", "auth", "credential", "session", "ticket"}

// URL returns s with the password of its user info and the values of
// credential-like query parameters masked. What does not parse as a URL,
// or parses without a host although it holds an '@' (it may be one with a
// password), is masked whole when it holds an '@' or a '?'.
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Host == "" && strings.Contains(s, "@")) {
		if strings.ContainsAny(s, "@?") {
			return Mask
		}
		return s
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for name, values := range q {
			if secretName(name) {
				for i := range values {
					values[i] = Mask
				}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// URLs applies URL to each element.
func URLs(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = URL(s)
	}
	return out
}

// Named applies URL to the value of each name=URL pair (delay.services).
func Named(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		name, u, ok := strings.Cut(s, "=")
		if ok {
			out[i] = name + "=" + URL(u)
		} else {
			out[i] = URL(s)
		}
	}
	return out
}

// Err masks the URL of the *url.Error in err's chain (what net/http returns
// from a failed request: its text repeats the URL, query included), in
// place, and returns err.
func Err(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = URL(ue.URL)
	}
	return err
}
