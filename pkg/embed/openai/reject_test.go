package openai

import (
	"errors"
	"testing"

	"codectx/pkg/embed"
)

// TestStatusRejected: the answers that refuse the input itself match
// embed.ErrRejected; an outage, a limit or a credential problem does not.
func TestStatusRejected(t *testing.T) {
	for status, want := range map[int]bool{400: true, 413: true, 422: true, 401: false, 403: false, 404: false, 429: false, 500: false, 503: false} {
		err := error(&StatusError{Status: status, Message: "x"})
		if got := errors.Is(err, embed.ErrRejected); got != want {
			t.Errorf("status %d: errors.Is(ErrRejected) = %v, want %v", status, got, want)
		}
	}
}
