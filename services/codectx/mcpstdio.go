package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

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
func stdioTransport(in io.Reader, out io.Writer) *mcp.IOTransport {
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(filterLines(in, pw, w)) }()
	return &mcp.IOTransport{Reader: pr, Writer: w, MaxLineLength: -1}
}

// lineWriter serialises whole-line writes of the transport and of
// filterLines' error replies.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lineWriter) Close() error { return nil }

// filterLines copies the lines of in that are JSON-RPC messages (or
// batches of them) to good, and answers the others on reply. It returns
// nil at the end of in, or the error of a read or write.
func filterLines(in io.Reader, good io.Writer, reply io.Writer) error {
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
			} else if _, werr := good.Write(append(msg, '\n')); werr != nil {
				return werr
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
