package main

import (
	"context"
	"log/slog"
	"time"

	"codectx/pkg/api"
)

// locationRetries and locationRetryEvery bound recordLocations' passes
// while the orchestrator or the store fails.
const (
	locationRetries    = 10
	locationRetryEvery = 30 * time.Second
)

// recordLocations records once, at start, the location of every published
// repository indexed by a version that kept it only in the orchestrator
// (api.Server.RecordLocations), so that losing the orchestrator's state
// loses no location. A pass with failures is tried again, a bounded
// number of times.
func recordLocations(ctx context.Context, srv *api.Server, log *slog.Logger) {
	for try := 1; ; try++ {
		b, err := srv.RecordLocations(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil && b.Left == 0 {
			if b.Recorded > 0 || b.Unknown > 0 {
				log.Info("locations of published repositories recorded", "published", b.Published, "recorded", b.Recorded, "unknown to the orchestrator", b.Unknown)
			}
			return
		}
		if try == locationRetries {
			log.Warn("locations of published repositories not all recorded: a reindex of those repositories needs them after a loss of the orchestrator's state", "left", b.Left, "error", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(locationRetryEvery):
		}
	}
}
