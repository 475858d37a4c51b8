package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/query"
	"codectx/pkg/session"
)

type failingSessions struct{}

func (failingSessions) Load(context.Context, string) (*session.Session, error) {
	return &session.Session{}, nil
}
func (failingSessions) Save(context.Context, string, *session.Session) error {
	return errors.New("session store: value too large")
}
func (failingSessions) Append(context.Context, string, []query.Sent) (*session.Session, error) {
	return nil, errors.New("session store: value too large")
}

// A failing query is logged under a key of the tenant and the status, not
// of the caller's repos list: a tenant whose queries fail (a session that
// cannot be saved) and that varies its list (duplicates, "*") wrote one
// 60 KB line per request and kept each list as a limiter key (audit 5).
func TestQueryFailureLogBounded(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	var logs bytes.Buffer
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Sessions: failingSessions{}, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for i := range 20 {
		repos := []string{"*"}
		for range 300 + i {
			repos = append(repos, "demo")
		}
		body, _ := json.Marshal(map[string]any{"repos": repos, "query": "hello", "session": "s"})
		if code, _, b := do(t, "POST", ts.URL+"/v1/query", "application/json", string(body), nil); code != http.StatusServiceUnavailable {
			t.Fatalf("query with a failing session store = %d %.200s, want 503", code, b)
		}
	}
	lines := strings.Count(logs.String(), "query failed")
	if lines != 1 || logs.Len() > 4096 {
		t.Errorf("20 failing queries with distinct repos lists logged %d lines, %d bytes; want 1 line of a few hundred bytes", lines, logs.Len())
	}
}

// awaySessions is a session store that cannot be reached.
type awaySessions struct{ failingSessions }

func (awaySessions) Load(context.Context, string) (*session.Session, error) {
	return nil, context.DeadlineExceeded
}

// A query whose session store cannot be read says it is the session
// store (503), not a bare "context deadline exceeded": an agent can then
// search without a session.
func TestQuerySessionStoreAway(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Sessions: awaySessions{}})
	code, _, b := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"demo","query":"hello","session":"s"}`, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(b), "session store unavailable") {
		t.Errorf("query with the session store away = %d %.300s, want 503 naming the session store", code, b)
	}
}
