package segment

import (
	"bytes"
	"compress/gzip"
	"slices"
	"testing"
)

// Lists are written one element at a time; both that form and the whole
// array of older segments read back, and anything but one array fails.
func TestJSONList(t *testing.T) {
	files := []File{{Path: "a.go", Chunks: []int{0, 1}}, {Path: "b.go"}}
	for name, enc := range map[string]func([]File) ([]byte, error){
		"streamed": gzipJSONList[File],
		"whole":    func(l []File) ([]byte, error) { return gzipJSON(l) },
	} {
		for _, in := range [][]File{files, nil} {
			data, err := enc(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gunzipJSONList[File](data)
			if err != nil {
				t.Fatalf("%s %v: %v", name, in, err)
			}
			if !slices.EqualFunc(got, in, func(a, b File) bool { return a.Path == b.Path && slices.Equal(a.Chunks, b.Chunks) }) {
				t.Errorf("%s: got %+v, want %+v", name, got, in)
			}
		}
	}
	for _, bad := range []any{map[string]int{"a": 1}, 7} {
		data, _ := gzipJSON(bad)
		if _, err := gunzipJSONList[File](data); err == nil {
			t.Errorf("%v decoded as a list", bad)
		}
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(`[{"path":"a.go"}] [{"path":"b.go"}]`))
	zw.Close()
	if _, err := gunzipJSONList[File](buf.Bytes()); err == nil {
		t.Error("two arrays decoded as one list")
	}
}
