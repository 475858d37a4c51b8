package local

import (
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// byteTables returns, for each byte b of a point's bits, the sum of the
// query's components (minus the mean) over the dimensions whose bit is
// set, for every value of the byte: the float query's inner product with
// a point's sign vector is then one table lookup per 8 dimensions.
func byteTables(q []float32, words int) [][256]float32 {
	t := make([][256]float32, 8*words)
	for b := range t {
		for v := 1; v < 256; v++ {
			j := 8*b + bits.TrailingZeros8(uint8(v))
			x := float32(0)
			if j < len(q) {
				x = q[j]
			}
			t[b][v] = t[b][v&(v-1)] + x
		}
	}
	return t
}

// asymScore is the query's inner product with the sign vector of a point
// (up to a constant), from its bits.
func asymScore(t [][256]float32, w []uint64) float32 {
	var s0, s1 float32
	for i, x := range w {
		tb := (*[8][256]float32)(t[8*i : 8*i+8])
		s0 += tb[0][uint8(x)] + tb[1][uint8(x>>8)] + tb[2][uint8(x>>16)] + tb[3][uint8(x>>24)]
		s1 += tb[4][uint8(x>>32)] + tb[5][uint8(x>>40)] + tb[6][uint8(x>>48)] + tb[7][uint8(x>>56)]
	}
	return s0 + s1
}

// hamming is the number of differing bits of a and b.
func hamming(a, b []uint64) int {
	b = b[:len(a)]
	n := 0
	for i := range a {
		n += bits.OnesCount64(a[i] ^ b[i])
	}
	return n
}

var distPool = sync.Pool{New: func() any { return new([]uint16) }}

// parts is how many goroutines share a pass over n points.
func parts(n int) int {
	if n < parallelMin {
		return 1
	}
	return min(runtime.GOMAXPROCS(0), n/(parallelMin/2))
}

// searchBinary returns the k best points for the normalised query q in
// three passes: the pre points whose sign bits are nearest the query's
// by Hamming distance (ties by position; every point when pre >= n), of
// those the cand best by the float query's inner product with their sign
// vectors, and of those the k best by their exact float32 score.
func (sh *shard) searchBinary(q []float32, k, cand, pre int) []scored {
	n := len(sh.ids)
	if cand >= n {
		return sh.scan(func(i int) float32 { return dot(q, sh.vecs[i*sh.dim:(i+1)*sh.dim]) }, k)
	}
	var ids []int
	if pre < n {
		ids = sh.nearestBits(q, pre)
	}
	t := byteTables(q, sh.words)
	w := sh.words
	first := scanIDs(ids, n, cand, func(i int) float32 { return asymScore(t, sh.bits[i*w:(i+1)*w]) })
	ids = ids[:0]
	for _, c := range first {
		ids = append(ids, c.i)
	}
	return scanIDs(ids, len(ids), k, func(i int) float32 { return dot(q, sh.vecs[i*sh.dim:(i+1)*sh.dim]) })
}

// scanIDs returns the k best of the points ids (nil: the n points
// 0..n-1) by score, best first, split over cores.
func scanIDs(ids []int, n, k int, score func(int) float32) []scored {
	if ids != nil {
		n = len(ids)
	}
	np := parts(n)
	res := make([][]scored, np)
	var wg sync.WaitGroup
	for p := range np {
		lo, hi := n*p/np, n*(p+1)/np
		wg.Go(func() {
			if ids == nil {
				res[p] = topK(score, lo, hi, k)
				return
			}
			top := topK(func(j int) float32 { return score(ids[j]) }, lo, hi, k)
			for x := range top {
				top[x].i = ids[top[x].i]
			}
			res[p] = top
		})
	}
	wg.Wait()
	all := slices.Concat(res...)
	slices.SortFunc(all, byScore)
	return all[:min(k, len(all))]
}

// nearestBits returns the m points whose bits are nearest the bits of q
// by Hamming distance, in position order (ties by position).
func (sh *shard) nearestBits(q []float32, m int) []int {
	n := len(sh.ids)
	qb := make([]uint64, sh.words)
	signBits(qb, q)
	dp := distPool.Get().(*[]uint16)
	defer distPool.Put(dp)
	dist := slices.Grow((*dp)[:0], n)[:n]
	*dp = dist
	np := parts(n)
	hists := make([][]int, np)
	var wg sync.WaitGroup
	for p := range np {
		lo, hi := n*p/np, n*(p+1)/np
		wg.Go(func() {
			h := make([]int, 64*sh.words+1)
			w := sh.words
			for i := lo; i < hi; i++ {
				d := hamming(qb, sh.bits[i*w:(i+1)*w])
				dist[i] = uint16(d)
				h[d]++
			}
			hists[p] = h
		})
	}
	wg.Wait()
	// The threshold distance t: fewer than m points are nearer than t,
	// at least m are at t or nearer.
	below, t := 0, 0
	for ; t < len(hists[0]); t++ {
		c := 0
		for _, h := range hists {
			c += h[t]
		}
		if below+c >= m {
			break
		}
		below += c
	}
	ties := m - below
	ids := make([]int, 0, m)
	for i, d := range dist {
		switch {
		case int(d) < t:
			ids = append(ids, i)
		case int(d) == t && ties > 0:
			ids = append(ids, i)
			ties--
		}
	}
	return ids
}
