package api

import (
	"bytes"
	"context"
	"math"
	"net/http/httptest"
	"strconv"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/query"
)

// TestWriteResponse checks that an answer written by writeResponse is
// writeJSON's, byte for byte and header for header (plus its
// Content-Length): on real answers of
// the fixture at several budgets (and the same buffers reused), and on an
// answer encoding/json cannot encode (a NaN score), which fails as before.
func TestWriteResponse(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "\n// Shout upper-cases a string <b> & \"x\".\nfunc Shout(s string) string { return s + \"\\u2028\" }\n")
	s := &Server{Store: store, Routes: QueryRoutes}
	s.init()
	var resps []*query.Response
	for _, q := range []string{"where is ParseToken defined", "Shout", "reverse a string", "token subject"} {
		for _, budget := range []int{20, 60, 200, 2000} {
			resp, err := s.search(context.Background(), Search{Tenant: "default", Repos: []string{"demo"}, Query: q, Budget: budget})
			if err != nil {
				t.Fatal(err)
			}
			resps = append(resps, resp)
		}
	}
	bad := *resps[len(resps)-1]
	bad.Confidence = math.NaN()
	resps = append(resps, &bad)
	for round := range 2 {
		for i, resp := range resps {
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			writeJSON(want, 200, resp)
			writeResponse(got, resp)
			if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
				t.Fatalf("round %d, answer %d: writeResponse %d %q\nwriteJSON %d %q", round, i, got.Code, got.Body, want.Code, want.Body)
			}
			// The same headers, and the answer's length where it was
			// encoded into the buffer (not for the NaN answer, which falls
			// back to writeJSON).
			g, w := got.Header().Clone(), want.Header()
			if cl := g.Get("Content-Length"); resp != &bad && cl != strconv.Itoa(got.Body.Len()) {
				t.Fatalf("answer %d: Content-Length %q, body %d bytes", i, cl, got.Body.Len())
			}
			g.Del("Content-Length")
			if len(g) != len(w) || g.Get("Content-Type") != w.Get("Content-Type") {
				t.Fatalf("answer %d: headers %v, want %v and Content-Length", i, got.Header(), w)
			}
			if resp != &bad && len(resp.Chunks) > 0 && !resp.JoinsTexts() {
				t.Errorf("answer %d: context is not its chunks joined, so it is escaped twice", i)
			}
		}
	}
}
