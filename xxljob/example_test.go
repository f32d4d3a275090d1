package xxljob_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/orderjob/executor/xxljob"
)

// Register a handler, start the executor against an admin, and trigger the
// handler the way the admin does. Here the admin is a stub that prints the
// results it receives.
func Example() {
	callbacks := make(chan string, 1)
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/api/callback") {
			callbacks <- string(body)
		}
		fmt.Fprint(w, `{"code":200,"msg":null,"content":null}`)
	}))
	defer admin.Close()
	logDir, _ := os.MkdirTemp("", "xxljob-example")
	defer os.RemoveAll(logDir)

	exec, err := xxljob.New(xxljob.Config{
		AdminAddresses: []string{admin.URL + "/xxl-job-admin"},
		AccessToken:    "default_token",
		AppName:        "xxl-job-executor-sample",
		ListenAddr:     "127.0.0.1:0",
		LogPath:        logDir,
	})
	if err != nil {
		panic(err)
	}
	err = exec.Register("demoJobHandler", xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		req.Logf("hello from job %d, param %q", req.JobID, req.Param)
		req.SetResult("said hello")
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := exec.Start(context.Background()); err != nil {
		panic(err)
	}

	// What the admin sends to trigger job 1.
	trigger := `{"jobId":1,"executorHandler":"demoJobHandler","executorParams":"world",` +
		`"executorBlockStrategy":"SERIAL_EXECUTION","executorTimeout":0,"logId":1,` +
		`"logDateTime":1700000000123,"glueType":"BEAN","glueSource":"","glueUpdatetime":0,` +
		`"broadcastIndex":0,"broadcastTotal":1}`
	req := httptest.NewRequest(http.MethodPost, "/run", strings.NewReader(trigger))
	req.Header.Set("XXL-JOB-ACCESS-TOKEN", "default_token")
	rec := httptest.NewRecorder()
	exec.ServeHTTP(rec, req)
	fmt.Println("run:", rec.Body.String())
	fmt.Println("callback:", <-callbacks)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := exec.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// run: {"code":200}
	// callback: [{"logId":1,"logDateTim":1700000000123,"handleCode":200,"handleMsg":"said hello"}]
}
