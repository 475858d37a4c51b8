//go:build !unix

package keys

import "io/fs"

// owner is -1: files have no uid here, and the ownership checks are off.
func owner(fs.FileInfo) int { return -1 }

// noFollow: no O_NOFOLLOW here; O_EXCL still refuses an existing link.
const noFollow = 0
