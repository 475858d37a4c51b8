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
	"go.temporal.io/sdk/converter"
)

var update = flag.Bool("update", false, "record testdata/*_history.json for TestReplay")

// Updating reports whether the tests record the replay histories again
// (-update).
func Updating() bool { return *update }

// History reads the history of a workflow run (runID "" for the latest).
func History(ctx context.Context, t *testing.T, c client.Client, id, runID string) *historypb.History {
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
	return h
}

// RecordHistory writes the history of a workflow run (runID "" for the
// latest) as JSON for the replayer.
func RecordHistory(ctx context.Context, t *testing.T, c client.Client, id, runID, file string) {
	t.Helper()
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(History(ctx, t, c, id, runID))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// releaseSeq is what a RepoWorkflow run's history holds of giving back
// its tenant slot before it continues as new, in order: the release
// sent, the release-delivered version marker, the release delivered, and
// the continue-as-new. Replay cannot check that the wait for the delivery
// is still there (a marker no code asks for is skipped, and a delivery is
// no command), so the tests check the order of the events.
func releaseSeq(h *historypb.History) []string {
	var seq []string
	for _, e := range h.Events {
		switch e.EventType {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			var id string
			if p := e.GetMarkerRecordedEventAttributes().GetDetails()["change-id"]; p != nil && len(p.Payloads) > 0 {
				_ = converter.GetDefaultDataConverter().FromPayload(p.Payloads[0], &id)
			}
			if id == releaseDeliveredVersion {
				seq = append(seq, "marker")
			}
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
			seq = append(seq, "release sent")
		case enumspb.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED:
			seq = append(seq, "release delivered")
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			seq = append(seq, "continued as new")
		}
	}
	return seq
}

// wantReleaseSeq is releaseSeq of a run that gives back its slot.
var wantReleaseSeq = []string{"release sent", "marker", "release delivered", "continued as new"}
