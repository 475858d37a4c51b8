package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStdioLine bounds one line of `codectx mcp`'s stdin, as the SDK's
// transport bounds a frame.
const maxStdioLine = mcp.DefaultMaxLineLength

// JSON-RPC 2.0's error codes for a line that is not a message.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
)

// stdioTransport is the stdio transport of `codectx mcp`, which survives a
// bad line: the SDK's transport ends the session at the first line that is
// not JSON, or is JSON but no JSON-RPC message, and the agent's next write
// fails with a broken pipe. Here such a line is answered with a JSON-RPC
// error (parse error or invalid request, id null) and the session goes
// on; a line longer than maxStdioLine is answered and skipped likewise.
// The errors and the SDK's messages are written to out one whole line at
// a time.
//
// At the end of stdin the session ends once every request read has been
// answered (at most drainWait later): ended at once, the answers of calls
// still running were lost, and a script that piped its requests in got
// none of them.
func stdioTransport(in io.Reader, out io.Writer) *mcp.IOTransport {
	w := &lineWriter{w: out, pending: map[string]bool{}}
	pr, pw := io.Pipe()
	go func() {
		err := filterLines(in, pw, w)
		if err == nil {
			w.drain(drainWait)
		}
		pw.CloseWithError(err)
	}()
	return &mcp.IOTransport{Reader: pr, Writer: w, MaxLineLength: -1}
}

// drainWait bounds how long `codectx mcp` waits, after its stdin ended,
// for the answers of the requests it read.
const drainWait = time.Minute

// lineWriter serialises whole-line writes of the transport and of
// filterLines' error replies, and keeps the ids of the requests read
// that have no answer yet.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending map[string]bool // ids (as JSON) of requests not yet answered
	idle    chan struct{}   // closed when pending empties, while drain waits
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	for _, id := range messageIDs(p, false) {
		delete(l.pending, id)
	}
	if len(l.pending) == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
	return n, err
}

// asked records the requests of a line read.
func (l *lineWriter) asked(line []byte) {
	ids := messageIDs(line, true)
	if len(ids) == 0 {
		return
	}
	l.mu.Lock()
	for _, id := range ids {
		l.pending[id] = true
	}
	l.mu.Unlock()
}

// drain waits until every request read has been answered, or for at most
// d.
func (l *lineWriter) drain(d time.Duration) {
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	l.idle = idle
	l.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}

// messageIDs returns the ids (as compact JSON) of the requests (requests
// true: messages with a method) or of the answers (false: without one) in
// a line of one message or a batch.
func messageIDs(line []byte, requests bool) []string {
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	// One decoding of the line, a batch or one message by its first
	// byte: an answer may be large, and each is read here.
	var batch []msg
	if b := bytes.TrimLeft(line, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		if json.Unmarshal(b, &batch) != nil {
			return nil
		}
	} else {
		var one msg
		if json.Unmarshal(b, &one) != nil {
			return nil
		}
		batch = []msg{one}
	}
	var ids []string
	for _, m := range batch {
		if len(m.ID) == 0 || string(m.ID) == "null" || (m.Method != nil) != requests {
			continue
		}
		var b bytes.Buffer
		if json.Compact(&b, m.ID) == nil {
			ids = append(ids, b.String())
		}
	}
	return ids
}

func (*lineWriter) Close() error { return nil }

// filterLines copies the lines of in that are JSON-RPC messages (or
// batches of them) to good, noting their requests on reply, and answers
// the others on reply. It returns nil at the end of in, or the error of a
// read or write.
func filterLines(in io.Reader, good io.Writer, reply *lineWriter) error {
	r := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	for {
		line = line[:0]
		long := false
		var err error
		for {
			var frag []byte
			frag, err = r.ReadSlice('\n')
			if !long && len(line)+len(frag) <= maxStdioLine+1 {
				line = append(line, frag...)
			} else {
				long, line = true, line[:0]
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if long {
			if werr := rpcError(reply, rpcInvalidRequest, fmt.Sprintf("invalid request: a line longer than %d MiB, not read", maxStdioLine>>20)); werr != nil {
				return werr
			}
		} else if msg := bytes.TrimSpace(line); len(msg) > 0 {
			if code, why := checkMessage(msg); code != 0 {
				if werr := rpcError(reply, code, why); werr != nil {
					return werr
				}
			} else {
				reply.asked(msg)
				if _, werr := good.Write(append(msg, '\n')); werr != nil {
					return werr
				}
			}
		}
		if err != nil { // io.EOF
			return nil
		}
	}
}

// checkMessage returns 0 when msg is one JSON-RPC message or a non-empty
// batch of them, else the error code and text to answer it with.
func checkMessage(msg []byte) (int, string) {
	if !json.Valid(msg) {
		return rpcParseError, "parse error: the line is not JSON"
	}
	var batch []json.RawMessage
	if json.Unmarshal(msg, &batch) == nil {
		if len(batch) == 0 {
			return rpcInvalidRequest, "invalid request: an empty batch"
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return rpcInvalidRequest, "invalid request: a batch member is not a JSON-RPC 2.0 message"
			}
		}
		return 0, ""
	}
	if _, err := jsonrpc.DecodeMessage(msg); err != nil {
		return rpcInvalidRequest, "invalid request: not a JSON-RPC 2.0 message"
	}
	return 0, ""
}

func rpcError(w io.Writer, code int, text string) error {
	b, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": code, "message": text},
	})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
