package temporalserver

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// Temporal binds the ports it is given itself and, when one is taken,
// logs Fatal and exits the process. A port picked by listening on :0 and
// closing is only free until someone else takes it, and under load (a
// busy test run, or other servers on the host) the kernel hands the same
// port to the next outgoing connection, since :0 draws from the ephemeral
// range. So free ports are drawn at random from below that range (where
// the kernel never assigns one on its own), never twice in a process, and
// a Fatal while the server is being built is turned into an error that
// start retries with other ports.

// startFatal is the panic a Fatal log call raises while start builds the
// server; start recovers it into an error.
type startFatal struct{ msg, detail string }

func (f startFatal) Error() string { return f.msg + ": " + f.detail }

// fatalLogger is the server's logger with Fatal raising startFatal while
// building is set (after start, Fatal is the logger's own: log, exit).
type fatalLogger struct {
	log.Logger
	building *atomic.Bool
}

func (l fatalLogger) Fatal(msg string, tags ...tag.Tag) {
	if l.building.Load() {
		l.Logger.Error(msg, tags...)
		var detail []string
		for _, t := range tags {
			detail = append(detail, t.Key()+"="+fmt.Sprint(t.Value()))
		}
		panic(startFatal{msg: msg, detail: strings.Join(detail, " ")})
	}
	l.Logger.Fatal(msg, tags...)
}

// With keeps the wrapper on loggers derived with tags.
func (l fatalLogger) With(tags ...tag.Tag) log.Logger {
	return fatalLogger{Logger: log.With(l.Logger, tags...), building: l.building}
}

// Skip keeps the wrapper on loggers that skip stack frames.
func (l fatalLogger) Skip(extra int) log.Logger {
	if s, ok := l.Logger.(log.SkipLogger); ok {
		return fatalLogger{Logger: s.Skip(extra), building: l.building}
	}
	return l
}

var (
	portsMu sync.Mutex
	handed  = map[int]bool{} // ports FreePort returned in this process
)

// pickPort is FreePort; tests replace it.
var pickPort = FreePort

// FreePort returns a port of host that is free now, drawn at random below
// the kernel's ephemeral range and never returned before in this process;
// where no such range can be read or it leaves no room, a port the kernel
// picks. A port below the range cannot be taken by an outgoing
// connection before the caller binds it, only by another listener; tests
// that start a server on a chosen port use it too.
func FreePort(host string) (int, error) {
	lo, hi := 10000, ephemeralStart()
	portsMu.Lock()
	defer portsMu.Unlock()
	if hi-lo >= 1000 {
		for range 64 {
			var b [4]byte
			if _, err := rand.Read(b[:]); err != nil {
				break
			}
			p := lo + int(binary.LittleEndian.Uint32(b[:])%uint32(hi-lo))
			if handed[p] {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
			if err != nil {
				continue
			}
			l.Close()
			handed[p] = true
			return p, nil
		}
	}
	for range 16 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handed[p] {
			handed[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s", host)
}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux),
// or 0 when it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}
