package vtlocal

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// reservedPortsFile holds the ports the kernel never hands out as the local
// port of an outgoing connection.
const reservedPortsFile = "/proc/sys/net/ipv4/ip_local_reserved_ports"

// reservePorts keeps the kernel from using this cluster's ports as
// ephemeral ports. With a port offset (a private cluster beside the shared
// one) they fall in the ephemeral range (32768–60999 by default), where any
// outgoing connection may hold one when a daemon binds it: a vttablet then
// exits with "bind: address already in use". The reservation is global and
// lasts until reboot; it needs root and is skipped otherwise.
func (c *Cluster) reservePorts() {
	if os.Geteuid() != 0 {
		return
	}
	lo, hi := ephemeralRange()
	var want []string
	add := func(a, b int) {
		if b >= lo && a <= hi {
			want = append(want, fmt.Sprintf("%d-%d", a, b))
		}
	}
	for _, d := range []daemon{etcdD, vtctldD, vtgateD} {
		for _, p := range c.daemonPorts(d) {
			add(p, p)
		}
	}
	for _, base := range []int{tabletWebBase, tabletGRPCBase, tabletMySQLBase} {
		add(c.port(base+100), c.port(base+maxTabletUID))
	}
	if len(want) == 0 {
		return
	}
	cur, err := os.ReadFile(reservedPortsFile)
	if err != nil {
		return
	}
	have := strings.TrimSpace(string(cur))
	list := strings.Join(want, ",")
	if have != "" {
		list = have + "," + list
	}
	if err := os.WriteFile(reservedPortsFile, []byte(list), 0o644); err != nil {
		c.log.Warn("could not reserve the cluster's ports; a daemon may find one taken by an outgoing connection", "err", err)
	}
}

// ephemeralRange is the kernel's range of local ports for outgoing
// connections.
func ephemeralRange() (int, int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768, 60999
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768, 60999
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return 32768, 60999
	}
	return lo, hi
}
