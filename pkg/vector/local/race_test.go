//go:build race

package local_test

// raceQueries bounds the real-fixture queries under the race detector,
// where the recall tests are ten times slower: the code paths are the
// same, the recall is measured on fewer queries.
const raceQueries = 40
