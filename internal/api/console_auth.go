package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orderjob/executor/xxljob/authguard"
)

// Console sessions are signed cookies, so that any replica of the executor
// accepts a session another one issued: the key is derived from the
// configured operators and tokens (which every replica shares), and
// changes, ending every session, when any of them changes. The cookie
// holds the operator's name, the expiry and a random nonce, the session's
// id. Sign-out records that id in the database (console_session_revoked,
// store.go), which every replica reads on each request: the old cookie and
// its CSRF token stop working at once, everywhere.

const sessionCookie = "console_session"

// sessions issues and checks console sessions.
type sessions struct {
	key    []byte
	tokens map[[32]byte]string // sha256(token) → operator name
	names  map[string]bool
	ttl    time.Duration
	now    func() time.Time
}

// session is a signed-in operator.
type session struct {
	name    string
	cookie  string // the signed value, which the CSRF token is bound to
	id      string // the nonce: what sign-out revokes
	expires time.Time
}

// errSessionExpired and errNoSession say why a request goes to sign-in.
var (
	errNoSession      = errors.New("sign in to use the console")
	errSessionExpired = errors.New("your session expired: sign in again")
	errSessionBad     = errors.New("your session is not valid here (the console's tokens changed?): sign in again")
	errSessionRevoked = errors.New("this session was signed out: sign in again")
)

func newSessions(ops []Operator, ttl time.Duration, now func() time.Time) (*sessions, error) {
	s := &sessions{tokens: map[[32]byte]string{}, names: map[string]bool{}, ttl: ttl, now: now}
	entries := make([]string, 0, len(ops))
	for _, op := range ops {
		if op.Name == "" || len(op.Token) < 16 {
			return nil, fmt.Errorf("api: console operator %q needs a name and a token of at least 16 characters", op.Name)
		}
		h := sha256.Sum256([]byte(op.Token))
		if _, dup := s.tokens[h]; dup || s.names[op.Name] {
			return nil, fmt.Errorf("api: console operator %q: names and tokens must be unique", op.Name)
		}
		s.tokens[h] = op.Name
		s.names[op.Name] = true
		entries = append(entries, op.Name+"\x00"+op.Token)
	}
	slices.Sort(entries)
	mac := hmac.New(sha256.New, []byte("orderjob console session key v1"))
	for _, e := range entries {
		mac.Write([]byte(e))
		mac.Write([]byte{0xff})
	}
	s.key = mac.Sum(nil)
	return s, nil
}

// operator returns the name whose token is token, comparing in constant
// time in the token's content.
func (s *sessions) operator(token string) (string, bool) {
	h := sha256.Sum256([]byte(token))
	var found string
	for k, name := range s.tokens {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			found = name
		}
	}
	return found, found != ""
}

func (s *sessions) sign(msg string) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// issue returns the cookie of a new session for name.
func (s *sessions) issue(name string) *http.Cookie {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	exp := s.now().Add(s.ttl)
	payload := base64.RawURLEncoding.EncodeToString([]byte(name)) + "." + strconv.FormatInt(exp.Unix(), 10) + "." +
		base64.RawURLEncoding.EncodeToString(nonce[:])
	return &http.Cookie{Name: sessionCookie, Value: payload + "." + s.sign("session|"+payload), Path: consolePath,
		Expires: exp, MaxAge: int(s.ttl.Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: false} // the API port is plain HTTP on a private network; a TLS proxy in front may add Secure
}

// clear is the cookie that ends a session.
func clearSession() *http.Cookie {
	return &http.Cookie{Name: sessionCookie, Value: "", Path: consolePath, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode}
}

// read returns the request's session, or why it has none.
func (s *sessions) read(r *http.Request) (*session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, errNoSession
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 4 {
		return nil, errSessionBad
	}
	payload := strings.Join(parts[:3], ".")
	if !hmac.Equal([]byte(parts[3]), []byte(s.sign("session|"+payload))) {
		return nil, errSessionBad
	}
	nameB, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || !s.names[string(nameB)] {
		return nil, errSessionBad
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return nil, errSessionBad
	}
	if !s.now().Before(time.Unix(exp, 0)) {
		return nil, errSessionExpired
	}
	return &session{name: string(nameB), cookie: ck.Value, id: parts[2], expires: time.Unix(exp, 0)}, nil
}

// session reads the request's session and checks that it was not signed
// out. A revocation that cannot be read is an error of its own: the
// console then answers 503 rather than trust the cookie.
func (c *Console) session(r *http.Request) (*session, error) {
	op, err := c.sessions.read(r)
	if err != nil {
		return nil, err
	}
	revoked, err := store{}.sessionRevoked(r.Context(), c.cfg.DB, op.id)
	if err != nil {
		return nil, err
	}
	if revoked {
		return nil, errSessionRevoked
	}
	return op, nil
}

// signInError reports whether err sends the request to sign-in (as
// opposed to a failure to check the session).
func signInError(err error) bool {
	return errors.Is(err, errNoSession) || errors.Is(err, errSessionExpired) || errors.Is(err, errSessionBad) ||
		errors.Is(err, errSessionRevoked)
}

// csrf is the CSRF token of a session: forms carry it, and a POST without
// it (or with another session's) is refused.
func (s *sessions) csrf(op *session) string { return s.sign("csrf|" + op.cookie) }

func (s *sessions) validCSRF(op *session, token string) bool {
	return op != nil && token != "" && hmac.Equal([]byte(token), []byte(s.csrf(op)))
}

// toSignIn sends a request without a valid session to the sign-in page,
// saying why, and back to where it was going afterwards.
func (c *Console) toSignIn(w http.ResponseWriter, r *http.Request, why error) {
	if !errors.Is(why, errNoSession) {
		http.SetCookie(w, clearSession())
	}
	next := r.URL.RequestURI()
	if r.Method != http.MethodGet {
		// An action is not repeated after sign-in: back to the overview,
		// of the order database the action was on, so that what the
		// operator does next does not land in mysql.dsn's.
		next = consolePath
		if _, err := c.viewsOf(r); err == nil {
			next = withSource(r, consolePath)
		}
	}
	q := url.Values{"next": {next}}
	for code, reason := range signInReasons {
		if errors.Is(why, reason) {
			q.Set("why", code)
		}
	}
	http.Redirect(w, r, consolePath+"signin?"+q.Encode(), http.StatusSeeOther)
}

// safeNext keeps a sign-in's way back inside the console. A control
// character is refused as well: url.Parse fails on one, so http.Redirect
// would send the text unchanged and uncleaned in Location, and browsers
// drop tabs and newlines from a URL before they read it.
func safeNext(next string) string {
	if !strings.HasPrefix(next, consolePath) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\") ||
		strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return consolePath
	}
	return next
}

// signInReasons are the only messages the sign-in page shows, chosen by
// the code in its ?why=: a link cannot put words of its own on the page.
var signInReasons = map[string]error{
	"expired":    errSessionExpired,
	"invalid":    errSessionBad,
	"signed-out": errSessionRevoked,
}

// signInMessage is the message of a ?why= code; "" for none or an unknown one.
func signInMessage(code string) string {
	if reason, ok := signInReasons[code]; ok {
		return reason.Error()
	}
	return ""
}

type signInData struct {
	Next string
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		c.render(w, r, http.StatusOK, "signin", nil, pageData{Title: "Sign in", Message: signInMessage(q.Get("why")),
			Data: signInData{Next: safeNext(q.Get("next"))}})
	case http.MethodPost:
		next := safeNext(r.PostFormValue("next"))
		host := authguard.Host(r.RemoteAddr)
		if ok, wait := c.guard.Allow(host); !ok {
			tooManyFailures(w, wait)
			c.render(w, r, http.StatusTooManyRequests, "signin", nil, pageData{Title: "Sign in",
				Message: "too many wrong tokens from this address: wait a few seconds and try again", Data: signInData{Next: next}})
			return
		}
		name, ok := c.sessions.operator(r.PostFormValue("token"))
		if !ok {
			c.guard.Failed(r.Context(), host) // logged there, at most once a minute per address
			c.render(w, r, http.StatusUnauthorized, "signin", nil, pageData{Title: "Sign in",
				Message: "that token is not one of api.consoleTokens", Data: signInData{Next: next}})
			return
		}
		http.SetCookie(w, c.sessions.issue(name))
		c.log.InfoContext(r.Context(), "console sign-in", "operator", name, "remote", r.RemoteAddr)
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		c.fail(w, r, nil, http.StatusMethodNotAllowed, "sign in with the form")
	}
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	op, err := c.session(r)
	if err != nil && !signInError(err) {
		c.sessionUnchecked(w, r, err)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		c.fail(w, r, op, http.StatusMethodNotAllowed, "sign out with the button on a console page")
		return
	}
	if err != nil || !c.sessions.validCSRF(op, r.PostFormValue("csrf")) {
		c.fail(w, r, op, http.StatusForbidden, "sign out with the button on a console page")
		return
	}
	if err := (store{}).revokeSession(r.Context(), c.cfg.DB, op.id, op.expires); err != nil {
		c.log.ErrorContext(r.Context(), "console sign-out", "operator", op.name, "err", err)
		c.fail(w, r, op, http.StatusInternalServerError, "sign-out could not be recorded, so the session still works: try again")
		return
	}
	if err := (store{}).purgeRevoked(r.Context(), c.cfg.DB, c.cfg.Now()); err != nil {
		c.log.WarnContext(r.Context(), "console sign-out", "err", err) // the rows only wait for the next sign-out
	}
	http.SetCookie(w, clearSession())
	c.log.InfoContext(r.Context(), "console sign-out", "operator", op.name)
	http.Redirect(w, r, consolePath+"signin", http.StatusSeeOther)
}

// sessionUnchecked answers a request whose session could not be checked
// against the revocations (the database is unreachable).
func (c *Console) sessionUnchecked(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "console session check", "err", err)
	c.fail(w, r, nil, http.StatusServiceUnavailable, "the session cannot be checked now (the database does not answer): try again shortly")
}
