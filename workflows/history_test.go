package workflows

import (
	"context"
	"flag"
	"os"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
)

var update = flag.Bool("update", false, "record testdata/*_history.json for TestReplay")

// Updating reports whether the tests record the replay histories again
// (-update).
func Updating() bool { return *update }

// RecordHistory writes the history of a workflow run (runID "" for the
// latest) as JSON for the replayer.
func RecordHistory(ctx context.Context, t *testing.T, c client.Client, id, runID, file string) {
	t.Helper()
	h := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
