package xxljob

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
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
