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

// OnHeadGone calls f for each HeadGone notice until stop is called.
func (q *Queue) OnHeadGone(f func(tenant, repo string)) (stop func(), err error) {
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
	return func() { sub.Unsubscribe() }, nil
}
