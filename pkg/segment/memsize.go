package segment

import (
	"cmp"
	"reflect"
	"slices"
	"unsafe"
)

// heapOf estimates the heap bytes a value built from the segment holds (a
// Memo table): what its maps, slices, pointers and strings reach, each
// reached once, maps at their entries plus a swiss table's slack. Strings
// that alias the segment's mapped shards are not counted; strings shared
// with the segment's own heap structures are (an overestimate). A map or
// slice of more than sampleLen elements that reach heap memory is
// estimated from a sample (a map: sampleLen entries in its iteration
// order; a slice: evenly spaced elements, sampleLen to twice that),
// scaled to its length: the tables of a
// 100k-chunk repository are sized in about a millisecond instead of tens
// (the first query on a new snapshot builds and sizes them all).
func (s *Segment) heapOf(v any) int64 {
	if v == nil {
		return 0
	}
	z := sizer{seen: map[uintptr]bool{}}
	for _, f := range s.maps {
		if d := f.Data(); f.Mapped() && len(d) > 0 {
			base := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
			z.ranges = append(z.ranges, [2]uintptr{base, base + uintptr(len(d))})
		}
	}
	slices.SortFunc(z.ranges, func(a, b [2]uintptr) int { return cmp.Compare(a[0], b[0]) })
	rv := reflect.ValueOf(v)
	return int64(rv.Type().Size()) + z.deep(rv)
}

// sampleLen is how many elements of a big map or slice heapOf walks.
const sampleLen = 1024

type sizer struct {
	seen   map[uintptr]bool
	ranges [][2]uintptr // the mapped shards' address ranges, sorted
}

func (z *sizer) first(p uintptr) bool {
	if p == 0 || z.seen[p] {
		return false
	}
	z.seen[p] = true
	return true
}

func (z *sizer) aliasesMap(p uintptr) bool {
	i, _ := slices.BinarySearchFunc(z.ranges, p, func(r [2]uintptr, p uintptr) int {
		if r[1] <= p {
			return -1
		}
		if r[0] > p {
			return 1
		}
		return 0
	})
	return i < len(z.ranges) && p >= z.ranges[i][0] && p < z.ranges[i][1]
}

// scaled is the sum over a sample of n elements (walked: of them) scaled
// to all n.
func scaled(sum int64, walked, n int) int64 {
	if walked == 0 || walked == n {
		return sum
	}
	return sum * int64(n) / int64(walked)
}

// deep is the heap bytes v reaches, not counting v's own inline bytes.
func (z *sizer) deep(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.String:
		if v.Len() == 0 {
			return 0
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(v.String())))
		if z.aliasesMap(p) || !z.first(p) {
			return 0
		}
		return alloc(int64(v.Len()))
	case reflect.Slice:
		if v.IsNil() || !z.first(v.Pointer()) {
			return 0
		}
		n := alloc(int64(v.Cap()) * int64(v.Type().Elem().Size()))
		if hasRefs(v.Type().Elem()) {
			l := v.Len()
			step := max(1, l/sampleLen)
			var sum int64
			walked := 0
			for i := 0; i < l; i += step {
				sum += z.deep(v.Index(i))
				walked++
			}
			n += scaled(sum, walked, l)
		}
		return n
	case reflect.Map:
		if v.IsNil() || !z.first(v.Pointer()) {
			return 0
		}
		kt, vt := v.Type().Key(), v.Type().Elem()
		// Swiss tables: groups of 8 slots with a control byte each, at
		// most 7/8 full and about 2/3 on average (tables double).
		slot := int64(kt.Size()+vt.Size()) + 1
		n := 48 + (int64(v.Len())*3/2+8)*slot
		if hasRefs(kt) || hasRefs(vt) {
			// A map's iteration starts at a random place: the sample is
			// a run of entries from there.
			var sum int64
			walked := 0
			for it := v.MapRange(); walked < sampleLen && it.Next(); walked++ {
				sum += z.deep(it.Key()) + z.deep(it.Value())
			}
			n += scaled(sum, walked, v.Len())
		}
		return n
	case reflect.Pointer:
		if v.IsNil() || !z.first(v.Pointer()) {
			return 0
		}
		return int64(v.Type().Elem().Size()) + z.deep(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		e := v.Elem()
		switch e.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			return z.deep(e)
		}
		return int64(e.Type().Size()) + z.deep(e)
	case reflect.Struct:
		var n int64
		for i := range v.NumField() {
			n += z.deep(v.Field(i))
		}
		return n
	case reflect.Array:
		var n int64
		if hasRefs(v.Type().Elem()) {
			for i := range v.Len() {
				n += z.deep(v.Index(i))
			}
		}
		return n
	}
	return 0
}

// alloc is the heap an allocation of n bytes takes: rounded up to the
// allocator's size classes (to 8 bytes, and about 1/16 more past 128).
func alloc(n int64) int64 {
	n = (n + 7) &^ 7
	if n > 128 {
		n += n / 16
	}
	return n
}

// hasRefs reports whether values of t can reach heap memory.
func hasRefs(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Struct:
		for i := range t.NumField() {
			if hasRefs(t.Field(i).Type) {
				return true
			}
		}
	case reflect.Array:
		return t.Len() > 0 && hasRefs(t.Elem())
	}
	return false
}
