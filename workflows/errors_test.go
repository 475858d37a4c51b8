package workflows

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"codectx/pkg/index"
	"codectx/pkg/netguard"
	"codectx/pkg/source"

	"go.temporal.io/sdk/temporal"
)

// Failures a tenant's repository causes are final (no retry can change
// them) and say their cause in a public message; others are retried.
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err       error
		typ, text string
	}{
		{fmt.Errorf("clone x: %w", source.ErrTooLarge), errTooLarge, "larger than the server's clone limit"},
		{fmt.Errorf("list: %w", source.ErrTooManyEntries), errTooMany, "more entries than the server lists"},
		{fmt.Errorf("snapshot x: %w", index.ErrSourceTooLarge), errSource, "larger in all than the server's source limit"},
		{fmt.Errorf("dial: %w", netguard.ErrRefused), errRefused, "location refused"},
		{fmt.Errorf("open: %w", source.ErrEmptyRepo), errEmpty, "no commits"},
	} {
		var ae *temporal.ApplicationError
		err := classify(tt.err)
		if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != tt.typ {
			t.Errorf("classify(%v) = %v, want a final %s error", tt.err, err, tt.typ)
			continue
		}
		if got := PublicError(err); got != public[tt.typ] || !strings.Contains(got, tt.text) {
			t.Errorf("PublicError of %s = %q, want %q saying %q", tt.typ, got, public[tt.typ], tt.text)
		}
	}
	// A dead-lettered graph job: past the chunk bound, the tenant is told
	// why; otherwise only the step.
	if got := PublicError(graphPoison("index: r: " + index.ErrTooManyChunks.Error() + " (over 5)\nmore")); got != public[errChunks] {
		t.Errorf("PublicError of a graph job past the chunk bound = %q, want %q", got, public[errChunks])
	}
	if got := PublicError(graphPoison("decode: unexpected EOF")); got != "could not build the index (the server log has the details)" {
		t.Errorf("PublicError of another dead-lettered graph job = %q", got)
	}
	infra := errors.New("store: connection reset")
	if err := classify(infra); err != infra {
		t.Errorf("classify(an infrastructure error) = %v, want it unchanged (retried)", err)
	}
}
