package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Another local user of the machine must not read tenants' source from
// the data directory: after up has indexed two tenants' repositories (clone
// caches, Temporal's database, the store, NATS), no directory under it is
// open to group or others, so no file in it can be reached.
func TestSecurityDataDirPrivate(t *testing.T) {
	s := startSecureUp(t)
	s.waitSettled(t, tenantB, "vault")
	var open []string
	err := filepath.WalkDir(s.data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while walking (temp files)
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Mode().Perm()&0o077 != 0 {
			rel, _ := filepath.Rel(s.data, path)
			open = append(open, rel+" "+info.Mode().Perm().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(open) > 0 {
		t.Errorf("directories of the data dir open to other local users: %v", open)
	}
}
