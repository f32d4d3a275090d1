package provision

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/fakeconsole"
)

func TestClient_VersionDetectedOrConfigured(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, testJobs)
			c := b.newClient("auto")
			require.NoError(t, c.Login(b.ctx))
			require.Equal(t, string(v), c.Version())

			c = b.newClient(string(v))
			require.NoError(t, c.Login(b.ctx))
			require.Equal(t, string(v), c.Version())
		})
	}

	t.Run("configured 3.4 against a 2.4 admin", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakeconsole.V24, testJobs)
		err := b.newClient("3.4").Login(b.ctx)
		require.ErrorContains(t, err, "POST /auth/doLogin (login as admin) at "+b.fake.URL()+": the answer was not understood: HTTP 404")
	})
	t.Run("configured 2.4 against a 3.4 admin", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakeconsole.V34, testJobs)
		err := b.newClient("2.4").Login(b.ctx)
		require.ErrorContains(t, err, "POST /login (login as admin) at "+b.fake.URL()+": the answer was not understood: HTTP 404")
	})
}

// stub serves fixed answers by path, for shapes the fake never produces.
func stub(t *testing.T, routes map[string]http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := routes[r.URL.Path]; ok {
			h(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func login24(w http.ResponseWriter, _ *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: "XXL_JOB_LOGIN_IDENTITY", Value: "7b226964223a317d", Path: "/"})
	_, _ = w.Write([]byte(`{"code":200,"msg":null,"content":null}`))
}

func newStubClient(t *testing.T, base, version string) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Addresses: []string{base}, Username: "admin", Password: "pw-123456", Version: version})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestClient_UnderstoodOrStop(t *testing.T) {
	t.Parallel()
	t.Run("3.2 is refused by name", func(t *testing.T) {
		t.Parallel()
		base := stub(t, map[string]http.HandlerFunc{
			"/auth/doLogin": func(w http.ResponseWriter, _ *http.Request) {
				http.SetCookie(w, &http.Cookie{Name: "xxl_job_login_token", Value: "abcdef", Path: "/"})
				_, _ = w.Write([]byte(`{"code":200,"msg":"Success","content":null}`))
			},
			"/jobinfo/pageList": func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"recordsTotal":0,"recordsFiltered":0,"data":[]}`))
			},
		})
		err := newStubClient(t, base, "auto").Login(t.Context())
		require.ErrorContains(t, err, "looks like XXL-JOB 3.2")
	})
	t.Run("HTML where JSON was expected", func(t *testing.T) {
		t.Parallel()
		base := stub(t, map[string]http.HandlerFunc{
			"/login": login24,
			"/jobgroup/pageList": func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte(`<html>maintenance</html>`))
			},
		})
		f, err := ParseJobsFile("j.yml", []byte(testJobs), testAppName)
		require.NoError(t, err)
		_, err = Apply(t.Context(), newStubClient(t, base, "2.4"), f, ApplyOptions{})
		require.EqualError(t, err, `list executor groups: provision: POST /jobgroup/pageList: the admin's answer was not understood: `+
			`HTTP 200, "text/html": "<html>maintenance</html>"`)
	})
	t.Run("redirect elsewhere than the login page", func(t *testing.T) {
		t.Parallel()
		base := stub(t, map[string]http.HandlerFunc{
			"/login": login24,
			"/jobgroup/pageList": func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/maintenance", http.StatusFound)
			},
		})
		f, err := ParseJobsFile("j.yml", []byte(testJobs), testAppName)
		require.NoError(t, err)
		_, err = Apply(t.Context(), newStubClient(t, base, "2.4"), f, ApplyOptions{})
		require.ErrorContains(t, err, "POST /jobgroup/pageList: the admin's answer was not understood: HTTP 302 to /maintenance")
	})
	t.Run("list without its total", func(t *testing.T) {
		t.Parallel()
		base := stub(t, map[string]http.HandlerFunc{
			"/login": login24,
			"/jobgroup/pageList": func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"data":[]}`))
			},
		})
		c := newStubClient(t, base, "2.4")
		require.NoError(t, c.Login(t.Context()))
		_, err := c.findGroups(t.Context(), testAppName)
		require.ErrorContains(t, err, `POST /jobgroup/pageList: the admin's answer was not understood: HTTP 200, "text/plain; charset=utf-8": "{\"data\":[]}"`)
	})
	t.Run("a login answer's body is never echoed", func(t *testing.T) {
		t.Parallel()
		base := stub(t, map[string]http.HandlerFunc{
			"/login": func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(`token=SECRET-TOKEN pw-123456`))
			},
		})
		err := newStubClient(t, base, "2.4").Login(t.Context())
		require.ErrorContains(t, err, "the answer was not understood: HTTP 500")
		require.NotContains(t, err.Error(), "SECRET-TOKEN")
		require.NotContains(t, err.Error(), "pw-123456")
	})
	t.Run("success without the session cookie", func(t *testing.T) {
		t.Parallel()
		base := stub(t, map[string]http.HandlerFunc{
			"/login": func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"code":200,"msg":null,"content":null}`))
			},
		})
		err := newStubClient(t, base, "2.4").Login(t.Context())
		require.ErrorContains(t, err, "success but no XXL_JOB_LOGIN_IDENTITY cookie was set")
	})
}

func TestClient_TriesTheNextAddress(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeconsole.V24, testJobs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	c, err := NewClient(ClientConfig{Addresses: []string{dead, b.fake.URL()}, Username: "admin", Password: b.opts.Password})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.Login(b.ctx))
	require.Equal(t, b.fake.URL(), c.Base())
}

func TestNewClient_ChecksConfig(t *testing.T) {
	t.Parallel()
	_, err := NewClient(ClientConfig{Addresses: []string{"ftp://x"}, Version: "9"})
	require.ErrorContains(t, err, `admin address "ftp://x" is not an http(s) URL`)
	require.ErrorContains(t, err, "no console username")
	require.ErrorContains(t, err, "no console password")
	require.ErrorContains(t, err, `admin version "9" is not auto, 2.x, 3.3, 3.4 or main`)
}
