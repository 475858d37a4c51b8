package index

// SetMaxChunks lowers MaxChunks for a test; the returned func restores it.
func SetMaxChunks(n int) func() {
	old := maxChunks
	maxChunks = n
	return func() { maxChunks = old }
}
