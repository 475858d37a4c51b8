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

// SetShareIdle sets when the server removes a share's consumer nobody
// pulled from, for a test; the returned func restores it.
func SetShareIdle(d time.Duration) (restore func()) {
	old := shareIdle
	shareIdle = d
	return func() { shareIdle = old }
}

// SetRestMax sets the longest that scans leave out a share found empty,
// for a test; the returned func restores it.
func SetRestMax(d time.Duration) (restore func()) {
	old := restMax
	restMax = d
	return func() { restMax = old }
}
