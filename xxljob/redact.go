package xxljob

import (
	"errors"
	"net/url"
	"strings"
)

// redactURL is an admin address fit for a log line or an error: the
// password of its user info and the values of credential-like query
// parameters masked. Addresses are checked by New, so what does not parse
// is masked whole when it could hold a secret.
func redactURL(s string) string {
	const mask = "xxxxx"
	u, err := url.Parse(s)
	if err != nil || (u.Host == "" && strings.Contains(s, "@")) {
		if strings.ContainsAny(s, "@?") {
			return mask
		}
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), mask)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for name, values := range q {
			n := strings.ToLower(name)
			if strings.Contains(n, "token") || strings.Contains(n, "key") || strings.Contains(n, "secret") ||
				strings.Contains(n, "sign") || strings.Contains(n, "pass") || strings.Contains(n, "auth") {
				for i := range values {
					values[i] = mask
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// redactURLs applies redactURL to each address.
func redactURLs(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = redactURL(s)
	}
	return out
}

// redactErr masks the URL net/http repeats in a failed request's error.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactURL(ue.URL)
	}
	return err
}
