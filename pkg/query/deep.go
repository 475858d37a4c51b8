package query

// deepDepth is how far the deep lists of a feature dump reach.
const deepDepth = 2000

// DeepLists name the single lists Ranking.Deep holds, each deepDepth
// deep: the BM25 chunk list by file (first chunk of each file), the
// whole-file BM25 list, the whole-file BM25 list of the title alone and
// the file-name list. They measure where a gold file the fused ranking
// misses would come from; queries never compute them.
var DeepLists = []string{ArmBM25, armBM25File, "title-file", armBM25Path}

// deepLists computes DeepLists for q.
func (e *Engine) deepLists(q string, keep func(int) bool) map[string][]string {
	seg := e.Seg
	out := map[string][]string{}
	byFile := func(ids []int) []string {
		seen := map[string]bool{}
		var ps []string
		for _, id := range ids {
			p := seg.Chunks[id].Path
			if !seen[p] {
				seen[p] = true
				ps = append(ps, p)
			}
		}
		return ps
	}
	chunks, _ := e.bm25Arm(q, 4*deepDepth, keep)
	out[ArmBM25] = byFile(chunks)
	fileIDs, _ := e.fileBM25Arm(q, chunks, deepDepth, keep)
	out[armBM25File] = byFile(fileIDs)
	out[armBM25Path] = byFile(e.pathArm(q, "", chunks, deepDepth, keep))
	if seg.FileBM25 != nil {
		if tt := nameTerms(title(q)); len(tt) > 0 {
			fileKeep := fileFilter(seg, keep)
			var ps []string
			for _, h := range seg.FileBM25.SearchFilter(tt, deepDepth, FileParams(), fileKeep) {
				ps = append(ps, seg.Files[h.Doc].Path)
			}
			out["title-file"] = ps
		}
	}
	return out
}
