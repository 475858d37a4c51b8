package temporalserver

import (
	"testing"

	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
)

// TestDynamicConfig checks that the server reads the values of
// DynamicConfig: one of the wrong type would be logged and replaced by
// the default, silently bringing back the 100 ms steps of issue 12.
func TestDynamicConfig(t *testing.T) {
	dc := dynamicconfig.NewCollection(DynamicConfig(), log.NewNoopLogger())
	if got := dynamicconfig.TransferProcessorMaxPollRPS.Get(dc)(); got != 1000 {
		t.Errorf("history.transferProcessorMaxPollRPS = %d, want 1000", got)
	}
}
