package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A role given NATS credentials in its URL (nats://user:password@host,
// nats://token@host: how NATS clients take them) must not write them to
// its log or its errors while NATS is not reachable yet (a pod started
// before NATS): logs are read by more people than the secret's store.
// Before, every "cannot connect, retrying" line showed the whole URL.
func TestSecurityRoleLogsNoNATSCredentials(t *testing.T) {
	const secret = "nats-s3cret-0123456789"
	closed := freeAddr(t) // nothing listens there once freeAddr returns
	for _, u := range []string{"nats://codectx:" + secret + "@" + closed, "nats://" + secret + "@" + closed} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var out, errs syncBuffer
		err := run(ctx, []string{"parse-worker", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--nats", u}, &out, &errs)
		cancel()
		logs := out.String() + errs.String()
		if err != nil {
			logs += err.Error()
		}
		if !strings.Contains(logs, "cannot connect") {
			t.Fatalf("no connection attempt logged:\n%s", logs)
		}
		if strings.Contains(logs, secret) {
			t.Errorf("the NATS credential of %s is in the log:\n%s", strings.Replace(u, secret, "SECRET", 1), strings.ReplaceAll(logs, secret, "SECRET"))
		}
	}
}
