package workflows_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/index"
	"codectx/pkg/queue"
	"codectx/workflows"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
)

// marks records when the queue workers started and finished each job, by
// stage (the in-process stack shares one clock with the benchmark).
type marks struct {
	mu sync.Mutex
	m  []mark
}

type mark struct {
	stage      string
	start, end time.Time
}

func (k *marks) wrap(stage string, h queue.Handler) queue.Handler {
	return func(ctx context.Context, m queue.Message) error {
		start := time.Now()
		err := h(ctx, m)
		k.mu.Lock()
		k.m = append(k.m, mark{stage: stage, start: start, end: time.Now()})
		k.mu.Unlock()
		return err
	}
}

// since returns the first start and last end of stage's jobs after t.
func (k *marks) since(stage string, t time.Time) (start, end time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range k.m {
		if m.stage != stage || m.start.Before(t) {
			continue
		}
		if start.IsZero() || m.start.Before(start) {
			start = m.start
		}
		if m.end.After(end) {
			end = m.end
		}
	}
	return start, end
}

// breakdown is the time of each step of one push after its signal was
// sent, in order: what the RepoWorkflow and SnapshotWorkflow histories
// recorded, what the workers did, and when HEAD was seen.
type breakdown struct {
	names []string
	at    map[string]time.Duration
}

func (d *breakdown) add(name string, t, t0 time.Time) {
	if t.IsZero() {
		return
	}
	if d.at == nil {
		d.at = map[string]time.Duration{}
	}
	if _, ok := d.at[name]; !ok {
		d.names = append(d.names, name)
	}
	d.at[name] = t.Sub(t0)
}

// pushBreakdown reads the histories of the push's workflows: the last
// signal of the RepoWorkflow and the child it started, and the child's
// activities (scheduled, started, completed).
func (e *env) pushBreakdown(b *testing.B, repo string, t0, head time.Time) breakdown {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Wait for the snapshot to finish (GC runs after HEAD moved).
	var st workflows.RepoStatus
	for {
		var err error
		st, err = workflows.Status(ctx, e.c, index.DefaultTenant, repo)
		if err == nil && st.Covered == st.Received && st.State == workflows.StateIdle {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("snapshot not finished: %+v, %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var d breakdown
	d.add("signal sent", t0, t0)
	id := workflows.RepoWorkflowID(index.DefaultTenant, repo)
	child := workflows.SnapshotWorkflowID(index.DefaultTenant, repo, st.Snapshots-1, true)
	var signaled, initiated time.Time
	e.history(b, ctx, id, func(ev historyEvent) {
		switch ev.typ {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if !ev.at.Before(t0) {
				signaled = ev.at
			}
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			if !signaled.IsZero() && ev.child == child {
				initiated = ev.at
			}
		}
	})
	d.add("signal recorded", signaled, t0)
	d.add("child initiated", initiated, t0)
	names := map[int64]string{}
	e.history(b, ctx, child, func(ev historyEvent) {
		switch ev.typ {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			d.add("child started", ev.at, t0)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if _, ok := d.at["child's first workflow task started"]; !ok {
				d.add("child's first workflow task started", ev.at, t0)
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			names[ev.id] = ev.activity
			d.add(ev.activity+" scheduled", ev.at, t0)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			d.add(names[ev.scheduled]+" started", ev.at, t0)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			d.add(names[ev.scheduled]+" completed", ev.at, t0)
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if ev.activity != "" {
				d.add(ev.activity+" (local) recorded", ev.at, t0)
			}
		}
	})
	for _, stage := range []string{"parse", "graph"} {
		s, f := e.marks.since(stage, t0)
		d.add(stage+" job started", s, t0)
		d.add(stage+" job finished", f, t0)
	}
	d.add("HEAD seen", head, t0)
	sort.SliceStable(d.names, func(i, j int) bool { return d.at[d.names[i]] < d.at[d.names[j]] })
	return d
}

type historyEvent struct {
	typ       enumspb.EventType
	at        time.Time
	id        int64
	scheduled int64  // of an activity's started and completed events
	activity  string // of a scheduled activity, or a local activity's marker
	child     string // workflow ID of an initiated child
}

func (e *env) history(b *testing.B, ctx context.Context, id string, f func(historyEvent)) {
	b.Helper()
	it := e.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatalf("history of %s: %v", id, err)
		}
		h := historyEvent{typ: ev.GetEventType(), at: ev.GetEventTime().AsTime(), id: ev.GetEventId()}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			h.activity = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			h.scheduled = a.GetScheduledEventId()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			h.scheduled = a.GetScheduledEventId()
		}
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			h.child = a.GetWorkflowId()
		}
		if a := ev.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "LocalActivity" {
			h.activity = localActivityType(a.GetDetails())
		}
		f(h)
	}
}

// localActivityType is the activity type named in a local activity's
// marker details ("" if it cannot be read).
func localActivityType(details map[string]*commonpb.Payloads) string {
	p, ok := details["data"]
	if !ok || len(p.GetPayloads()) == 0 {
		return ""
	}
	s := string(p.GetPayloads()[0].GetData())
	if i := strings.Index(s, `"ActivityType":"`); i >= 0 {
		s = s[i+len(`"ActivityType":"`):]
		if j := strings.IndexByte(s, '"'); j >= 0 {
			return s[:j]
		}
	}
	return ""
}

// meanBreakdown prints each step's mean time over the pushes and reports
// it as a metric.
func meanBreakdown(b *testing.B, ds []breakdown) {
	if len(ds) == 0 {
		return
	}
	sum := map[string]time.Duration{}
	n := map[string]int{}
	var order []string
	for _, d := range ds {
		for _, name := range d.names {
			if n[name] == 0 {
				order = append(order, name)
			}
			sum[name] += d.at[name]
			n[name]++
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		return sum[order[i]]/time.Duration(n[order[i]]) < sum[order[j]]/time.Duration(n[order[j]])
	})
	var lines []string
	for _, name := range order {
		mean := sum[name] / time.Duration(n[name])
		lines = append(lines, fmt.Sprintf("%7.1f ms  %s", float64(mean.Microseconds())/1000, name))
	}
	b.Logf("mean time after the signal, %d pushes:\n%s", len(ds), strings.Join(lines, "\n"))
}
