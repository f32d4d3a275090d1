package xxljob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"time"
)

// DefaultIPExclude are the interfaces never advertised by default: the
// Docker bridge, the host ends of container links and other bridges. Their
// addresses are not reachable from an admin on another host.
var DefaultIPExclude = []string{"docker0", "veth*", "br-*"}

// iface is what address selection needs of a network interface.
type iface struct {
	name  string
	up    bool
	loop  bool
	addrs []net.IP
}

// hostIPv4 picks the address advertised when neither Address nor IP is set:
// the first IPv4 of an interface that is up, not loopback and not excluded
// (interfaces in the system's order), then the host name's address, then
// 127.0.0.1 (guessed: Start warns). The Java executor differs: 2.x asks the
// host name first (InetAddress.getLocalHost), 3.x walks the interfaces but
// takes any, a down or virtual one included.
func hostIPv4(exclude []string) (ip string, guessed bool, err error) {
	if len(exclude) == 1 && exclude[0] == "-" {
		exclude = nil
	}
	for _, p := range exclude {
		if _, err := path.Match(p, ""); err != nil {
			return "", false, fmt.Errorf("bad pattern %q: %w", p, err)
		}
	}
	if ip, ok := pickIPv4(systemInterfaces(), exclude); ok {
		return ip, false, nil
	}
	if ip, ok := hostnameIPv4(); ok {
		return ip, false, nil
	}
	return "127.0.0.1", true, nil
}

func pickIPv4(ifaces []iface, exclude []string) (string, bool) {
	for _, ifc := range ifaces {
		if !ifc.up || ifc.loop || excluded(ifc.name, exclude) {
			continue
		}
		for _, ip := range ifc.addrs {
			if v4 := ip.To4(); v4 != nil && usable(v4) {
				return v4.String(), true
			}
		}
	}
	return "", false
}

func excluded(name string, patterns []string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// usable rejects loopback, link-local (169.254/16, no DHCP answer) and
// unspecified addresses.
func usable(ip net.IP) bool {
	return !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsUnspecified()
}

func systemInterfaces() []iface {
	list, err := net.Interfaces()
	if err != nil {
		return nil
	}
	out := make([]iface, 0, len(list))
	for _, ni := range list {
		ifc := iface{name: ni.Name, up: ni.Flags&net.FlagUp != 0, loop: ni.Flags&net.FlagLoopback != 0}
		addrs, err := ni.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ifc.addrs = append(ifc.addrs, n.IP)
			}
		}
		out = append(out, ifc)
	}
	return out
}

// hostnameIPv4 resolves the host name (the hosts file, then DNS, briefly).
func hostnameIPv4() (string, bool) {
	h, err := os.Hostname()
	if err != nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", h)
	if err != nil {
		return "", false
	}
	for _, ip := range ips {
		if v4 := ip.To4(); v4 != nil && usable(v4) {
			return v4.String(), true
		}
	}
	return "", false
}

// CheckListenAddr reports whether addr can be listened on: host:port with a
// numeric port from 0 to 65535 (0: any free port) and a host that is empty
// (every interface), a literal IP or a name that resolves. It checks before
// anything starts what net.Listen would otherwise refuse only at Start.
func CheckListenAddr(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Errorf("%q is not host:port (%w); want e.g. 127.0.0.1:9999, or :9999 for every interface", addr, err)
	}
	n, err := strconv.Atoi(port)
	switch {
	case port == "":
		return fmt.Errorf("%q has no port; want e.g. %s", addr, net.JoinHostPort(host, "9999"))
	case err != nil:
		return fmt.Errorf("%q: port %q is not a number", addr, port)
	case n < 0 || n > 65535:
		return fmt.Errorf("%q: port %d out of range 0-65535", addr, n)
	}
	if host == "" || net.ParseIP(host) != nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := net.DefaultResolver.LookupIPAddr(lctx, host); err != nil {
		return fmt.Errorf("%q: host %q is neither an IP address nor a name that resolves (%w)", addr, host, err)
	}
	return nil
}

// advertisedMismatch says how address (the URL the admin is given) differs
// from listen, the address the server is bound to, or "" when the admin
// reaches the listener by it. A listener on every interface matches any
// host; a name matches when one of its addresses is the listener's. A
// different port or host can be right behind a proxy or a port mapping,
// which is why this is a warning, not an error.
func advertisedMismatch(ctx context.Context, address string, listen net.Addr) string {
	la, ok := listen.(*net.TCPAddr)
	u, err := url.Parse(address)
	if !ok || err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port != strconv.Itoa(la.Port) {
		return fmt.Sprintf("the advertised port %s is not the listening port %d", port, la.Port)
	}
	if la.IP == nil || la.IP.IsUnspecified() {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		if ip.Equal(la.IP) {
			return ""
		}
		return fmt.Sprintf("the advertised host %s is not the listening IP %s", host, la.IP)
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(lctx, host)
	if err != nil {
		return fmt.Sprintf("the advertised host %s does not resolve here (%v), the listener is on %s only", host, err, la.IP)
	}
	for _, ip := range ips {
		if ip.IP.Equal(la.IP) {
			return ""
		}
	}
	return fmt.Sprintf("the advertised host %s does not resolve to the listening IP %s", host, la.IP)
}
