// Package natsq is the NATS JetStream adapter of the queue port.
//
// Each stage has a work-queue stream CODECTX_<STAGE> on subjects
// codectx.<stage>[.<subject>], and every message is handled by one worker
// of any process consuming that stage. Workers take the messages of the
// stage's shares (the first token of a subject: a tenant in the pipeline)
// in turn, each share in the order published, through one durable pull
// consumer per share (fair.go): a share with a thousand messages queued
// delays another's next one by about one message per worker, not by a
// thousand.
// Failed messages are retried after queue.Config.Backoff by a nak with
// that delay (none: about 10 ms), sent as a request: answered once the
// server stored it, a retry survives a server restart or a process that
// stops right after it (nakAfter);
// a message whose last allowed delivery fails is copied to the stream
// CODECTX_DLQ (subject codectx_dlq.<stage>[.<subject>], headers Codectx-*)
// and acked; a queue.Permanent error dead-letters at once. A message whose
// last delivery timed out (worker crash) gets one extra delivery that
// dead-letters it without running the handler. Each dead letter carries its
// cause (header Codectx-Cause: panic, timeout, permanent or error), so a
// waiting caller can tell a bad message from a failing store.
//
// A stage with a share limit (SetShareLimit) stores each message under
// codectx.<stage>.<share>, the first token of its subject, with the whole
// subject in the header Codectx-Subject; the stream holds at most the
// limit of messages per share (MaxMsgsPerSubject with DiscardNewPerSubject)
// and refuses more with queue.ErrShareFull. Consumers, dead letters and
// Watch see the whole subject as before. A limit lower than the stream's
// is written only once no share holds more than it: NATS applies a
// lowered per-subject limit to the messages it holds, deleting the oldest
// (queued work), and keeps their ids, so publishing them again is dropped
// as a duplicate. Until then this client refuses a share's messages past
// its own limit itself.
package natsq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"codectx/pkg/queue"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	dlqStream  = "CODECTX_DLQ"
	dlqSubject = "codectx_dlq"

	hdrStage      = "Codectx-Stage"
	hdrSubject    = "Codectx-Subject"
	hdrReason     = "Codectx-Reason"
	hdrDeliveries = "Codectx-Deliveries"
	hdrMsgID      = "Codectx-Msg-Id"
	hdrCause      = "Codectx-Cause"

	dedupWindow = 2 * time.Minute // Nats-Msg-Id duplicates are dropped within it
	// DeadLetterMaxAge is how long a dead letter is kept: long enough to
	// inspect and replay, short enough that the stream does not grow
	// without bound.
	DeadLetterMaxAge = 14 * 24 * time.Hour
	deadLetterMax    = 100000          // at most this many dead letters, oldest dropped first
	pollWait         = 5 * time.Second // one pull request's lifetime
	// doneRoot is the root of the core NATS subjects on which consumers
	// announce the messages they finished (Watch).
	doneRoot = "codectx_done"
	// watchBuffer bounds the notifications a watcher has not read yet;
	// more are dropped (the watcher's poll finds what they announced).
	watchBuffer = 256
)

// Queue is a client of the NATS server.
type Queue struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu      sync.Mutex
	streams map[string]bool  // streams known to exist; with "+", configured by this client
	dlq     jetstream.Stream // the dead-letter stream, once looked up
	shares  map[string]int   // stage: share limit (SetShareLimit)
	// lowering holds the streams whose per-subject limit is still above
	// this client's (a share holds more than it): when to check again.
	lowering map[string]time.Time
	// pub is held shared by publishes, and exclusively while a stream's
	// limit is lowered: a publish of this client under the old limit
	// does not land between the check of the shares and the update.
	pub sync.RWMutex
	// reconnects are called after each reconnection (OnHeadGone).
	reconnects map[int]func()
	nextHook   int

	acked, retried, panics, dead atomic.Int64
}

// Connect dials the NATS server at url; opts add to the defaults (TLS:
// nats.Secure).
func Connect(ctx context.Context, url string, opts ...nats.Option) (*Queue, error) {
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name("codectx"), nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("queue connect %s: %w", Redact(url), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("queue connect %s: %w", Redact(url), err)
	}
	q := &Queue{nc: nc, js: js, streams: map[string]bool{}, shares: map[string]int{}, lowering: map[string]time.Time{}, reconnects: map[int]func(){}}
	nc.SetReconnectHandler(q.reconnected)
	if err := q.ensureDLQ(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return q, nil
}

// JetStream is the queue's JetStream context, for other users of the
// same server (the session store's key-value bucket).
func (q *Queue) JetStream() jetstream.JetStream { return q.js }

// Close closes the connection; running Consume calls return.
func (q *Queue) Close() { q.nc.Close() }

// Stats returns counters over all consumers of this client.
func (q *Queue) Stats() queue.Stats {
	return queue.Stats{
		Acked:        q.acked.Load(),
		Retried:      q.retried.Load(),
		Panics:       q.panics.Load(),
		DeadLettered: q.dead.Load(),
	}
}

// SetShareLimit bounds the messages of stage per share, the first token
// of their subject: a publish past n messages of its share in the stream
// (waiting, being handled, or waiting for a retry) fails with
// queue.ErrShareFull. n < 1: no bound. Set it before the stage's first use
// by this client, and alike on every client of the server: each client's
// first use writes the stream's configuration.
func (q *Queue) SetShareLimit(stage string, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shares[stage] = max(n, 0)
}

func (q *Queue) shareLimit(stage string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shares[stage]
}

func streamName(stage string) string { return "CODECTX_" + strings.ToUpper(stage) }

func subjectFor(root, stage, subject string) string {
	if subject == "" {
		return root + "." + stage
	}
	return root + "." + stage + "." + subject
}

// ensure creates (or updates) a stream once per client.
func (q *Queue) ensure(ctx context.Context, cfg jetstream.StreamConfig) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.streams[cfg.Name+"+"] {
		return nil
	}
	if cfg.MaxMsgsPerSubject > 0 {
		if next, ok := q.lowering[cfg.Name]; ok && time.Now().Before(next) {
			return nil
		}
		q.pub.Lock()
		defer q.pub.Unlock()
		over, err := q.heldPast(ctx, cfg)
		if err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
		if over {
			// Written now, the lower limit would delete queued messages:
			// keep the stream's until its shares are down to ours.
			q.lowering[cfg.Name] = time.Now().Add(lowerRetry)
			q.streams[cfg.Name] = true
			return nil
		}
		delete(q.lowering, cfg.Name)
	}
	if _, err := q.js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	q.streams[cfg.Name], q.streams[cfg.Name+"+"] = true, true
	return nil
}

// forgetStream drops what this client knows of the stream name: the next
// ensure or exist asks the server again.
func (q *Queue) forgetStream(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.streams, name)
	delete(q.streams, name+"+")
	delete(q.lowering, name)
}

// lowerRetry is how often a client whose share limit is below its
// stream's checks whether the shares are down to it.
const lowerRetry = time.Second

// heldPast reports whether cfg's stream exists with a higher per-subject
// limit than cfg's (or none) and one of its subjects holds more messages
// than cfg's limit: writing cfg would delete them.
func (q *Queue) heldPast(ctx context.Context, cfg jetstream.StreamConfig) (bool, error) {
	s, err := q.js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if old := s.CachedInfo().Config.MaxMsgsPerSubject; old > 0 && old <= cfg.MaxMsgsPerSubject {
		return false, nil
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return false, err
	}
	for _, n := range info.State.Subjects {
		if n > uint64(cfg.MaxMsgsPerSubject) {
			return true, nil
		}
	}
	return false, nil
}

// shareHolds reports whether the share subject subj of stage holds n
// messages or more (while the stream's limit is above this client's).
func (q *Queue) shareHolds(ctx context.Context, stage, subj string, n int) (bool, error) {
	s, err := q.js.Stream(ctx, streamName(stage))
	if err != nil {
		return false, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return false, err
	}
	return info.State.Subjects[subj] >= uint64(n), nil
}

func (q *Queue) isLowering(stage string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.lowering[streamName(stage)]
	return ok
}

// exist creates a stream that does not exist, and leaves the
// configuration of one that does: consumers do not own a stage's limits,
// its publishers do (a worker started without a share limit does not lift
// the orchestrator's).
func (q *Queue) exist(ctx context.Context, cfg jetstream.StreamConfig) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.streams[cfg.Name] {
		return nil
	}
	_, err := q.js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = q.js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil // created meanwhile by another client
		}
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	q.streams[cfg.Name] = true
	return nil
}

// ensureStage writes the configuration of stage's stream (publishers);
// existStage only makes sure it exists (consumers).
func (q *Queue) ensureStage(ctx context.Context, stage string) error {
	cfg, err := q.stageConfig(stage)
	if err != nil {
		return err
	}
	return q.ensure(ctx, cfg)
}

func (q *Queue) existStage(ctx context.Context, stage string) error {
	cfg, err := q.stageConfig(stage)
	if err != nil {
		return err
	}
	return q.exist(ctx, cfg)
}

func (q *Queue) stageConfig(stage string) (jetstream.StreamConfig, error) {
	if err := queue.ValidStage(stage); err != nil {
		return jetstream.StreamConfig{}, err
	}
	cfg := jetstream.StreamConfig{
		Name:       streamName(stage),
		Subjects:   []string{"codectx." + stage, "codectx." + stage + ".>"},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Duplicates: dedupWindow,
	}
	if n := q.shareLimit(stage); n > 0 {
		cfg.MaxMsgsPerSubject = int64(n)
		cfg.Discard = jetstream.DiscardNew
		cfg.DiscardNewPerSubject = true
	}
	return cfg, nil
}

func (q *Queue) ensureDLQ(ctx context.Context) error {
	return q.ensure(ctx, jetstream.StreamConfig{
		Name:       dlqStream,
		Subjects:   []string{dlqSubject + ".>"},
		Retention:  jetstream.LimitsPolicy,
		Storage:    jetstream.FileStorage,
		Duplicates: dedupWindow,
		MaxAge:     DeadLetterMaxAge,
		MaxMsgs:    deadLetterMax,
		Discard:    jetstream.DiscardOld,
	})
}

// validSubject accepts "" or dot-separated non-empty tokens without
// wildcards or whitespace.
func validSubject(s string) error {
	if s == "" {
		return nil
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("queue: invalid subject %q", s)
		}
	}
	return nil
}

// Publish adds a job to stage. A non-empty msgID deduplicates: a second
// publish with the same id within two minutes is dropped (and succeeds).
func (q *Queue) Publish(ctx context.Context, stage, subject string, data []byte, msgID string) error {
	if err := validSubject(subject); err != nil {
		return err
	}
	if err := q.ensureStage(ctx, stage); err != nil {
		return fmt.Errorf("publish %s: %w", stage, err)
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	msg := nats.NewMsg(subjectFor("codectx", stage, subject))
	msg.Data = data
	if limit := q.shareLimit(stage); limit > 0 && subject != "" {
		share, _, _ := strings.Cut(subject, ".")
		msg.Subject = subjectFor("codectx", stage, share)
		msg.Header.Set(hdrSubject, subject)
		if q.isLowering(stage) {
			// The stream still takes more: hold the share to ours (when
			// its count cannot be read, the stream's limit bounds it).
			if full, err := q.shareHolds(ctx, stage, msg.Subject, limit); err == nil && full {
				return fmt.Errorf("publish %s %s: %w", stage, subject, queue.ErrShareFull)
			}
		}
	}
	q.pub.RLock()
	_, err := q.js.PublishMsg(ctx, msg, opts...)
	q.pub.RUnlock()
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		// No stream took the subject: the server lost it (restarted
		// without its JetStream state, or an operator deleted it) since
		// this client made it. Made once per client, it would never be
		// made again, and every publish of the stage fail until a
		// restart: make it again, and publish once more.
		q.forgetStream(streamName(stage))
		if err = q.ensureStage(ctx, stage); err != nil {
			return fmt.Errorf("publish %s: %w", stage, err)
		}
		q.pub.RLock()
		_, err = q.js.PublishMsg(ctx, msg, opts...)
		q.pub.RUnlock()
	}
	if err != nil {
		if shareFull(err) {
			return fmt.Errorf("publish %s %s: %w", stage, subject, queue.ErrShareFull)
		}
		return fmt.Errorf("publish %s %s: %w", stage, subject, err)
	}
	q.announce(stage, shareOf(stage, msg.Subject))
	return nil
}

// shareFull reports whether err is the server's refusal of a message past
// its subject's limit (DiscardNewPerSubject).
func shareFull(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && strings.Contains(api.Description, "maximum messages per subject")
}

// Consume runs cfg.Workers handlers on stage until ctx is done or the
// connection closes. On return every handler has finished; messages whose
// handler returned because ctx ended are nak'ed for prompt redelivery.
func (q *Queue) Consume(ctx context.Context, cfg queue.Config, h queue.Handler) error {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return err
	}
	if err := q.existStage(ctx, cfg.Stage); err != nil {
		return fmt.Errorf("consume %s: %w", cfg.Stage, err)
	}
	t, stop, err := newTurns(ctx, q, cfg)
	if err != nil {
		return fmt.Errorf("consume %s: %w", cfg.Stage, err)
	}
	defer stop()
	errs := make([]error, cfg.Workers)
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		wg.Go(func() { errs[i] = q.work(ctx, cfg, t, h) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consume %s: %w", cfg.Stage, err)
	}
	return nil
}

// work takes one message at a time, in the shares' turns, so nothing
// waits in a local buffer while its ack timer runs.
func (q *Queue) work(ctx context.Context, cfg queue.Config, t *turns, h queue.Handler) error {
	for ctx.Err() == nil {
		msg, share, err := t.take(ctx)
		switch {
		case msg != nil:
			// Pass the wake on: another idle worker may find a message too.
			select {
			case t.wake <- struct{}{}:
			default:
			}
			if d, again := q.handle(ctx, cfg, msg, h); again {
				if d == 0 && ctx.Err() != nil {
					// Handed back as this consumer stops: the other
					// processes' scans may leave its share at rest.
					q.announce(cfg.Stage, share)
				}
				t.later(share, d, true)
			}
		case ctx.Err() != nil:
			return nil
		case err == nil:
			t.idle(ctx)
		case fatal(err):
			return err
		default:
			// Transient (reconnecting, leadership change): back off briefly.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// handle runs h on msg and acknowledges, retries or dead-letters it;
// again says that msg was handed back for a retry after d.
func (q *Queue) handle(ctx context.Context, cfg queue.Config, msg jetstream.Msg, h queue.Handler) (d time.Duration, again bool) {
	md, err := msg.Metadata()
	if err != nil {
		q.nakAfter(msg, 0)
		return 0, true
	}
	stage := cfg.Stage
	subject := msg.Headers().Get(hdrSubject) // stored under its share
	if subject == "" {
		subject = strings.TrimPrefix(strings.TrimPrefix(msg.Subject(), "codectx."+stage), ".")
	}
	m := queue.Message{
		Subject:    subject,
		Data:       msg.Data(),
		Deliveries: int(md.NumDelivered),
		ID:         msg.Headers().Get(jetstream.MsgIDHeader),
	}
	if m.Deliveries > cfg.MaxDeliver {
		q.deadLetter(ctx, stage, m, md.Sequence.Stream, msg, queue.CauseTimeout,
			fmt.Sprintf("final delivery %d not acknowledged within %v (worker crashed or hung)", cfg.MaxDeliver, cfg.AckWait))
		return 0, false
	}

	stop := heartbeat(msg, cfg.AckWait/3)
	err = q.call(ctx, h, m)
	stop()
	switch {
	case err == nil:
		if msg.Ack() == nil {
			q.acked.Add(1)
		}
		q.notify(stage, m, false)
	case ctx.Err() != nil:
		q.nakAfter(msg, 0) // shutting down: hand it to another worker now
		return 0, true
	case queue.IsPermanent(err):
		q.deadLetter(ctx, stage, m, md.Sequence.Stream, msg, queue.CausePermanent, err.Error())
	case m.Deliveries >= cfg.MaxDeliver:
		cause := queue.CauseError
		if errors.As(err, new(panicError)) {
			cause = queue.CausePanic
		}
		q.deadLetter(ctx, stage, m, md.Sequence.Stream, msg, cause, err.Error())
	default:
		q.retried.Add(1)
		d := cfg.RetryDelay(m.Deliveries)
		q.nakAfter(msg, d)
		return d, true
	}
	return 0, false
}

// nakAfter returns msg for redelivery after d, at least nakMin: to a
// worker of any process, or to this process's workers after a server
// restart. A plain Nak only puts the message on the consumer's redelivery
// list in the server's memory: a server stopped before a consumer pulled
// the message again forgot it, and after the restart the message waited
// out its ack wait (30 s by default). A nak with a delay moves the
// message's delivery time back in the consumer's stored state, which a
// restart keeps (to the second: a retry may come back up to a second
// early after a restart). Nak and NakWithDelay do not wait for the
// server, and a process may close its connection (and its embedded
// server) right after a handler returns: sent as a request, the nak is
// answered once the server has applied it.
func (q *Queue) nakAfter(msg jetstream.Msg, d time.Duration) {
	d = max(d, nakMin)
	ctx, cancel := context.WithTimeout(context.Background(), nakWait)
	defer cancel()
	body := fmt.Sprintf(`-NAK {"delay": %d}`, d.Nanoseconds())
	if _, err := q.nc.RequestWithContext(ctx, msg.Reply(), []byte(body)); err != nil {
		msg.NakWithDelay(d) // unanswered (an older server, a lost reply): at least this
	}
}

const (
	// nakMin is the shortest delay of a nak: not zero (a nak without a
	// delay is a plain one, not stored). The server redelivers such a
	// message within about 10 ms, when it next checks its pending ones.
	nakMin = time.Millisecond
	// nakWait bounds the wait for the server's answer to a nak, which
	// holds up the worker (and, for a hand-back, the consumer's stop).
	nakWait = 2 * time.Second
)

// panicError is a recovered handler panic.
type panicError struct{ msg string }

func (p panicError) Error() string { return p.msg }

// call runs the handler, turning a panic into an error.
func (q *Queue) call(ctx context.Context, h queue.Handler, m queue.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			q.panics.Add(1)
			err = panicError{fmt.Sprintf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	return h(ctx, m)
}

// heartbeat tells the server every interval that msg is still being worked
// on, until stop is called.
func heartbeat(msg jetstream.Msg, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(interval, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				msg.InProgress()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// deadLetter copies the message to the DLQ, then acks the original. If the
// copy fails the original is left to be redelivered (and dead-lettered by
// the extra delivery). The copy's Nats-Msg-Id makes a repeated copy harmless.
func (q *Queue) deadLetter(ctx context.Context, stage string, m queue.Message, seq uint64, msg jetstream.Msg, cause, reason string) {
	const maxReason = 4096
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	dl := nats.NewMsg(subjectFor(dlqSubject, stage, m.Subject))
	dl.Data = m.Data
	dl.Header.Set(hdrStage, stage)
	dl.Header.Set(hdrSubject, m.Subject)
	dl.Header.Set(hdrReason, strings.ToValidUTF8(strings.ReplaceAll(reason, "\n", " | "), "?"))
	dl.Header.Set(hdrDeliveries, strconv.Itoa(m.Deliveries))
	dl.Header.Set(hdrMsgID, m.ID)
	dl.Header.Set(hdrCause, cause)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	id := jetstream.WithMsgID(fmt.Sprintf("dlq-%s-%d", stage, seq))
	_, err := q.js.PublishMsg(pctx, dl, id)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		// The DLQ was lost since Connect made it (see Publish).
		q.forgetStream(dlqStream)
		if err = q.ensureDLQ(pctx); err == nil {
			_, err = q.js.PublishMsg(pctx, dl, id)
		}
	}
	if err != nil {
		return
	}
	if msg.Ack() == nil {
		q.dead.Add(1)
	}
	q.notify(stage, m, true)
}

// notify announces a finished message to the watchers of its stage and
// subject (best effort: a lost notification only leaves a watcher to its
// next poll).
func (q *Queue) notify(stage string, m queue.Message, dead bool) {
	data := "done " + m.ID
	if dead {
		data = "dead " + m.ID
	}
	q.nc.Publish(subjectFor(doneRoot, stage, m.Subject), []byte(data))
}

// Watch announces, until stop is called, each message of stage published
// with exactly this subject that a consumer finishes (acknowledges or
// dead-letters) from the moment Watch returns. It is a wake-up, not a
// record: notifications are not persisted, a consumer of an older version
// sends none, and beyond watchBuffer unread ones are dropped, so a watcher
// reads the outcome where it is kept and keeps polling for what it missed.
func (q *Queue) Watch(stage, subject string) (<-chan queue.Done, func(), error) {
	if err := queue.ValidStage(stage); err != nil {
		return nil, nil, err
	}
	if err := validSubject(subject); err != nil {
		return nil, nil, err
	}
	return q.watchDone(stage, subject, subjectFor(doneRoot, stage, subject))
}

// WatchShare is Watch for every message of stage whose subject's first
// token is share (see SetShareLimit): a publisher refused because the
// share was full learns when a slot frees.
func (q *Queue) WatchShare(stage, share string) (<-chan queue.Done, func(), error) {
	if err := queue.ValidStage(stage); err != nil {
		return nil, nil, err
	}
	if err := validSubject(share); err != nil || strings.Contains(share, ".") || share == "" {
		return nil, nil, fmt.Errorf("watch %s: invalid share %q", stage, share)
	}
	return q.watchDone(stage, share, subjectFor(doneRoot, stage, share), subjectFor(doneRoot, stage, share+".>"))
}

// watchDone subscribes one channel to the finish notices on subjects
// (what names them in errors).
func (q *Queue) watchDone(stage, what string, subjects ...string) (<-chan queue.Done, func(), error) {
	ch := make(chan queue.Done, watchBuffer)
	var subs []*nats.Subscription
	stop := func() {
		for _, sub := range subs {
			sub.Unsubscribe()
		}
	}
	for _, subj := range subjects {
		sub, err := q.nc.Subscribe(subj, func(msg *nats.Msg) {
			kind, id, _ := strings.Cut(string(msg.Data), " ")
			select {
			case ch <- queue.Done{ID: id, Dead: kind == "dead"}:
			default:
			}
		})
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("watch %s %s: %w", stage, what, err)
		}
		subs = append(subs, sub)
	}
	// The server knows the subscriptions before Watch returns: nothing
	// finished afterwards goes unannounced.
	if err := q.nc.Flush(); err != nil {
		stop()
		return nil, nil, fmt.Errorf("watch %s %s: %w", stage, what, err)
	}
	return ch, stop, nil
}

// DeadLetters returns the dead-lettered messages of stage, oldest first.
func (q *Queue) DeadLetters(ctx context.Context, stage string) ([]queue.DeadLetter, error) {
	if err := queue.ValidStage(stage); err != nil {
		return nil, err
	}
	root := dlqSubject + "." + stage
	return q.deadLetters(ctx, stage, root, root+".>")
}

// DeadLettersOf returns the dead letters of stage published with exactly
// this subject, oldest first. Only those are read, so a caller waiting on
// its own jobs does not scan every other job's failures.
func (q *Queue) DeadLettersOf(ctx context.Context, stage, subject string) ([]queue.DeadLetter, error) {
	if err := queue.ValidStage(stage); err != nil {
		return nil, err
	}
	if err := validSubject(subject); err != nil {
		return nil, err
	}
	return q.deadLetters(ctx, stage, subjectFor(dlqSubject, stage, subject))
}

// deadLetters reads the dead letters on the filter subjects with direct
// message gets (the next message at or after a sequence on a subject): a
// poll creates no consumer, so waiting on dead letters costs the server
// nothing to clean up.
func (q *Queue) deadLetters(ctx context.Context, stage string, filters ...string) ([]queue.DeadLetter, error) {
	out, err := q.readDeadLetters(ctx, stage, filters...)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// The DLQ was lost since Connect made it (see Publish): it holds
		// none. Its handle is dropped and the stream made again, so that
		// the waiters of a stage do not fail on it until this process
		// restarts, and the next dead letter has a place.
		q.mu.Lock()
		q.dlq = nil
		q.mu.Unlock()
		q.forgetStream(dlqStream)
		if err := q.ensureDLQ(ctx); err != nil {
			return nil, fmt.Errorf("dead letters %s: %w", stage, err)
		}
		return nil, nil
	}
	return out, err
}

func (q *Queue) readDeadLetters(ctx context.Context, stage string, filters ...string) ([]queue.DeadLetter, error) {
	st, err := q.dlqStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead letters %s: %w", stage, err)
	}
	var msgs []*jetstream.RawStreamMsg
	for _, f := range filters {
		for seq := uint64(1); ; {
			m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(f))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("dead letters %s: %w", stage, err)
			}
			msgs = append(msgs, m)
			seq = m.Sequence + 1
		}
	}
	slices.SortFunc(msgs, func(a, b *jetstream.RawStreamMsg) int { return cmp.Compare(a.Sequence, b.Sequence) })
	out := make([]queue.DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		h := m.Header
		n, _ := strconv.Atoi(h.Get(hdrDeliveries))
		out = append(out, queue.DeadLetter{
			Stage:      stage,
			Subject:    h.Get(hdrSubject),
			Data:       m.Data,
			ID:         h.Get(hdrMsgID),
			Reason:     h.Get(hdrReason),
			Cause:      h.Get(hdrCause),
			Deliveries: n,
			Time:       m.Time,
		})
	}
	return out, nil
}

// dlqStream is the handle of the dead-letter stream, looked up once.
func (q *Queue) dlqStream(ctx context.Context) (jetstream.Stream, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dlq != nil {
		return q.dlq, nil
	}
	st, err := q.js.Stream(ctx, dlqStream)
	if err != nil {
		return nil, err
	}
	q.dlq = st
	return st, nil
}

// Pending is the stage's lag: messages published and not yet done
// (waiting, being handled, or waiting for a retry).
func (q *Queue) Pending(ctx context.Context, stage string) (int, error) {
	if err := queue.ValidStage(stage); err != nil {
		return 0, err
	}
	s, err := q.js.Stream(ctx, streamName(stage))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pending %s: %w", stage, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("pending %s: %w", stage, err)
	}
	return int(info.State.Msgs), nil
}

// Redact drops the credentials of a NATS URL (a list of URLs, comma
// separated), for errors and logs.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = nil
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
