package metrics

// AuthFailuresTotal counts refused authentications by surface: executor
// (the XXL-JOB port's access token), api (the API port's token) and
// console (sign-in with a console token).
const AuthFailuresTotal = "executor_auth_failures_total"

// Surfaces of AuthFailed.
const (
	SurfaceExecutor = "executor"
	SurfaceAPI      = "api"
	SurfaceConsole  = "console"
)

// AuthFailed counts one failed authentication on surface. Its signature
// fits the hooks of xxljob (xxljob.AuthObserver, through the caller),
// internal/api and the console.
func (m *Metrics) AuthFailed(surface string) {
	m.authFailures.WithLabelValues(surface).Inc()
}
