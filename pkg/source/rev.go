package source

// Follows is the revision a repository indexed from a push follows on
// reindex: the branch a webhook push moved, or the revision an index
// request named unless it reads as a commit hash, full or abbreviated (a
// repository indexed at a branch or tag stays on it; one indexed at a
// hash or at HEAD follows the location's HEAD, "").
func Follows(branch, rev string) string {
	switch {
	case branch != "":
		return "refs/heads/" + branch
	case LooksLikeHash(rev):
		return ""
	}
	return rev
}

// IsHash reports whether s is a full commit hash (SHA-1 or SHA-256, hex).
func IsHash(s string) bool {
	return (len(s) == 40 || len(s) == 64) && isHex(s)
}

// LooksLikeHash reports whether s reads as a commit hash, full or
// abbreviated (7 hex digits or more, as git abbreviates).
func LooksLikeHash(s string) bool {
	return len(s) >= 7 && len(s) <= 64 && isHex(s)
}

func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}
