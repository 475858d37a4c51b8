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
	"codectx/pkg/codectx"
)

// Parse-cache entries are written without an fsync each (blob PutCache):
// they are rebuilt from the source when lost, and a torn one is told apart
// by its checksum. What names them (a shard, a segment) is written only
// after a Sync of the store, so a durable index never names a lost entry.

// parsedMagic starts a parse-cache entry of the first checksummed form: the
// magic, the CRC-32C of the JSON that follows, then the JSON of the
// chunk.Result. Entries of it, and entries written before it (fsynced,
// plain JSON), are still read; the file's text is kept beside them
// (ContentKey).
const parsedMagic = "CTXPRS1\n"

// parsedMagic2 starts a parse-cache entry that carries the file's text: the
// magic, the CRC-32C of everything after it, then (varints and
// length-prefixed strings) the text and the chunk.Result in a binary form
// where a chunk's body that is the text's [StartByte, EndByte) is stored as
// that range. One object per parsed file instead of an entry and a text
// (ContentKey): half the files created, and the bodies not written twice.
const parsedMagic2 = "CTXPRS2\n"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTorn is a parse-cache entry that does not check: a crash tore it.
var errTorn = errors.New("torn parse-cache entry")

// Flags of a CTXPRS2 entry.
const entryHasText = 1

// encodeParsed encodes res in the CTXPRS2 form, with text (the file's
// content; nil when it is not kept).
func encodeParsed(res chunk.Result, text []byte) []byte {
	n := 64 + len(text) + len(res.Package)
	for _, s := range res.Imports {
		n += len(s) + 2
	}
	for i := range res.Chunks {
		c := &res.Chunks[i]
		n += 48 + len(c.Path) + len(c.Language) + len(c.Kind) + len(c.Name) + len(c.Signature) + len(c.Doc) + len(c.Hash)
		if !bodyInText(c, text) {
			n += len(c.Body) + 4
		}
		for _, ss := range [...][]string{c.Calls, c.Types, c.Imports} {
			for _, s := range ss {
				n += len(s) + 2
			}
		}
	}
	b := make([]byte, 0, n)
	b = append(b, parsedMagic2...)
	b = append(b, 0, 0, 0, 0)
	flags := uint64(0)
	if text != nil {
		flags |= entryHasText
	}
	b = binary.AppendUvarint(b, flags)
	if text != nil {
		b = appendBytes(b, text)
	}
	b = appendStr(b, string(res.Language))
	b = appendStr(b, res.Package)
	b = appendStrs(b, res.Imports)
	b = appendStr(b, res.Skip)
	b = appendStr(b, res.Degraded)
	if res.Chunks == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(res.Chunks))+1)
	}
	for i := range res.Chunks {
		c := &res.Chunks[i]
		b = appendStr(b, c.Path)
		b = appendStr(b, string(c.Language))
		b = appendStr(b, string(c.Kind))
		b = appendStr(b, c.Name)
		b = appendStr(b, c.Signature)
		b = appendStr(b, c.Doc)
		b = binary.AppendVarint(b, int64(c.StartLine))
		b = binary.AppendVarint(b, int64(c.EndLine))
		b = binary.AppendVarint(b, int64(c.StartByte))
		b = binary.AppendVarint(b, int64(c.EndByte))
		if bodyInText(c, text) {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = appendStr(b, c.Body)
		}
		b = appendStrs(b, c.Calls)
		b = appendStrs(b, c.Imports)
		b = appendStrs(b, c.Types)
		b = appendStr(b, c.Hash)
	}
	binary.BigEndian.PutUint32(b[len(parsedMagic2):], crc32.Checksum(b[len(parsedMagic2)+4:], castagnoli))
	return b
}

// bodyInText reports whether c's body is the text's [StartByte, EndByte)
// (not so for a file repaired before parsing, e.g. invalid UTF-8).
func bodyInText(c *codectx.Chunk, text []byte) bool {
	return text != nil && c.StartByte >= 0 && c.StartByte <= c.EndByte && c.EndByte <= len(text) &&
		string(text[c.StartByte:c.EndByte]) == c.Body
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendStrs encodes a nil list as 0 and a list of n strings as n+1, so a
// decoded result equals the one encoded (reflect.DeepEqual).
func appendStrs(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(ss))+1)
	for _, s := range ss {
		b = appendStr(b, s)
	}
	return b
}

// entryBody checks a CTXPRS2 entry and returns what follows its checksum.
func entryBody(data []byte) ([]byte, bool) {
	rest := data[len(parsedMagic2):]
	if len(rest) < 4 || binary.BigEndian.Uint32(rest) != crc32.Checksum(rest[4:], castagnoli) {
		return nil, false
	}
	return rest[4:], true
}

// entryText returns the file's text kept in a parse-cache entry: ok is
// false for an entry of an older form (its text is at ContentKey), a torn
// entry, or one without a text.
func entryText(data []byte) (text []byte, ok bool) {
	if !bytes.HasPrefix(data, []byte(parsedMagic2)) {
		return nil, false
	}
	body, ok := entryBody(data)
	if !ok {
		return nil, false
	}
	d := decoder{b: body}
	if d.uvarint()&entryHasText == 0 {
		return nil, false
	}
	n := d.length()
	if d.err {
		return nil, false
	}
	text = d.b[d.i : d.i+n : d.i+n]
	return text, true
}

// decoder reads the CTXPRS2 form; err is set, and zero values returned, at
// the first field that runs past the end.
type decoder struct {
	b    []byte
	s    string // b[base:] as one string: decoded strings share it
	base int
	i    int
	err  bool
}

func (d *decoder) uvarint() uint64 {
	if d.err {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.err = true
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) int() int {
	if d.err {
		return 0
	}
	v, n := binary.Varint(d.b[d.i:])
	if n <= 0 || v != int64(int(v)) {
		d.err = true
		return 0
	}
	d.i += n
	return int(v)
}

// length reads a length that must fit in what is left.
func (d *decoder) length() int {
	v := d.uvarint()
	if d.err || v > uint64(len(d.b)-d.i) {
		d.err = true
		return 0
	}
	return int(v)
}

func (d *decoder) str() string {
	n := d.length()
	if d.err {
		return ""
	}
	s := d.s[d.i-d.base : d.i-d.base+n]
	d.i += n
	return s
}

func (d *decoder) strs() []string {
	v := d.uvarint()
	if d.err || v == 0 {
		return nil
	}
	// Each string takes at least a byte: a count past the end is torn.
	if v-1 > uint64(len(d.b)-d.i) {
		d.err = true
		return nil
	}
	ss := make([]string, v-1)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

func decodeParsed2(data []byte, res *chunk.Result) error {
	body, ok := entryBody(data)
	if !ok {
		return errTorn
	}
	// Two copies: the file's text, whose parts the bodies are (as a fresh
	// parse's bodies are parts of the file's text), and the rest of the
	// entry as one string whose parts the other fields are. Names, calls
	// and types that outlive the chunks (the graph's memo, a shard's
	// inputs) then keep the small second string, not the file's text.
	d := decoder{b: body}
	flags := d.uvarint()
	var text string
	if flags&entryHasText != 0 {
		n := d.length()
		if d.err {
			return errTorn
		}
		text = string(body[d.i : d.i+n])
		d.i += n
	}
	d.base, d.s = d.i, string(body[d.i:])
	var r chunk.Result
	r.Language = codectx.Language(d.str())
	r.Package = d.str()
	r.Imports = d.strs()
	r.Skip = d.str()
	r.Degraded = d.str()
	if v := d.uvarint(); !d.err && v > 0 {
		// A chunk takes at least 16 bytes.
		if (v-1)*16 > uint64(len(d.b)-d.i) {
			return errTorn
		}
		r.Chunks = make([]codectx.Chunk, v-1)
	}
	for i := range r.Chunks {
		if d.err {
			break
		}
		c := &r.Chunks[i]
		c.Path = d.str()
		c.Language = codectx.Language(d.str())
		c.Kind = codectx.Kind(d.str())
		c.Name = d.str()
		c.Signature = d.str()
		c.Doc = d.str()
		c.StartLine = d.int()
		c.EndLine = d.int()
		c.StartByte = d.int()
		c.EndByte = d.int()
		switch d.uvarint() {
		case 0:
			if c.StartByte < 0 || c.StartByte > c.EndByte || c.EndByte > len(text) {
				return errTorn
			}
			c.Body = text[c.StartByte:c.EndByte]
		case 1:
			c.Body = d.str()
		default:
			return errTorn
		}
		c.Calls = d.strs()
		c.Imports = d.strs()
		c.Types = d.strs()
		c.Hash = d.str()
	}
	if d.err || d.i != len(d.b) {
		return errTorn
	}
	*res = r
	return nil
}

// DecodeParsed reads a parse-cache entry (any form) into res; a torn
// entry is an error.
func DecodeParsed(data []byte, res *chunk.Result) error { return decodeParsed(data, res) }

func decodeParsed(data []byte, res *chunk.Result) error {
	if bytes.HasPrefix(data, []byte(parsedMagic2)) {
		return decodeParsed2(data, res)
	}
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

// hasText reports whether a parse-cache entry carries its file's text (the
// CTXPRS2 form); the older forms keep it at ContentKey.
func hasText(data []byte) bool {
	n := len(parsedMagic2) + 4
	return bytes.HasPrefix(data, []byte(parsedMagic2)) && len(data) > n && data[n]&entryHasText != 0
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
