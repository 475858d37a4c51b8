package main

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// socket is a socket of this process as /proc lists it.
type socket struct {
	proto string
	addr  net.IP
	port  int
}

// ownSockets lists this process's TCP sockets in LISTEN state and its UDP
// sockets, by inode (/proc/self/fd names them socket:[inode]).
func ownSockets(t *testing.T) map[string]socket {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("this check reads /proc (Linux): %v", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	out := map[string]socket{}
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
		f, err := os.Open("/proc/self/net/" + proto)
		if err != nil {
			continue // no IPv6 on this machine
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || !inodes[fields[9]] {
				continue
			}
			if strings.HasPrefix(proto, "tcp") && fields[3] != "0A" { // LISTEN
				continue
			}
			hexIP, hexPort, _ := strings.Cut(fields[1], ":")
			raw, _ := hex.DecodeString(hexIP)
			// /proc prints each 32-bit word of the address in host (little-endian) order.
			for i := 0; i+4 <= len(raw); i += 4 {
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			port, _ := strconv.ParseInt(hexPort, 16, 32)
			out[proto+":"+fields[9]] = socket{proto: proto, addr: net.IP(raw), port: int(port)}
		}
		f.Close()
	}
	return out
}

// Every socket `codectx up` opens listens on loopback only: other hosts
// (and, through the services' own credentials, other local users; tested
// with each service) never reach the HTTP API, NATS or the Temporal
// server's frontend, history, matching and worker ports. Listed from
// /proc, so a listener added later is checked too, whatever opens it.
func TestSecurityListenersLoopbackOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	before := ownSockets(t)
	up := startUp(t, "--data", t.TempDir(), "--listen", freeAddr(t))
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	listening := 0
	for inode, s := range ownSockets(t) {
		if _, ok := before[inode]; ok {
			continue
		}
		if strings.HasPrefix(s.proto, "tcp") {
			listening++
		}
		if !s.addr.IsLoopback() {
			t.Errorf("up opened a %s socket on %s:%d, not on loopback", s.proto, s.addr, s.port)
		}
	}
	// The API, NATS and Temporal's four services at the least: fewer
	// means this check did not see them.
	if listening < 6 {
		t.Errorf("found %d listening sockets of up, want at least 6 (API, NATS, Temporal's 4)", listening)
	}
	t.Logf("%d listening sockets of up, all on loopback", listening)
}
