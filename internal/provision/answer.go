package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// RefusedError is a well-formed answer with a failure code: the admin
// understood the call and said no. Msg is the admin's own text, shown as is
// (it is localised, so it is never matched).
type RefusedError struct {
	Call string // e.g. "POST /jobinfo/add"
	Msg  string
}

func (e *RefusedError) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = "(no message)"
	}
	return fmt.Sprintf("%s: the admin refused: %s", e.Call, msg)
}

// envelope calls path and returns the payload of a success envelope.
func (c *Client) envelope(ctx context.Context, path string, form url.Values) (json.RawMessage, error) {
	a, err := c.call(ctx, path, form)
	if err != nil {
		return nil, err
	}
	return c.decodeEnvelope("POST "+path, a)
}

func (c *Client) decodeEnvelope(call string, a *answer) (json.RawMessage, error) {
	obj, ok := jsonObject(a.body)
	if a.status != http.StatusOK || !ok {
		return nil, c.notUnderstood(call, a)
	}
	code, msg, ok := envelopeCode(obj)
	if !ok {
		return nil, c.notUnderstood(call, a)
	}
	if code != 200 {
		return nil, &RefusedError{Call: call, Msg: c.scrub(msg)}
	}
	return obj[c.api.payloadKey], nil
}

// list calls a list endpoint and returns one page of rows and the total.
func (c *Client) list(ctx context.Context, path string, form url.Values) (json.RawMessage, int, error) {
	call := "POST " + path
	a, err := c.call(ctx, path, form)
	if err != nil {
		return nil, 0, err
	}
	var table struct {
		Data  json.RawMessage `json:"data"`
		Total *int            `json:"total"`
	}
	if c.api.wrappedLists {
		payload, err := c.decodeEnvelope(call, a)
		if err != nil {
			return nil, 0, err
		}
		if json.Unmarshal(payload, &table) != nil || table.Total == nil || !isArray(table.Data) {
			return nil, 0, c.notUnderstood(call, a)
		}
		return table.Data, *table.Total, nil
	}
	obj, ok := jsonObject(a.body)
	if a.status != http.StatusOK || !ok {
		return nil, 0, c.notUnderstood(call, a)
	}
	if _, bare := obj["recordsTotal"]; !bare {
		// A failure (missing parameter, permission) comes as an envelope.
		if code, msg, ok := envelopeCode(obj); ok && code != 200 {
			return nil, 0, &RefusedError{Call: call, Msg: c.scrub(msg)}
		}
		return nil, 0, c.notUnderstood(call, a)
	}
	var total int
	if json.Unmarshal(obj["recordsTotal"], &total) != nil || !isArray(obj["data"]) {
		return nil, 0, c.notUnderstood(call, a)
	}
	return obj["data"], total, nil
}

// listAll pages through a list endpoint and decodes every row.
func listAll[T any](ctx context.Context, c *Client, path string, filters url.Values) ([]T, error) {
	const pageSize, maxPages = 200, 500
	var all []T
	for page := 0; page < maxPages; page++ {
		form := url.Values{}
		for k, v := range filters {
			form[k] = v
		}
		rows, total, err := c.list(ctx, path, c.api.page(form, len(all), pageSize))
		if err != nil {
			return nil, err
		}
		var batch []T
		if err := json.Unmarshal(rows, &batch); err != nil {
			return nil, fmt.Errorf("provision: POST %s: rows not understood: %w", path, err)
		}
		all = append(all, batch...)
		if len(batch) == 0 || len(all) >= total {
			return all, nil
		}
	}
	return nil, fmt.Errorf("provision: POST %s: more than %d pages", path, maxPages)
}

// notUnderstood describes an answer we cannot use: what was asked and what
// came back (status, type and the start of the body, secrets scrubbed).
func (c *Client) notUnderstood(call string, a *answer) error {
	body := string(a.body)
	if len(body) > 300 {
		body = body[:300] + "..."
	}
	where := ""
	if a.location != "" {
		where = " to " + a.location
	}
	return fmt.Errorf("provision: %s: the admin's answer was not understood: HTTP %d%s, %q: %q",
		call, a.status, where, a.contentType, c.scrub(body))
}

// scrub removes the password and session cookie values from s.
func (c *Client) scrub(s string) string {
	for _, v := range c.secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

func jsonObject(b []byte) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

func envelopeCode(obj map[string]json.RawMessage) (code int, msg string, ok bool) {
	if json.Unmarshal(obj["code"], &code) != nil {
		return 0, "", false
	}
	_ = json.Unmarshal(obj["msg"], &msg) // null or absent: empty
	return code, msg, true
}

func isArray(b json.RawMessage) bool {
	for _, ch := range b {
		switch ch {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			return true
		}
		return false
	}
	return false
}
