package mariadbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// GaleraProviderPath is the wsrep provider, from Debian's galera-4 package
// (a dependency of mariadb-server).
var GaleraProviderPath = firstExistingFile("/usr/lib/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so",
	"/usr/lib64/galera-4/libgalera_smm.so")

func firstExistingFile(paths ...string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return paths[0]
}

// Cluster is a PRIVATE MariaDB Galera cluster: n mariadbd processes on
// loopback ports, every one a writable member (multi-primary), joined one
// after the other by an rsync state transfer. Tests start it to see what a
// certification conflict, Galera's interleaved AUTO_INCREMENT ids and a
// node's loss do to the executor. Its nodes run as the mysql user when the
// test runs as root: mariadbd refuses root without --user, and the joiner's
// rsync transfer fails as root.
type Cluster struct {
	Nodes []*Node

	t    testing.TB
	dir  string
	cred *syscall.Credential
}

// Node is one member of a Cluster.
type Node struct {
	Name string
	// Addr is host:port of the node's SQL port on 127.0.0.1.
	Addr string
	Port int
	Dir  string

	c                        *Cluster
	gcommPort, istPort, sstP int

	process
}

// StartGalera starts an n-node cluster (n >= 1) and waits until every node
// is Synced; the nodes are killed and their files removed when the test
// ends. A missing provider or rsync fails the test with the package to
// install.
func StartGalera(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("mariadbtest: a cluster of %d nodes", n)
	}
	for _, need := range []struct{ path, pkg string }{{GaleraProviderPath, "galera-4"}, {"rsync", "rsync"}} {
		if _, err := os.Stat(need.path); err != nil {
			if _, lerr := exec.LookPath(need.path); lerr != nil {
				t.Fatalf("mariadbtest: %s not found (apt-get install %s)", need.path, need.pkg)
			}
		}
	}
	tmpl, err := template()
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	c := &Cluster{t: t}
	if c.cred, err = serverCredential(); err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	// Not t.TempDir: its parents are private to root, and the nodes run as
	// mysql.
	if c.dir, err = os.MkdirTemp("", "galeratest-"); err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(c.dir) })
	t.Cleanup(c.killAll) // runs first: the files go after the processes
	if err := os.Chmod(c.dir, 0o755); err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	for i := range n {
		nd := &Node{Name: fmt.Sprintf("node%d", i+1), Dir: filepath.Join(c.dir, fmt.Sprintf("node%d", i+1)), c: c,
			Port: freePort(t), gcommPort: freePort(t), istPort: freePort(t), sstP: freePort(t)}
		nd.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.Port))
		for _, sub := range []string{"data", "tmp"} {
			if err := os.MkdirAll(filepath.Join(nd.Dir, sub), 0o755); err != nil {
				t.Fatalf("mariadbtest: %v", err)
			}
		}
		if i == 0 { // the others get their data from the first by state transfer
			if out, err := exec.Command("cp", "-a", tmpl+"/.", filepath.Join(nd.Dir, "data")).CombinedOutput(); err != nil {
				t.Fatalf("mariadbtest: copy the template data directory: %v: %s", err, out)
			}
		}
		c.Nodes = append(c.Nodes, nd)
	}
	if c.cred != nil {
		if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", c.cred.Uid, c.cred.Gid), c.dir).CombinedOutput(); err != nil {
			t.Fatalf("mariadbtest: chown the cluster's files: %v: %s", err, out)
		}
	}
	// One at a time: two joiners at once ask the same donor for two
	// transfers, and a slow one times out.
	for i, nd := range c.Nodes {
		nd.start(i == 0)
	}
	return c
}

// serverCredential is the mysql user's when the test runs as root, nil
// otherwise (the nodes then run as the test's own user).
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		return nil, fmt.Errorf("a Galera node runs as the mysql user, which is missing (apt-get install mariadb-server): %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func (c *Cluster) gcommAddress() string {
	var parts []string
	for _, nd := range c.Nodes {
		parts = append(parts, net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.gcommPort)))
	}
	return "gcomm://" + strings.Join(parts, ",")
}

func (c *Cluster) killAll() {
	for _, nd := range c.Nodes {
		nd.Kill()
	}
}

// DSN returns node i's DSN for database db (see Server.DSN).
func (c *Cluster) DSN(i int, db string) string { return dsnFor(c.Nodes[i].Addr, db) }

// NewDB creates database name with the executor's migrations applied
// through the first node (DDL replicates in total order) and returns a
// handle to it on every node, closed when the test ends, with their DSNs.
func (c *Cluster) NewDB(t testing.TB, name string) ([]*sqlx.DB, []string) {
	t.Helper()
	var dsns []string
	for i := range c.Nodes {
		dsns = append(dsns, c.DSN(i, name))
	}
	return newDB(t, 60*time.Second, c.DSN(0, ""), name, dsns), dsns
}

// Size is the cluster size node i sees (wsrep_cluster_size).
func (c *Cluster) Size(i int) (int, error) {
	db, err := sqlx.Open("mysql", c.DSN(i, ""))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var name string
	var n int
	err = db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &n)
	return n, err
}

func (nd *Node) args(bootstrap bool) []string {
	args := append(serverArgs(nd.Dir, nd.Port),
		// What Galera needs: row events and interleaved AUTO_INCREMENT locks.
		"--binlog-format=ROW",
		"--innodb-autoinc-lock-mode=2",
		"--wsrep-on=ON",
		"--wsrep-provider="+GaleraProviderPath,
		"--wsrep-cluster-name=mariadbtest",
		"--wsrep-cluster-address="+nd.c.gcommAddress(),
		"--wsrep-node-name="+nd.Name,
		"--wsrep-node-address=127.0.0.1",
		fmt.Sprintf("--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;base_port=%d",
			nd.gcommPort, nd.istPort, nd.gcommPort),
		fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", nd.sstP),
		"--wsrep-sst-method=rsync",
	)
	if nd.c.cred == nil {
		args = append(args, "--user="+currentUser())
	}
	if bootstrap {
		args = append(args, "--wsrep-new-cluster")
	}
	return args
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// start starts the node (bootstrapping a new cluster or joining the others)
// and waits until it is Synced.
func (nd *Node) start(bootstrap bool) {
	t := nd.c.t
	t.Helper()
	nd.mu.Lock()
	if nd.cmd != nil {
		nd.mu.Unlock()
		return
	}
	exited, err := nd.launch(exec.Command(MariadbdPath, nd.args(bootstrap)...), nd.c.cred)
	nd.mu.Unlock()
	if err != nil {
		t.Fatalf("mariadbtest: start %s: %v", nd.Name, err)
	}
	if err := waitUntil(exited, 90*time.Second, nd.synced); err != nil {
		nd.Kill()
		t.Fatalf("mariadbtest: %s on %s did not join: %v\nerror log (tail):\n%s", nd.Name, nd.Addr, err, tailLines(nd.ErrorLog(), 40))
	}
}

// Start starts a stopped node again; it rejoins the cluster (by an
// incremental or a full state transfer) and is Synced when Start returns.
func (nd *Node) Start() { nd.start(false) }

func (nd *Node) synced() error {
	db, err := sqlx.Open("mysql", dsnFor(nd.Addr, ""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var name, state string
	if err := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state); err != nil {
		return err
	}
	if state != "Synced" {
		return fmt.Errorf("state %s", state)
	}
	return nil
}

// Kill crashes the node (SIGKILL to its process group) and waits until it
// is gone; the others go on as a smaller cluster while they keep a quorum.
func (nd *Node) Kill() { nd.stop(syscall.SIGKILL, 10*time.Second) }

// ErrorLog returns the node's error log.
func (nd *Node) ErrorLog() string {
	b, _ := os.ReadFile(filepath.Join(nd.Dir, "error.log"))
	return string(b)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
