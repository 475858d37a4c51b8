//go:build !unix

package main

// noFileLimit is fallbackNoFile where RLIMIT_NOFILE does not exist.
func noFileLimit() int { return fallbackNoFile }
