package natsq

import "time"

// SetRescan sets how often consumers read the stream's shares, for a
// test; the returned func restores it.
func SetRescan(d time.Duration) (restore func()) {
	old := rescan
	rescan = d
	return func() { rescan = old }
}

// ShareConsumer is the name of a share's consumer.
var ShareConsumer = shareConsumer
