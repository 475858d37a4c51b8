//go:build !race

package local_test

const raceQueries = 0 // every query
