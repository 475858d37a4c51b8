package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/query"
	"codectx/pkg/session"
)

// bigSessions holds one session of about 1 MiB for every key (2,000
// chunks of 400-byte paths) and fails every save, as a store refusing a
// write does.
type bigSessions struct{}

func (bigSessions) Load(context.Context, string) (*session.Session, error) {
	s := &session.Session{}
	dir := strings.Repeat("d", 380)
	for i := range session.MaxSent {
		s.Sent = append(s.Sent, query.Sent{Repo: "demo", Commit: "c0ffee01", Path: fmt.Sprintf("%s/f%05d.go", dir, i), StartLine: 1, EndLine: 2})
	}
	return s, nil
}

func (bigSessions) Save(context.Context, string, *session.Session) error {
	return errors.New("session store: unavailable")
}

func (bigSessions) Append(context.Context, string, []query.Sent) (*session.Session, error) {
	return nil, errors.New("session store: unavailable")
}

// A query in a session reads the whole session (up to about 1 MiB) before
// it searches. Only the write was charged, so a query that failed after
// the read (here its session's save; a client gone, a repository that
// failed to load) paid one request for the read: 20 of 20 such queries
// went through a burst of 20. The read is charged when it is done.
func TestSecuritySessionReadCharged(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Sessions: bigSessions{}, Limits: Limits{Rate: 0.05, Burst: 20}})
	tried := 0
	for range 20 {
		resp, err := http.Post(ts.URL+"/v1/query", "application/json", strings.NewReader(`{"repo":"demo","query":"ParseToken","budget":500,"session":"s1"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
		case http.StatusOK:
			t.Fatal("a query whose session cannot be saved answered 200")
		default:
			tried++
		}
	}
	t.Logf("%d of 20 queries let in", tried)
	// A read costs about 15 requests: two queries go through, the third
	// waits for the rate.
	if tried > 3 {
		t.Errorf("%d of 20 queries that read a session of about 1 MiB were let in within a burst of 20: the read is not charged", tried)
	}
}
