package mariadbtest

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// process is the mariadbd process of a Server or of a Cluster's Node.
type process struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// serverArgs are the options every private mariadbd runs with: its files
// in dir, its SQL port on 127.0.0.1.
func serverArgs(dir string, port int) []string {
	return []string{
		"--no-defaults",
		"--datadir=" + filepath.Join(dir, "data"),
		// Its own temporary files: at start mariadbd deletes every #sql
		// file in its tmpdir, which in /tmp would be the in-use temporary
		// tables of the shared server and of the other private ones.
		"--tmpdir=" + filepath.Join(dir, "tmp"),
		"--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--log-error=" + filepath.Join(dir, "error.log"),
		"--innodb-log-file-size=8M",
		"--innodb-buffer-pool-size=64M",
		"--max-connections=300",
	}
}

// launch starts cmd as the user of cred (nil: the test's own) and returns
// a channel closed once it has exited. cmd runs in its own process group,
// so a ^C to the test is not a crash of the server and stop also ends what
// it runs (a Galera state transfer), and it is killed with the test binary
// if that dies first. The caller holds mu and has checked that no process
// runs.
func (p *process) launch(cmd *exec.Cmd, cred *syscall.Credential) (<-chan struct{}, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return exited, nil
}

// stop sends sig to the process group and waits until the process has
// exited, killing the group after wait. It does nothing when none runs.
func (p *process) stop(sig syscall.Signal, wait time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd, p.exited = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-exited:
	case <-time.After(wait):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}
