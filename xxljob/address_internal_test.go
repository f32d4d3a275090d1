package xxljob

import (
	"net"
	"testing"
)

func TestPickIPv4(t *testing.T) {
	t.Parallel()
	ip := net.ParseIP
	ifaces := []iface{
		{name: "lo", up: true, loop: true, addrs: []net.IP{ip("127.0.0.1")}},
		{name: "docker0", up: true, addrs: []net.IP{ip("172.17.0.1")}},
		{name: "veth1a2b", up: true, addrs: []net.IP{ip("169.254.3.4"), ip("172.17.0.9")}},
		{name: "br-5f3e", up: true, addrs: []net.IP{ip("172.18.0.1")}},
		{name: "eth0", up: false, addrs: []net.IP{ip("10.0.0.9")}},
		{name: "wlan0", up: true, addrs: []net.IP{ip("fe80::1"), ip("169.254.0.7")}},
		{name: "eth1", up: true, addrs: []net.IP{ip("fe80::2"), ip("192.168.1.5")}},
		{name: "eth2", up: true, addrs: []net.IP{ip("10.1.1.1")}},
	}
	tests := []struct {
		exclude []string
		want    string
	}{
		{DefaultIPExclude, "192.168.1.5"}, // not the bridges, not the down eth0, not link-local
		{nil, "172.17.0.1"},               // nothing excluded: the first up interface
		{[]string{"docker0", "veth*", "br-*", "eth1"}, "10.1.1.1"},
	}
	for _, tc := range tests {
		got, ok := pickIPv4(ifaces, tc.exclude)
		if !ok || got != tc.want {
			t.Errorf("exclude %v: got %q %v, want %q", tc.exclude, got, ok, tc.want)
		}
	}
	if _, ok := pickIPv4(ifaces[:5], DefaultIPExclude); ok {
		t.Error("only loopback, bridges and a down interface: nothing to pick")
	}
	if _, _, err := hostIPv4([]string{"eth["}); err == nil {
		t.Error("a bad pattern is an error")
	}
}
