//go:build !unix

package local

import "os"

// createTemp writes data to a new temp file in dir, fsynced when durable,
// and returns its name.
func createTemp(dir string, data []byte, durable bool) (string, error) {
	f, err := os.CreateTemp(dir, "put-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(data)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}
