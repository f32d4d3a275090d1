package xxljob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderjob/executor/xxljob/authguard"
)

// Config configures an Executor. Zero values mean "use the default".
type Config struct {
	// AdminAddresses are the admin base URLs including the context path:
	// "http://admin:8080" for 3.4.1 and later (served at /),
	// "http://admin:8080/xxl-job-admin" for older admins. They are tried in
	// order; the first that accepts a call wins. Required.
	AdminAddresses []string
	// AccessToken is the shared secret of the admin and its executors (on
	// the branch after 3.4: the executor group's token). Required unless
	// OpenWithoutToken is set, as the Java executor after 3.4 requires it
	// ("xxl-job executor accessToken empty."); the main dialect always
	// requires one.
	AccessToken string
	// OpenWithoutToken allows an empty AccessToken: anyone who reaches the
	// port can then run and kill jobs and read run logs (Start warns).
	// ListenAddr then defaults to loopback, 127.0.0.1:{Port}, and the
	// default Address to http://127.0.0.1:{Port}/, so only this host can
	// call; set ListenAddr (and Address) to open it wider on purpose.
	OpenWithoutToken bool
	// AdminVersion is the admin generation: AdminAuto (default), Admin2x,
	// Admin33, Admin34 or AdminMain. Auto learns it from the admin.
	AdminVersion AdminVersion
	// AppName is the executor group's AppName in the admin (registryKey).
	// Required, at most 64 characters.
	AppName string
	// Address is the URL the admin uses to reach this executor
	// (registryValue). Default "http://{IP}:{Port}/". It must stay stable
	// across restarts: the admin matches it as a plain string.
	Address string
	// IP is used for the default Address. Default: the first IPv4 address
	// of an interface that is up, not loopback and not in IPExclude; else
	// the host name's address; else 127.0.0.1 (Start then warns).
	IP string
	// IPExclude lists interface names (path.Match patterns) never used for
	// the default IP. Default DefaultIPExclude; []string{"-"} excludes none.
	IPExclude []string
	// Port is used for the default Address and ListenAddr. Default 9999.
	Port int
	// ListenAddr is where the executor's HTTP server binds. Default
	// ":{Port}" (all interfaces, as the Java executor), or
	// "127.0.0.1:{Port}" with OpenWithoutToken. It may differ from Address
	// (containers, port 0 in tests); New refuses one that is not host:port
	// (CheckListenAddr), and Start warns once when Address is not one it
	// listens on.
	ListenAddr string
	// LogPath is the root of the run logs and the callback spool.
	// Default "./logs/xxl-job".
	LogPath string
	// LogRetentionDays is how many days of run logs to keep. Default 30;
	// values from 1 to 2 (or negative) disable the cleanup, as in Java.
	LogRetentionDays int
	// ShutdownTimeout is how long Shutdown waits for running and queued runs
	// before cancelling them. Default 30s.
	ShutdownTimeout time.Duration
	// RegistryInterval is the heartbeat period. Default 30s; keep it well
	// below the admin's 90s dead timeout.
	RegistryInterval time.Duration
	// CallbackRetryInterval is the retry period of spooled callbacks.
	// Default 30s.
	CallbackRetryInterval time.Duration
	// HTTPClientTimeout bounds each executor → admin request. Default 3s.
	HTTPClientTimeout time.Duration
	// AdminCAFile is a PEM file of CA certificates trusted, besides the
	// system's, for https admin addresses (a private CA).
	AdminCAFile string
	// AdminInsecureSkipVerify accepts any certificate from an https admin,
	// as the Java executor does. Start warns loudly every time.
	AdminInsecureSkipVerify bool
	// LogReadLimit bounds how much of a run log file one /log answer
	// carries, in bytes. Default 64 MiB: far above a run's log, and the
	// admin holds each answer in memory. An answer cut at the limit ends
	// with a line naming the file.
	LogReadLimit int64
	// CallbackQueueSize bounds the results held in memory for delivery.
	// Every result is on disk before it is queued; one that finds the queue
	// full is delivered from disk instead. Default 1000.
	CallbackQueueSize int
	// InterruptedFunc, if set, is called by Start (from a goroutine of its
	// own, with a context that ends at Shutdown) once for each run that an
	// earlier process on this LogPath started and never finished (it was
	// killed or crashed part-way). The admin is sent the run's failure
	// whatever InterruptedFunc does; it is for the application's own records.
	// A run it returns an error for is handed over again at the next start,
	// so it must accept a run it has seen (match on LogID).
	InterruptedFunc func(ctx context.Context, run InterruptedRun) error
	// Disabled turns the executor off, as the Java executor's
	// xxl.job.executor.enabled=false (3.3.1 and later): Start logs one line
	// and returns without listening, registering or delivering anything,
	// and Shutdown has nothing to stop. New still checks the rest of Config.
	Disabled bool
	// GlueEnabled is the Java executor's xxl.job.executor.glueenabled (the
	// branch after 3.4). GLUE (script) triggers are always refused here, as
	// Java refuses them with it false; true only makes Start warn.
	GlueEnabled bool
	// Logger receives the process log. Default: discard.
	Logger *slog.Logger
	// Observer receives events for metrics. Default: none.
	Observer Observer
}

// LogValue implements slog.LogValuer; it redacts the access token and the
// passwords and tokens inside the admin addresses.
func (c Config) LogValue() slog.Value {
	token := ""
	if c.AccessToken != "" {
		token = "REDACTED"
	}
	return slog.GroupValue(
		slog.Any("admin_addresses", redactURLs(c.AdminAddresses)), slog.String("access_token", token),
		slog.String("app_name", c.AppName), slog.String("address", c.Address),
		slog.String("listen_addr", c.ListenAddr), slog.String("log_path", c.LogPath), slog.Bool("open_without_token", c.OpenWithoutToken),
	)
}

// Executor is an XXL-JOB executor: it registers with the admin, serves the
// admin's calls, runs handlers and reports their results. Create it with New,
// Register handlers, then Start; end it with Shutdown.
type Executor struct {
	cfg      Config
	log      *slog.Logger
	obs      Observer
	logs     *logStore
	client   *adminClient
	runner   *runner
	callback *callbacker
	ipGuess  bool // IP fell back to 127.0.0.1

	// goroutine owners, each waited for by Shutdown
	handlers      tracker // handler calls (may outlive their run after a kill or timeout)
	registryLoops tracker // heartbeat
	workLoops     tracker // callback sender, spool retry, log cleanup
	serving       tracker // HTTP server

	wire     *wire
	guard    *authguard.Guard // failed token checks per address
	draining atomic.Bool      // Shutdown started: beats fail

	runOnceMu   sync.Mutex
	runOnceLast int64

	mu           sync.Mutex
	state        int
	ln           net.Listener
	srv          *http.Server
	baseCancel   context.CancelCauseFunc
	regCancel    context.CancelFunc
	workCancel   context.CancelFunc // ends InterruptedFunc's context with stopWork
	stopWork     chan struct{}
	shutdownDone chan struct{}
	shutdownErr  error
}

const (
	stateNew = iota
	stateStarted
	stateStopping
)

// WithDefaults returns c with its zero settings filled with their defaults
// (those documented on each field); an open executor (OpenWithoutToken, no
// token) listens and advertises on loopback unless told otherwise.
// Config{}.WithDefaults() is the defaults themselves, for a program whose
// own configuration shows them (the order executor's xxl.job.* keys).
func (c Config) WithDefaults() Config {
	c.Port = cmp.Or(c.Port, 9999)
	c.LogPath = cmp.Or(c.LogPath, "./logs/xxl-job")
	c.LogRetentionDays = cmp.Or(c.LogRetentionDays, 30)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 30*time.Second)
	c.RegistryInterval = cmp.Or(c.RegistryInterval, 30*time.Second)
	c.CallbackRetryInterval = cmp.Or(c.CallbackRetryInterval, 30*time.Second)
	c.HTTPClientTimeout = cmp.Or(c.HTTPClientTimeout, 3*time.Second)
	open := c.OpenWithoutToken && c.AccessToken == ""
	if open && c.ListenAddr == "" {
		c.ListenAddr = "127.0.0.1:" + strconv.Itoa(c.Port)
		if c.Address == "" && c.IP == "" {
			c.IP = "127.0.0.1" // advertise where it listens
		}
	}
	c.ListenAddr = cmp.Or(c.ListenAddr, ":"+strconv.Itoa(c.Port))
	c.AdminVersion = cmp.Or(c.AdminVersion, AdminAuto)
	c.LogReadLimit = cmp.Or(c.LogReadLimit, 64<<20)
	c.CallbackQueueSize = cmp.Or(c.CallbackQueueSize, 1000)
	if c.IPExclude == nil {
		c.IPExclude = DefaultIPExclude
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

// resolveAddress fills Address from IP and Port, guessing the IP when
// neither is set (ipGuess), and resolves AdminVersion.
func (c *Config) resolveAddress() (ipGuess bool, errs []error) {
	if c.Address == "" {
		if c.IP == "" {
			var err error
			if c.IP, ipGuess, err = hostIPv4(c.IPExclude); err != nil {
				errs = append(errs, fmt.Errorf("IPExclude: %w", err))
			}
		}
		c.Address = "http://" + net.JoinHostPort(c.IP, strconv.Itoa(c.Port)) + "/"
	}
	if v, err := ParseAdminVersion(string(c.AdminVersion)); err != nil {
		errs = append(errs, fmt.Errorf("AdminVersion: %w", err))
	} else {
		c.AdminVersion = v
	}
	return ipGuess, errs
}

// problems are the settings New refuses, all of them.
func (c *Config) problems() []error {
	var errs []error
	switch {
	case c.AdminVersion == AdminMain && c.AccessToken == "":
		errs = append(errs, errors.New("AccessToken: required by the main dialect (the admin sends the executor group's token)"))
	case c.AccessToken == "" && !c.OpenWithoutToken && !c.Disabled: // a disabled executor never listens
		errs = append(errs, errors.New("AccessToken: required (anyone who reaches the port could run and kill jobs); "+
			"set OpenWithoutToken to serve without one, on loopback by default"))
	}
	if c.LogReadLimit < 0 {
		errs = append(errs, fmt.Errorf("LogReadLimit: %d is negative", c.LogReadLimit))
	}
	if c.CallbackQueueSize < 0 {
		errs = append(errs, fmt.Errorf("CallbackQueueSize: %d is negative", c.CallbackQueueSize))
	}
	if len(c.AdminAddresses) == 0 {
		errs = append(errs, errors.New("AdminAddresses: at least one admin address is required"))
	}
	for _, a := range c.AdminAddresses {
		if err := checkHTTPURL(a); err != nil {
			errs = append(errs, fmt.Errorf("AdminAddresses: %w", err))
		}
	}
	if c.AccessToken != "" && strings.TrimSpace(c.AccessToken) == "" {
		errs = append(errs, errors.New("AccessToken: only whitespace (the admin would treat it as no token)"))
	}
	if c.AppName == "" || len(c.AppName) > 64 || strings.ContainsAny(c.AppName, " \t\r\n") {
		errs = append(errs, fmt.Errorf("AppName: required, 1 to 64 characters without spaces, got %q", c.AppName))
	}
	if err := checkHTTPURL(c.Address); err != nil {
		errs = append(errs, fmt.Errorf("Address: %w", err)) //nolint:staticcheck // names the Config field
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("Port: %d out of range 1-65535", c.Port)) //nolint:staticcheck // names the Config field
	}
	if err := CheckListenAddr(context.Background(), c.ListenAddr); err != nil {
		errs = append(errs, fmt.Errorf("ListenAddr: %w", err))
	}
	for name, d := range map[string]time.Duration{
		"ShutdownTimeout": c.ShutdownTimeout, "RegistryInterval": c.RegistryInterval,
		"CallbackRetryInterval": c.CallbackRetryInterval, "HTTPClientTimeout": c.HTTPClientTimeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: negative duration %s", name, d))
		}
	}
	return errs
}

// New checks cfg, fills its defaults and returns an Executor. All problems
// with cfg are reported at once.
func New(cfg Config) (*Executor, error) {
	cfg = cfg.WithDefaults()
	ipGuess, errs := cfg.resolveAddress()
	errs = append(errs, cfg.problems()...)
	logs, err := newLogStore(cfg.LogPath)
	if err != nil {
		errs = append(errs, fmt.Errorf("LogPath: %w", err))
	}
	w := newWire(cfg.AdminVersion)
	client, err := newAdminClient(cfg, w)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("xxljob: invalid config: %w", errors.Join(errs...))
	}

	e := &Executor{
		cfg:          cfg,
		log:          cfg.Logger.With("component", "xxljob"),
		obs:          cfg.Observer,
		logs:         logs,
		client:       client,
		runner:       newRunner(),
		wire:         w,
		ipGuess:      ipGuess,
		stopWork:     make(chan struct{}),
		shutdownDone: make(chan struct{}),
	}
	e.guard = authguard.New(authguard.Config{Surface: "executor", Logger: e.log, OnFailure: e.authFailedFunc()})
	w.onChange = func(from, to dialect, why string) {
		e.log.Info("admin dialect learned", "from", from.String(), "to", to.String(), "reason", why)
	}
	e.callback = newCallbacker(e.client, logs, e.obs, cfg.Logger, cfg.CallbackRetryInterval, cfg.CallbackQueueSize)
	e.runner.execFunc = e.runTrigger
	e.runner.reportFunc = e.callback.pushAll
	return e, nil
}

// authFailedFunc is the guard's hook: the Observer's AuthFailed when it has
// one.
func (e *Executor) authFailedFunc() func(string) {
	if ao, ok := e.obs.(AuthObserver); ok {
		return ao.AuthFailed
	}
	return nil
}

func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

// Register binds a handler name (the admin's "JobHandler") to h. It must be
// called before Start; an empty or duplicate name is an error.
func (e *Executor) Register(name string, h Handler) error {
	if name == "" || h == nil {
		return errors.New("xxljob: register: empty handler name or nil handler")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != stateNew {
		return fmt.Errorf("xxljob: register %q: executor already started", name)
	}
	e.runner.mu.Lock()
	defer e.runner.mu.Unlock()
	if _, dup := e.runner.handlers[name]; dup {
		return fmt.Errorf("xxljob: register %q: duplicate handler name", name)
	}
	e.runner.handlers[name] = h
	return nil
}

// Start binds the listener and starts serving the admin, the registry
// heartbeat, the callback sender, the spool retry and the log cleanup. It
// returns once the server accepts connections. Runs inherit ctx's values but
// not its cancellation: stop the executor with Shutdown.
func (e *Executor) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != stateNew {
		return errors.New("xxljob: start: executor already started or shut down")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("xxljob: start: %w", err)
	}
	if e.cfg.Disabled {
		e.log.InfoContext(ctx, "xxl-job executor not enabled (Disabled): not serving, not registering with the admin")
		return nil
	}
	sp, err := e.openSpool(ctx)
	if err != nil {
		return fmt.Errorf("xxljob: start: callback spool: %w", err)
	}
	interrupted, starts := e.recoverRuns(ctx, sp)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", e.cfg.ListenAddr)
	if err != nil {
		sp.close()
		return fmt.Errorf("xxljob: start: listen %s: %w", e.cfg.ListenAddr, err)
	}
	e.state, e.ln = stateStarted, ln
	e.callback.spool = sp
	e.startWarnings(ctx)
	if why := advertisedMismatch(ctx, e.cfg.Address, ln.Addr()); why != "" {
		e.log.WarnContext(ctx, fmt.Sprintf("advertising %s to the admin but listening on %s: %s; set Address (or IP and Port) to where the admin reaches this listener",
			e.cfg.Address, ln.Addr(), why), "address", e.cfg.Address, "listen", ln.Addr().String())
	}

	base, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	e.baseCancel = cancel
	regCtx, regCancel := context.WithCancel(base)
	e.regCancel = regCancel
	e.srv = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second, // as the Java executor
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
	}
	e.runner.start(base)
	srv := e.srv
	e.serving.goFunc(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("executor HTTP server stopped", "error", err)
		}
	})
	e.workLoops.goFunc(func() { e.callback.run(base, e.stopWork) })
	e.workLoops.goFunc(func() { e.callback.spoolLoop(base, e.stopWork) })
	e.workLoops.goFunc(func() { e.cleanupLoop(base, e.stopWork) })
	workCtx, workCancel := context.WithCancel(base)
	e.workCancel = workCancel
	if len(interrupted) > 0 {
		e.workLoops.goFunc(func() { e.handOver(workCtx, interrupted, starts) })
	}
	e.registryLoops.goFunc(func() { e.registryLoop(regCtx) })
	e.log.InfoContext(ctx, "xxl-job executor started", "listen", ln.Addr().String(),
		"config", e.cfg)
	return nil
}

// startWarnings says at every start what an operator must not miss.
func (e *Executor) startWarnings(ctx context.Context) {
	if e.cfg.AccessToken == "" {
		e.log.WarnContext(ctx, "XXL-JOB EXECUTOR OPEN WITHOUT AN ACCESS TOKEN: anyone who can reach its listen address can run and kill jobs and read run logs",
			"listen", e.ln.Addr().String())
	}
	if e.cfg.AdminInsecureSkipVerify {
		e.log.WarnContext(ctx, "TLS CERTIFICATES OF THE ADMIN ARE NOT VERIFIED (AdminInsecureSkipVerify): anyone on the path can "+
			"impersonate the admin and read the access token; trust its CA with AdminCAFile instead")
	}
	if e.cfg.GlueEnabled {
		e.log.WarnContext(ctx, "GlueEnabled is set, but GLUE (script) jobs never run in this executor: their triggers are refused")
	}
	if e.ipGuess {
		e.log.WarnContext(ctx, "no usable IPv4 address found, advertising 127.0.0.1: an admin on another host cannot reach this executor; set Address or IP",
			"address", e.cfg.Address)
	}
}

// Addr returns the address the server is bound to, or nil before Start.
func (e *Executor) Addr() net.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ln == nil {
		return nil
	}
	return e.ln.Addr()
}
