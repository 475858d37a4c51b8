package index

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"strconv"

	"codectx/pkg/blob"
	"codectx/pkg/chunk"
)

// Parse-cache entries are written without an fsync each (blob PutCache):
// they are rebuilt from the source when lost, and a torn one is told apart
// by its checksum. What names them (a shard, a segment) is written only
// after a Sync of the store, so a durable index never names a lost entry.

// parsedMagic starts a parse-cache entry written with a checksum: the magic,
// the CRC-32C of the JSON that follows, then the JSON of the chunk.Result.
// Entries written before it (fsynced, plain JSON) are still read.
const parsedMagic = "CTXPRS1\n"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTorn is a parse-cache entry that does not check: a crash tore it.
var errTorn = errors.New("torn parse-cache entry")

func encodeParsed(res chunk.Result) ([]byte, error) {
	// Sized once for the chunks' text (JSON escapes newlines, tabs and
	// quotes: a little more than the text), not grown by doubling.
	n := 512
	for i := range res.Chunks {
		c := &res.Chunks[i]
		n += 256 + len(c.Body) + len(c.Doc) + len(c.Signature) + len(c.Name)
		for _, ss := range [...][]string{c.Calls, c.Types, c.Imports} {
			for _, s := range ss {
				n += len(s) + 3
			}
		}
	}
	var b bytes.Buffer
	b.Grow(n + n/8)
	b.WriteString(parsedMagic)
	b.Write(make([]byte, 4))
	if err := json.NewEncoder(&b).Encode(res); err != nil {
		return nil, err
	}
	data := b.Bytes()
	body := data[len(parsedMagic)+4:]
	binary.BigEndian.PutUint32(data[len(parsedMagic):], crc32.Checksum(body, castagnoli))
	return data, nil
}

// DecodeParsed reads a parse-cache entry (either form) into res; a torn
// entry is an error.
func DecodeParsed(data []byte, res *chunk.Result) error { return decodeParsed(data, res) }

func decodeParsed(data []byte, res *chunk.Result) error {
	if bytes.HasPrefix(data, []byte(parsedMagic)) {
		rest := data[len(parsedMagic):]
		if len(rest) < 4 || binary.BigEndian.Uint32(rest) != crc32.Checksum(rest[4:], castagnoli) {
			return errTorn
		}
		data = rest[4:]
	} else if len(data) == 0 || data[0] != '{' {
		return errTorn
	}
	if err := json.Unmarshal(data, res); err != nil {
		return fmt.Errorf("%w: %w", errTorn, err)
	}
	return nil
}

// isBlob reports whether data hashes to the git blob hash h (SHA-1, or
// SHA-256 for a 64-digit hash).
func isBlob(h string, data []byte) bool {
	var hh hash.Hash
	switch len(h) {
	case 40:
		hh = sha1.New()
	case 64:
		hh = sha256.New()
	default:
		return false
	}
	hh.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	hh.Write(data)
	return hex.EncodeToString(hh.Sum(nil)) == h
}

// contentKept reports whether the text of blob h is stored whole (a torn or
// lost text is written again by the caller).
func contentKept(ctx context.Context, store *blob.Bucket, h string) bool {
	data, err := store.Get(ctx, ContentKey(h))
	return err == nil && isBlob(h, data)
}
