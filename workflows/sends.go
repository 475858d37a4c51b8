package workflows

import (
	"strconv"
	"time"

	"codectx/pkg/queue"
)

// sends is the delivery state of one batch of a queue stage (parse or
// embed): the ids of its messages in flight, the re-sends after a timeout,
// and the re-publishes after infrastructure failures.
type sends struct {
	ids     map[string]bool
	base    string
	sent    time.Time
	resends int
	infra   int       // re-publishes after infrastructure failures
	retryAt time.Time // when to re-publish after one (zero: none due)
	cause   string    // the last infrastructure failure
}

func newSends(base string, now time.Time) sends {
	return sends{ids: map[string]bool{base: true}, base: base, sent: now}
}

// settled is what settle found among a batch's dead letters.
type settled struct {
	reason    string        // of a poison letter: the batch's own content failed
	poison    bool          // a poison letter was found
	exhausted bool          // an infrastructure failure, and the retry delays are used up
	scheduled bool          // an infrastructure failure: a re-publish is scheduled
	wait      time.Duration // after this long
}

// settle reads the dead letters of the batch's messages. An
// infrastructure failure finishes its message (its items are not bad):
// when no message of the batch is left in flight, a re-publish is
// scheduled after the next of delays, or, the delays used up, the caller
// fails the snapshot.
func (s *sends) settle(dead map[string]queue.DeadLetter, delays []time.Duration) settled {
	var r settled
	for id := range s.ids {
		d, ok := dead[id]
		if !ok {
			continue
		}
		if d.Poison() {
			r.reason, r.poison = d.Reason, true
			continue
		}
		delete(s.ids, id)
		s.cause = firstLine(d.Reason)
		if len(s.ids) == 0 && s.retryAt.IsZero() {
			if s.infra >= len(delays) {
				r.exhausted = true
				return r
			}
			r.scheduled, r.wait = true, delays[s.infra]
			s.retryAt = time.Now().Add(r.wait)
		}
	}
	return r
}

// retryDue reports whether a scheduled re-publish is due, and if so counts
// it and returns the id of the message to publish.
func (s *sends) retryDue() (string, bool) {
	if time.Now().Before(s.retryAt) {
		return "", false
	}
	s.infra++
	s.retryAt = time.Time{}
	return s.add("#i" + strconv.Itoa(s.infra)), true
}

// resend counts a re-send after a timeout and returns its message id.
func (s *sends) resend() string {
	s.resends++
	return s.add("#r" + strconv.Itoa(s.resends))
}

// retry publishes the batch again after an infrastructure failure once
// its delay is due (retryDue), and resend after ParseTimeout. A publish
// refused because the tenant's share of the queue was full leaves the
// state as it was, for the next round to try once more; sent reports
// whether the message went out.
func (s *sends) retry(publish func(id string) error) (sent bool, err error) {
	prev := *s
	id, due := s.retryDue()
	if !due {
		return false, nil
	}
	return s.publish(prev, id, publish)
}

func (s *sends) resendNow(publish func(id string) error) (sent bool, err error) {
	prev := *s
	return s.publish(prev, s.resend(), publish)
}

// publish sends message id, added to s since prev; refused for a full
// share, s is prev again.
func (s *sends) publish(prev sends, id string, publish func(id string) error) (bool, error) {
	err := publish(id)
	if shareFull(err) {
		ids := s.ids
		delete(ids, id)
		*s = prev
		s.ids = ids
		return false, nil
	}
	return err == nil, err
}

// sentAny reports whether one of ids is a message of the batch in flight.
func (s *sends) sentAny(ids map[string]bool) bool {
	for id := range s.ids {
		if ids[id] {
			return true
		}
	}
	return false
}

func (s *sends) add(suffix string) string {
	id := s.base + suffix
	s.ids[id] = true
	s.sent = time.Now()
	return id
}
