package natsq_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"codectx/pkg/queue"
)

// BenchmarkPublishToHandled is the time from a publish to its handler's
// start on an idle stage, with workers waiting (the one-file push's case),
// for one share and with other shares' messages coming and going.
func BenchmarkPublishToHandled(b *testing.B) {
	for _, others := range []int{0, 3} {
		b.Run(fmt.Sprintf("other shares %d", others), func(b *testing.B) {
			q := connect(b, startServer(b))
			got := make(chan string, 64)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go q.Consume(ctx, queue.Config{Stage: "parse", Workers: 4}, func(_ context.Context, m queue.Message) error {
				got <- m.Subject
				return nil
			})
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				for o := range others {
					publish(b, q, "parse", fmt.Sprintf("tother%d.x", o), "o", "")
				}
				start := time.Now()
				publish(b, q, "parse", "tmine.x", "m", "")
				for n := 0; n < others+1; {
					if <-got == "tmine.x" {
						lat = append(lat, time.Since(start))
					}
					n++
				}
			}
			slices.Sort(lat)
			at := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(at(0.5), "p50-us")
			b.ReportMetric(at(0.99), "p99-us")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-us")
		})
	}
}
