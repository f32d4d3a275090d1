// Package api is the executor's own HTTP port, separate from the XXL-JOB
// protocol port: health and readiness probes, metrics, and the operator and
// service endpoints that later parts mount (delayed tasks, dead letters).
//
// Everything is behind a token header except /healthz, /readyz and /metrics,
// which probes and scrapers reach without one. /readyz checks what the API
// port itself needs; checks of other parts are added as optional ones and
// run only when the probe names them (/readyz?registry=1), so an outage of
// something the API does not need never takes it out of a load balancer. Bind it to loopback or a
// private network: it is an operator's interface, not a public one.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orderjob/executor/xxljob/authguard"
)

// MaxBodyBytes bounds request bodies on protected routes.
const MaxBodyBytes = 1 << 20

// Config configures the server.
type Config struct {
	Addr        string       // listen address, e.g. 127.0.0.1:9998
	Token       string       // "" disables the check (New's caller warns)
	TokenHeader string       // default X-Executor-Token
	Pprof       bool         // serve /debug/pprof/ (protected)
	Logger      *slog.Logger // nil discards; the server tags its lines component=api
	// AuthFailedFunc hears every refused token ("api") and console sign-in
	// ("console"): the metric. Nil: none.
	AuthFailedFunc func(surface string)
}

// ReadyCheck reports whether one dependency is usable.
type ReadyCheck func(ctx context.Context) error

// Server is the API port.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	root     http.Handler // mux behind the cross-origin check
	guard    *authguard.Guard
	log      *slog.Logger // component=api
	base     *slog.Logger // untagged: the mounted parts tag their own lines
	mu       sync.Mutex
	checks   map[string]ReadyCheck
	optional map[string]ReadyCheck // run only when /readyz names them
	runMu    sync.Mutex            // Start and Stop
	srv      *http.Server
	ln       net.Listener
	done     chan struct{} // closed when the serving goroutine has returned
	stopped  bool
}

// New builds the server with /healthz and /readyz mounted.
func New(cfg Config) *Server {
	if cfg.TokenHeader == "" {
		cfg.TokenHeader = "X-Executor-Token"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger.With("component", "api"), base: cfg.Logger, checks: map[string]ReadyCheck{},
		optional: map[string]ReadyCheck{}}
	// Cross-origin state changes are refused on every route, whatever the
	// token: a page an operator visits must not be able to POST here (a
	// text/plain POST needs no preflight). Browsers say where a request
	// comes from (Sec-Fetch-Site, Origin); clients that send neither, such
	// as curl and services, pass.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusForbidden, "cross-origin request refused: state changes are accepted only from this port's own pages or from clients that are not browsers")
	}))
	s.root = cop.Handler(s.mux)
	s.guard = newGuard(cfg, "api", s.log)
	s.HandlePublic("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	s.HandlePublic("GET /readyz", http.HandlerFunc(s.readyz))
	if cfg.Pprof {
		s.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
		s.Handle("GET /debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
		s.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
		s.Handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
		s.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		if allow := allowedMethods(s.mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			WriteError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s: use %s", r.Method, r.URL.Path, allow))
			return
		}
		WriteError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

// allowedMethods is the Allow header of a request that reached mux's
// catch-all: the methods of the patterns that match its path ("GET, HEAD,
// POST"), "" when none does (a 404). A catch-all answers every method, so
// ServeMux's own 405 never comes.
func allowedMethods(mux *http.ServeMux, r *http.Request) string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		// A method's own pattern, not the catch-all or a redirect to
		// the path with a slash ("GET /x" also serves HEAD).
		if _, pattern := mux.Handler(probe); strings.HasPrefix(pattern, m+" ") ||
			(m == http.MethodHead && strings.HasPrefix(pattern, http.MethodGet+" ")) {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

// Handle mounts h behind the token check and the body limit. Patterns are
// http.ServeMux patterns ("POST /api/delay-tasks").
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		if err := validQuery(r); err != nil {
			WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		if !jsonBody(r) {
			WriteError(w, http.StatusUnsupportedMediaType, "the request body must be JSON: send Content-Type: application/json")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, apiCaller)))
	}))
}

// validQuery refuses a query string that does not parse whole. URL.Query
// drops what it cannot read and says nothing: a pair with a bad escape
// (orderNo=%zz) or a semicolon (source=db1;x=1), or every pair past the
// 10,000th, so the route would run without the filter or the ?source= it
// was given, on the wrong rows or mysql.dsn's database.
func validQuery(r *http.Request) error {
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		return fmt.Errorf("the query string is not valid: %w", err)
	}
	return nil
}

// jsonBody reports whether a request's body, if it has one, is declared
// JSON. Requests without a body (a requeue, a GET) need no Content-Type.
func jsonBody(r *http.Request) bool {
	if r.ContentLength == 0 {
		return true
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// apiCaller is the name recorded for actions taken through the API port's
// token: one token shared by its callers names no one in particular.
const apiCaller = "api"

type callerKey struct{}

// Caller is the authenticated identity of a request served by Handle: who
// an action is recorded as. It never comes from the request body.
func Caller(ctx context.Context) string {
	if c, ok := ctx.Value(callerKey{}).(string); ok {
		return c
	}
	return ""
}

// HandlePublic mounts h without the token check (probes, metrics).
func (s *Server) HandlePublic(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// AddReadyCheck adds a dependency that /readyz checks.
func (s *Server) AddReadyCheck(name string, c ReadyCheck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

// AddOptionalReadyCheck adds a check that /readyz runs, beside the others,
// only when asked for by name: /readyz?NAME=1.
func (s *Server) AddOptionalReadyCheck(name string, c ReadyCheck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.optional[name] = c
}

// ServeHTTP serves the API (for tests and embedding).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.root.ServeHTTP(w, r) }

// authorized checks the token header, or answers the refusal: 401, or 429
// (before the token is compared) for an address with too many failures.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	host := authguard.Host(r.RemoteAddr)
	if ok, wait := s.guard.Allow(host); !ok {
		tooManyFailures(w, wait)
		WriteError(w, http.StatusTooManyRequests, "too many wrong tokens from this address: slow down")
		return false
	}
	if s.sentToken(r) {
		return true
	}
	s.guard.Failed(r.Context(), host)
	WriteError(w, http.StatusUnauthorized, "missing or wrong token in header "+s.cfg.TokenHeader)
	return false
}

// newGuard is the failed-authentication guard of one surface: ten failures
// at once per address, then one a second; one log line per address and
// minute; every failure reported to cfg.AuthFailedFunc.
func newGuard(cfg Config, surface string, log *slog.Logger) *authguard.Guard {
	var hook func(string)
	if f := cfg.AuthFailedFunc; f != nil {
		hook = func(string) { f(surface) }
	}
	return authguard.New(authguard.Config{Surface: surface, Logger: log, OnFailure: hook})
}

// tooManyFailures sets Retry-After for a refused address.
func tooManyFailures(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
}

// showsDetail reports whether /readyz may say why a check failed: the
// errors name internal addresses and the database user, and the route
// needs no token, so they go only to a caller sending the API token (or
// to anyone when no token is configured). A wrong token is not counted
// against the address: probes send none, and the answer is the same.
func (s *Server) showsDetail(r *http.Request) bool {
	return s.cfg.Token == "" || s.sentToken(r)
}

// sentToken reports whether r carries the API token in its header, in
// constant time in the token's content (its length is not secret).
func (s *Server) sentToken(r *http.Request) bool {
	return subtle.ConstantTimeCompare([]byte(r.Header.Get(s.cfg.TokenHeader)), []byte(s.cfg.Token)) == 1
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	checks := make(map[string]ReadyCheck, len(s.checks)+len(s.optional))
	for n, c := range s.checks {
		checks[n] = c
	}
	var unknown []string
	for n, v := range r.URL.Query() {
		c, ok := s.optional[n]
		switch {
		case !ok:
			unknown = append(unknown, n)
		case len(v) == 0 || v[0] == "" || v[0] == "1" || v[0] == "true":
			checks[n] = c
		}
	}
	optional := make([]string, 0, len(s.optional))
	for n := range s.optional {
		optional = append(optional, n)
	}
	s.mu.Unlock()
	if len(unknown) > 0 {
		sort.Strings(unknown)
		sort.Strings(optional)
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("unknown check %q; optional checks: %v", unknown[0], optional))
		return
	}
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)

	detail := s.showsDetail(r)
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	results := make(map[string]string, len(names))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, n := range names {
		wg.Go(func() {
			msg := "ok"
			if err := checks[n](ctx); err != nil {
				msg = "failed"
				if detail {
					msg = err.Error()
				}
			}
			mu.Lock()
			results[n] = msg
			mu.Unlock()
		})
	}
	wg.Wait()
	status := http.StatusOK
	for _, m := range results {
		if m != "ok" {
			status = http.StatusServiceUnavailable
		}
	}
	WriteJSON(w, status, map[string]any{"ready": status == http.StatusOK, "checks": results})
}

// Start listens and serves in the background until Stop. ctx bounds the
// listen only; requests are served until Stop, under its values.
func (s *Server) Start(ctx context.Context) error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.srv != nil || s.stopped {
		return errors.New("api: start: already started or stopped")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", s.cfg.Addr, err)
	}
	base := context.WithoutCancel(ctx)
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.root,
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second, // pprof profiles run 30 s by default
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.done = make(chan struct{})
	srv, done := s.srv, s.done
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("api server stopped", "err", err)
		}
	}()
	s.log.Info("api port listening", "addr", ln.Addr().String())
	return nil
}

// Addr is the bound address (after Start).
func (s *Server) Addr() net.Addr {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	return s.ln.Addr()
}

// Stop stops accepting and waits for requests in flight, up to ctx. Safe
// before Start and twice; a Start after it fails.
func (s *Server) Stop(ctx context.Context) error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.srv == nil || s.stopped {
		s.stopped = true
		return nil
	}
	s.stopped = true
	err := s.srv.Shutdown(ctx)
	<-s.done // Serve returns as soon as the listener is closed
	return err
}

// WriteJSON writes v with the status code.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes {"error": msg} with the status code.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, map[string]string{"error": msg})
}
