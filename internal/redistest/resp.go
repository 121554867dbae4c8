package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Error is an error reply of the server, such as "ERR unknown command".
type Error string

// Error returns the reply text.
func (e Error) Error() string { return string(e) }

// ioTimeout bounds one raw command: dial, write and read.
const ioTimeout = 5 * time.Second

// Do sends one command to addr on a fresh connection and returns the reply:
// a string for a simple or bulk string, an int64, nil, a []any for an array,
// or an Error (as the error) for an error reply. It speaks RESP2 only.
func Do(addr string, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return nil, err
	}
	if _, err := conn.Write(encode(args)); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

func encode(args []string) []byte {
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("redistest: malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, Error(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("redistest: malformed bulk length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("redistest: malformed array length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		items := make([]any, n)
		for i := range items {
			v, err := readReply(r)
			var re Error
			if errors.As(err, &re) {
				items[i] = re
				continue
			}
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		return items, nil
	}
	return nil, fmt.Errorf("redistest: unknown reply type %q", line)
}

// infoField returns the value of field in an INFO or CLUSTER INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
