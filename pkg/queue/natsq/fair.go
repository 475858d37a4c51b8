package natsq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	"codectx/pkg/queue"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Fair consumption. A stage's messages are taken in turn from its shares
// (the first token of their subject: a tenant in the pipeline), not in
// the order they were published: a share that queued a thousand messages
// does not delay another's one by a thousand. Each share has its own
// durable pull consumer filtered on its subjects (a work-queue stream
// takes consumers whose filters do not overlap), and each Consume call
// goes round its shares, taking one message of the next share that has
// one. Shares are learnt from notices (announce: of the publishers, and
// of the consumers for retries) and, for what no notice announces (some
// redeliveries, a lost notice, messages published before the consumer
// started), from the stream's subject counts, read at most every rescan
// (scan). Within a share, messages keep their order.
//
// A share whose messages all wait (for a retry delay, or in another
// process's hands) is counted by every scan but has nothing to hand out.
// One whose pull found nothing rests: while its subjects' counts stay as
// they were, the scans add it again after 1, 2, 4, ... scans, at most
// restMax apart. A notice for it, a change of its counts, a message taken
// from it or its consumer's removal ends the rest. A process announces a
// retry it scheduled when its delay ends, and a message it hands back as
// it stops; what nobody announces and changes no count, a retry whose
// process stopped before its delay ended or a redelivery after an ack
// timeout (a process crashed or hung), is taken up to restMax after it is
// due.
const (
	// newRoot is the root of the core NATS subjects on which publishers
	// announce a stored message's share: codectx_new.<stage>.
	newRoot = "codectx_new"
	// settle is how long after a share's notice its message is looked
	// for, every settleStep, before the share leaves the ring (pull).
	settle     = 20 * time.Millisecond
	settleStep = 2 * time.Millisecond
	// oldConsumer is the single unfiltered consumer of versions before
	// fair consumption; its filter overlaps every share's.
	oldConsumer = "workers"
	// sharePrefix begins the name of every share's consumer.
	sharePrefix = "share_"
)

// shareIdle is when the server removes a share's consumer nobody
// pulled from: far above any handler's run, so a consumer is never
// removed under a message being handled; a variable for tests.
var shareIdle = time.Hour

// rescan is how often a consumer reads the stream's shares (while idle,
// and between the notices while busy); a variable for tests.
var rescan = 500 * time.Millisecond

// restMax bounds how long scans leave out a share found empty whose
// counts have not changed (rest): the longest a retry that only a scan
// finds waits past its delay. A variable for tests.
var restMax = 4 * time.Second

// shareConsumer names share's durable consumer: a hash, since a share
// token may hold characters a consumer name may not.
func shareConsumer(share string) string {
	h := sha256.Sum256([]byte(share))
	return sharePrefix + hex.EncodeToString(h[:10])
}

// shareOf is the share of a stream subject of stage ("" for the bare
// codectx.<stage>).
func shareOf(stage, subject string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(subject, "codectx."+stage), ".")
	share, _, _ := strings.Cut(rest, ".")
	return share
}

// shareFilters are the stream subjects of share.
func shareFilters(stage, share string) []string {
	if share == "" {
		return []string{"codectx." + stage}
	}
	s := subjectFor("codectx", stage, share)
	return []string{s, s + ".>"}
}

// turns hands out a stage's messages share by share, to the workers of
// one Consume call.
type turns struct {
	q      *Queue
	stage  string
	cfg    jetstream.ConsumerConfig // all but the name and filters
	stream jetstream.Stream

	mu       sync.Mutex
	ring     []string             // shares that may hold a message, in turn order
	adds     map[string]uint64    // times each share was added (never reset): a drop after a later add is void
	added    map[string]time.Time // when each share was last added
	next     int                  // the ring's next turn
	cons     map[string]jetstream.Consumer
	scanned  time.Time
	evicted  time.Time            // the last removeIdle
	wake     chan struct{}        // a share may have a message (buffer 1)
	timers   map[*time.Timer]bool // pending re-adds (later)
	checks   map[string]bool      // shares with a recheck pending (recheck)
	shutdown bool
	seed     maphash.Seed
	marks    map[string]uint64 // each share's mark at the last scan (scan)
	rests    map[string]*rest  // shares found empty with their mark unchanged
}

// rest is the backoff of a share found empty by a pull: scans leave it
// out while its mark (a hash of its subjects' counts) is the one it had
// when found empty.
type rest struct {
	mark uint64
	n    int    // times found empty in a row with this mark
	skip int    // scans left out before one adds it again
	adds uint64 // its count of adds when last found empty: one finding per add
}

// subjectCount is what a share's mark hashes, for each of its subjects.
type subjectCount struct {
	subject string
	n       uint64
}

func newTurns(ctx context.Context, q *Queue, cfg queue.Config) (*turns, func(), error) {
	stream, err := q.js.Stream(ctx, streamName(cfg.Stage))
	if err != nil {
		return nil, nil, err
	}
	t := &turns{
		q:      q,
		stage:  cfg.Stage,
		stream: stream,
		cons:   map[string]jetstream.Consumer{},
		adds:   map[string]uint64{},
		added:  map[string]time.Time{},
		timers: map[*time.Timer]bool{},
		checks: map[string]bool{},
		rests:  map[string]*rest{},
		seed:   maphash.MakeSeed(),
		wake:   make(chan struct{}, 1),
		cfg: jetstream.ConsumerConfig{
			AckPolicy: jetstream.AckExplicitPolicy,
			AckWait:   cfg.AckWait,
			// One delivery more than handler attempts: it only dead-letters
			// a message whose final attempt timed out.
			MaxDeliver:        cfg.MaxDeliver + 1,
			MaxAckPending:     max(1000, cfg.Workers),
			InactiveThreshold: shareIdle,
		},
	}
	if err := t.removeOld(ctx); err != nil {
		return nil, nil, err
	}
	sub, err := q.nc.Subscribe(newRoot+"."+cfg.Stage, func(m *nats.Msg) {
		if share := string(m.Data); validShare(share) {
			t.add(share, true)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if err := q.nc.Flush(); err != nil {
		sub.Unsubscribe()
		return nil, nil, err
	}
	stop := func() {
		sub.Unsubscribe()
		t.mu.Lock()
		t.shutdown = true
		for tm := range t.timers {
			tm.Stop()
		}
		t.mu.Unlock()
	}
	return t, stop, nil
}

// removeOld removes the unfiltered consumer of versions before fair
// consumption, which would keep every share's consumer from being created
// (its unacknowledged messages stay in the stream, for the shares').
func (t *turns) removeOld(ctx context.Context) error {
	err := t.q.js.DeleteConsumer(ctx, streamName(t.stage), oldConsumer)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("remove the unfiltered consumer: %w", err)
	}
	return nil
}

// errWQNotUnique is the server's error code for a consumer whose filter
// overlaps another's on a work-queue stream (JSConsumerWQConsumerNotUniqueErr).
const errWQNotUnique jetstream.ErrorCode = 10100

// overlaps reports the server's refusal of a consumer whose filter
// overlaps another's on a work-queue stream.
func overlaps(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == errWQNotUnique
}

// add puts share in the ring, if it is not there, and wakes a worker.
// fresh: a message of it was just announced (or is just due again); it
// ends the share's rest.
func (t *turns) add(share string, fresh bool) {
	t.mu.Lock()
	if !slices.Contains(t.ring, share) {
		t.ring = append(t.ring, share)
	}
	t.adds[share]++
	if fresh {
		t.added[share] = time.Now()
		delete(t.rests, share)
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// later adds share again after d. fresh: a message of it was handed back
// with a retry delay, and it announces the redelivery when due (this
// process's workers may all be busy, and the others' scans may leave the
// share at rest). Not fresh: it was just announced and its pull found
// nothing yet.
func (t *turns) later(share string, d time.Duration, fresh bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shutdown {
		return
	}
	var tm *time.Timer
	// The func takes t.mu first: it runs once tm is set and recorded.
	tm = time.AfterFunc(d, func() {
		t.mu.Lock()
		delete(t.timers, tm)
		delete(t.checks, share) // a recheck may be asked for again
		t.mu.Unlock()
		t.add(share, fresh)
		if fresh {
			t.q.announce(t.stage, share)
		}
	})
	t.timers[tm] = true
}

// recheck asks share again after settleStep (later), unless a recheck of
// it is pending already.
func (t *turns) recheck(share string) {
	t.mu.Lock()
	pending := t.checks[share]
	t.checks[share] = true
	t.mu.Unlock()
	if !pending {
		t.later(share, settleStep, false)
	}
}

// maxShare bounds a share token taken from a notice.
const maxShare = 128

// validShare accepts "" (the bare subject) or one subject token: a notice
// naming anything else is dropped (notices come from the stage's
// publishers, but a bad one must not make a consumer of every worker fail).
func validShare(s string) bool {
	return len(s) <= maxShare && !strings.ContainsAny(s, ".*> \t\r\n")
}

// due reports whether rescan has passed since *last (a time under t.mu),
// and if so sets it to now: what runs on it runs at most once a rescan.
func (t *turns) due(last *time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(*last) < rescan {
		return false
	}
	*last = time.Now()
	return true
}

// scan adds the shares that hold messages in the stream, if the last
// scan is older than rescan.
func (t *turns) scan(ctx context.Context) error {
	if !t.due(&t.scanned) {
		return nil
	}
	// The stream holds only the stage's subjects: ">" lists them all, the
	// bare codectx.<stage> (share "") included.
	info, err := t.stream.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return err
	}
	marks := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		if n > 0 {
			// A sum: the same whatever the order the subjects come in.
			marks[shareOf(t.stage, subj)] += maphash.Comparable(t.seed, subjectCount{subj, n})
		}
	}
	for _, s := range t.counted(marks) {
		t.add(s, false)
	}
	return nil
}

// counted takes a scan's marks of the shares that hold messages, and
// returns those to add, sorted: all but the shares at rest with their mark
// unchanged, which it counts down. A rest ends with a change of mark, or
// when the share holds nothing.
func (t *turns) counted(marks map[string]uint64) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.marks = marks
	for s, r := range t.rests {
		if m, ok := marks[s]; !ok || m != r.mark {
			delete(t.rests, s)
		}
	}
	out := make([]string, 0, len(marks))
	for s := range marks {
		if r := t.rests[s]; r != nil && r.skip > 0 {
			r.skip--
			continue
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// rest records that share's pull found nothing when its count of adds was
// adds (t.mu held): while its mark stays the one the last scan counted,
// the scans leave it out 0, 1, 3, 7, ... times in a row, so that they
// add it at most restMax apart. A share the last scan did not count is
// left to the next, which counts it.
func (t *turns) rest(share string, adds uint64) {
	m, ok := t.marks[share]
	if !ok {
		return
	}
	r := t.rests[share]
	if r == nil || r.mark != m {
		r = &rest{mark: m}
		t.rests[share] = r
	}
	if r.adds == adds {
		return // another worker's pull of the same turn
	}
	r.adds = adds
	r.n = min(r.n+1, 30)
	r.skip = min(1<<(r.n-1), max(1, int(restMax/rescan))) - 1
}

// entry is a share in one round of a worker, with its count of adds when
// the round began.
type entry struct {
	share string
	adds  uint64
	fresh bool // added within settle
}

// round returns the ring from the share whose turn it is on, and moves
// the turn on by one. A worker's round visits every share in the ring
// when it began, however other workers' rounds interleave with it.
func (t *turns) round() []entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.ring)
	if n == 0 {
		return nil
	}
	start := t.next % n
	t.next = start + 1
	out := make([]entry, n)
	for i := range out {
		s := t.ring[(start+i)%n]
		out[i] = entry{s, t.adds[s], time.Since(t.added[s]) < settle}
	}
	return out
}

// served moves the turn past share, whose message a round took when its
// count of adds was adds. Unless it was announced again since, it is no
// longer fresh: the message announced was most likely that one, and an
// idle worker woken to look for more should not wait for it.
func (t *turns) served(share string, adds uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.ring, share); i >= 0 {
		t.next = i + 1
	}
	if t.adds[share] == adds {
		delete(t.added, share)
	}
	delete(t.rests, share)
}

// drop takes share out of the ring: it had no message to hand out when
// its count of adds was adds. If it was added since (a message announced
// after the pull found none), it stays. empty: its pull found nothing
// (not failed), and it rests.
func (t *turns) drop(share string, adds uint64, empty bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.adds[share] != adds {
		return
	}
	if i := slices.Index(t.ring, share); i >= 0 {
		t.ring = slices.Delete(t.ring, i, i+1)
		if i < t.next {
			t.next--
		}
	}
	if empty {
		t.rest(share, adds)
	}
}

// consumer returns share's consumer, created (or found) on first use.
func (t *turns) consumer(ctx context.Context, share string) (jetstream.Consumer, error) {
	t.mu.Lock()
	c := t.cons[share]
	t.mu.Unlock()
	if c != nil {
		return c, nil
	}
	cfg := t.cfg
	cfg.Durable = shareConsumer(share)
	cfg.FilterSubjects = shareFilters(t.stage, share)
	c, err := t.q.js.CreateOrUpdateConsumer(ctx, streamName(t.stage), cfg)
	if err != nil && overlaps(err) {
		// An older version's worker started meanwhile and made its
		// unfiltered consumer again.
		if err := t.removeOld(ctx); err != nil {
			return nil, err
		}
		c, err = t.q.js.CreateOrUpdateConsumer(ctx, streamName(t.stage), cfg)
	}
	if errors.Is(err, jetstream.ErrMaximumConsumersLimit) && t.removeIdle(ctx) > 0 {
		c, err = t.q.js.CreateOrUpdateConsumer(ctx, streamName(t.stage), cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("consumer of share %q: %w", share, err)
	}
	t.mu.Lock()
	t.cons[share] = c
	t.mu.Unlock()
	return c, nil
}

// removeIdle removes the stage's share consumers that have nothing to
// hand out and nothing handed out, at most once a rescan, and returns how
// many it removed. The server removes an idle consumer only an hour after
// its last pull, and a server that bounds a stream's consumers (an
// account's max_consumers) refuses a new share's consumer while they stay:
// that share's messages waited for the hour. A share whose consumer is
// removed gets a new one at its next turn, in any process.
func (t *turns) removeIdle(ctx context.Context) int {
	if !t.due(&t.evicted) {
		return 0
	}
	n := 0
	list := t.stream.ListConsumers(ctx)
	for info := range list.Info() {
		if !strings.HasPrefix(info.Name, sharePrefix) || info.NumPending > 0 || info.NumAckPending > 0 || info.NumRedelivered > 0 || info.NumWaiting > 0 {
			continue
		}
		if t.q.js.DeleteConsumer(ctx, streamName(t.stage), info.Name) == nil {
			n++
		}
	}
	return n
}

func (t *turns) forget(share string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.cons, share)
	delete(t.rests, share)
}

// take returns the next share's next message, going round the ring once;
// nil if no share has one to hand out now.
func (t *turns) take(ctx context.Context) (jetstream.Msg, string, error) {
	if err := t.scan(ctx); err != nil && fatal(err) {
		return nil, "", err
	}
	var failed error
	for _, e := range t.round() {
		msg, err := t.pull(ctx, e)
		if msg != nil {
			return msg, e.share, nil
		}
		if err != nil {
			if fatal(err) {
				return nil, "", err
			}
			// This share's turn failed (its consumer could not be made, a
			// pull failed): the others still take theirs. It leaves the
			// ring; the next scan brings it back if it holds messages.
			t.drop(e.share, e.adds, false)
			failed = err
		}
	}
	return nil, "", failed
}

// pull asks e's share for one message, without waiting. A share that has
// none leaves the ring and rests, unless it was announced within settle:
// the server tells a stream's consumers of a stored message shortly after
// acknowledging it to the publisher, so a pull made on the notice can
// find nothing yet. Such a share is asked again every settleStep (by an
// idle worker; waiting for it here would hold this worker from the
// others' turns, and it may well have been taken by another worker).
func (t *turns) pull(ctx context.Context, e entry) (jetstream.Msg, error) {
	c, err := t.consumer(ctx, e.share)
	if err != nil {
		return nil, err
	}
	batch, err := c.FetchNoWait(1)
	if err == nil {
		if msg := <-batch.Messages(); msg != nil {
			t.served(e.share, e.adds)
			return msg, nil
		}
		err = batch.Error()
	}
	switch {
	case err == nil, errors.Is(err, jetstream.ErrNoMessages), errors.Is(err, nats.ErrTimeout):
		if e.fresh {
			t.recheck(e.share)
		} else {
			t.drop(e.share, e.adds, true)
		}
		return nil, nil
	case gone(err):
		// Removed (idle, or by hand): made again on its next turn.
		t.forget(e.share)
		t.add(e.share, false)
		return nil, nil
	}
	return nil, err
}

// idle waits until a share may have a message, the next scan is due, or
// ctx ends.
func (t *turns) idle(ctx context.Context) {
	tm := time.NewTimer(rescan)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-t.wake:
	case <-tm.C:
	}
}

// gone reports a pull from a consumer that no longer exists (a request to
// a removed consumer has no responder).
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, nats.ErrNoResponders)
}

// fatal reports an error that ends a worker: its connection is closed.
func fatal(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed)
}

// announce tells the stage's consumers that share has a new message (best
// effort: a lost notice leaves them to their next scan).
func (q *Queue) announce(stage, share string) {
	q.nc.Publish(newRoot+"."+stage, []byte(share))
}
