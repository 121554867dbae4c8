package rig

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presencekit/presence/internal/redistest"
)

// Command is one command as MONITOR reported it.
type Command struct {
	// Name is the command name in upper case, such as "EVALSHA" or "HSET".
	Name string
	// Args are the arguments after the name.
	Args []string
	// Lua is set for a command a script ran (redis.call), unset for one a
	// client sent.
	Lua bool
}

// Monitor records every command a server receives, with MONITOR on a
// connection of its own.
type Monitor struct {
	addr string
	conn net.Conn
	done chan struct{}

	mu   sync.Mutex
	cmds []Command
	err  error
}

var markSeq atomic.Int64

// StartMonitor starts recording the commands addr receives; the recording
// stops when the test ends.
func StartMonitor(tb testing.TB, addr string) *Monitor {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, DialTimeout)
	if err != nil {
		tb.Fatalf("rig: monitor: %v", err)
	}
	r := bufio.NewReaderSize(conn, 1<<20)
	conn.SetDeadline(time.Now().Add(IOTimeout))
	if _, err := conn.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		conn.Close()
		tb.Fatalf("rig: monitor: %v", err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		conn.Close()
		tb.Fatalf("rig: monitor: %q, %v", line, err)
	}
	conn.SetDeadline(time.Time{})
	m := &Monitor{addr: addr, conn: conn, done: make(chan struct{})}
	go m.read(r)
	tb.Cleanup(m.stop)
	return m
}

func (m *Monitor) read(r *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		c, err := parseMonitorLine(strings.TrimSuffix(line, "\r\n"))
		m.mu.Lock()
		if err != nil && m.err == nil {
			m.err = err
		} else if err == nil {
			m.cmds = append(m.cmds, c)
		}
		m.mu.Unlock()
	}
}

func (m *Monitor) stop() {
	m.conn.Close()
	<-m.done
}

// Sync waits until every command the server received before the call is
// recorded (it sends a marker and waits to see it), and returns the
// recording so far, markers left out.
func (m *Monitor) Sync(tb testing.TB) []Command {
	tb.Helper()
	marker := "rig-monitor-mark-" + strconv.FormatInt(markSeq.Add(1), 10)
	if _, err := redistest.Do(m.addr, "ECHO", marker); err != nil {
		tb.Fatalf("rig: monitor mark: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		seen := false
		for i := len(m.cmds) - 1; i >= 0; i-- {
			if c := m.cmds[i]; c.Name == "ECHO" && len(c.Args) == 1 && c.Args[0] == marker {
				seen = true
				break
			}
		}
		var out []Command
		if seen {
			for _, c := range m.cmds {
				if !(c.Name == "ECHO" && len(c.Args) == 1 && strings.HasPrefix(c.Args[0], "rig-monitor-mark-")) {
					out = append(out, c)
				}
			}
		}
		err := m.err
		m.mu.Unlock()
		if err != nil {
			tb.Fatalf("rig: monitor: %v", err)
		}
		if seen {
			return out
		}
		if time.Now().After(deadline) {
			tb.Fatalf("rig: monitor did not see its marker within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// parseMonitorLine reads `+1700000000.123456 [0 127.0.0.1:5000] "SET" "k" "v"`
// or, for a command a script ran, `... [0 lua] "HSET" ...`.
func parseMonitorLine(line string) (Command, error) {
	if !strings.HasPrefix(line, "+") {
		return Command{}, fmt.Errorf("rig: monitor line %q", line)
	}
	open := strings.IndexByte(line, '[')
	close := strings.IndexByte(line, ']')
	if open < 0 || close < open {
		return Command{}, fmt.Errorf("rig: monitor line %q", line)
	}
	source := line[open+1 : close]
	words, err := splitQuoted(line[close+1:])
	if err != nil || len(words) == 0 {
		return Command{}, fmt.Errorf("rig: monitor line %q: %v", line, err)
	}
	return Command{Name: strings.ToUpper(words[0]), Args: words[1:], Lua: strings.HasSuffix(source, " lua")}, nil
}

// splitQuoted reads the space-separated, double-quoted and escaped words
// MONITOR prints (sdscatrepr: \\ \" \n \r \t \a \b \xHH).
func splitQuoted(s string) ([]string, error) {
	var out []string
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		if s[i] != '"' {
			return nil, fmt.Errorf("unquoted word at %d", i)
		}
		i++
		var b strings.Builder
		for {
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated word")
			}
			c := s[i]
			if c == '"' {
				i++
				break
			}
			if c != '\\' {
				b.WriteByte(c)
				i++
				continue
			}
			if i+1 >= len(s) {
				return nil, fmt.Errorf("dangling escape")
			}
			switch e := s[i+1]; e {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+3 >= len(s) {
					return nil, fmt.Errorf("short \\x escape")
				}
				v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
				if err != nil {
					return nil, err
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(e)
			}
			i += 2
		}
		out = append(out, b.String())
	}
}
