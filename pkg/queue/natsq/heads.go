package natsq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// headsGone is the core NATS subject of HeadGone notices.
const headsGone = "codectx_heads.gone"

type headNotice struct{ Tenant, Repo string }

// HeadGone tells every server listening (OnHeadGone) that tenant/repo's
// HEAD was removed. It is a notice, not a record: a server not connected
// at that moment does not get it. It implements api.HeadNotices.
func (q *Queue) HeadGone(ctx context.Context, tenant, repo string) error {
	data, err := json.Marshal(headNotice{tenant, repo})
	if err != nil {
		return err
	}
	if err := q.nc.Publish(headsGone, data); err != nil {
		return fmt.Errorf("head notice: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := q.nc.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("head notice: %w", err)
	}
	return nil
}

// OnHeadGone calls f for each HeadGone notice until stop is called, and
// missed (if not nil) whenever notices may have gone unheard: once the
// subscription is in place (notices sent before it were not heard) and
// after each reconnection to NATS (notices sent while disconnected were
// lost). While Connected is false, notices are not heard.
func (q *Queue) OnHeadGone(f func(tenant, repo string), missed func()) (stop func(), err error) {
	sub, err := q.nc.Subscribe(headsGone, func(m *nats.Msg) {
		var n headNotice
		if json.Unmarshal(m.Data, &n) == nil && n.Tenant != "" && n.Repo != "" {
			f(n.Tenant, n.Repo)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("head notices: %w", err)
	}
	if err := q.nc.Flush(); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("head notices: %w", err)
	}
	drop := func() {}
	if missed != nil {
		drop = q.onReconnect(missed)
		missed()
	}
	return func() { drop(); sub.Unsubscribe() }, nil
}

// Connected reports whether the client is connected to NATS now.
func (q *Queue) Connected() bool { return q.nc.IsConnected() }

// onReconnect calls f after each reconnection, until the returned func is
// called.
func (q *Queue) onReconnect(f func()) (drop func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	id := q.nextHook
	q.nextHook++
	q.reconnects[id] = f
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.reconnects, id)
	}
}

// reconnected runs the reconnection hooks (nats.Conn's reconnect handler).
func (q *Queue) reconnected(*nats.Conn) {
	q.mu.Lock()
	hooks := make([]func(), 0, len(q.reconnects))
	for _, f := range q.reconnects {
		hooks = append(hooks, f)
	}
	q.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}
