package natskv_test

import (
	"context"
	"testing"
	"time"

	"codectx/pkg/session/natskv"
	"codectx/pkg/session/sessiontest"
)

func TestConformance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := natskv.Open(ctx, openJS(t), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sessiontest.Run(t, st)
}
