package chunk

import (
	"sort"
	"strconv"
	"strings"

	"codectx/pkg/codectx"
)

// lines indexes the line starts of a text for byte-to-line lookups.
type lines struct {
	src    string
	starts []int // byte offset of each line start; starts[0] == 0
}

func newLines(src string) *lines {
	starts := make([]int, 1, len(src)/32+1)
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' && i+1 < len(src) {
			starts = append(starts, i+1)
		}
	}
	return &lines{src: src, starts: starts}
}

// line returns the 1-based line holding byte b.
func (l *lines) line(b int) int {
	return sort.SearchInts(l.starts, b+1)
}

// span returns the 1-based inclusive line range of bytes [start, end).
func (l *lines) span(start, end int) (int, int) {
	s := l.line(start)
	if end <= start {
		return s, s
	}
	return s, l.line(end - 1)
}

// chunk builds a chunk over [start, end) with Body the exact slice.
func (l *lines) chunk(p string, lang codectx.Language, kind codectx.Kind, name string, start, end int) codectx.Chunk {
	body := l.src[start:end]
	sl, el := l.span(start, end)
	return codectx.Chunk{
		Path: p, Language: lang, Kind: kind, Name: name,
		StartLine: sl, EndLine: el, StartByte: start, EndByte: end,
		Body: body, Hash: codectx.HashText(body),
	}
}

func windowName(p string, line int) string {
	return p + "#L" + strconv.Itoa(line)
}

// windows cuts [from, to) into non-overlapping windows of n lines, dropping
// blank ones. The first window starts at from, which may be mid-line.
func (l *lines) windows(p string, lang codectx.Language, from, to, n int) []codectx.Chunk {
	var out []codectx.Chunk
	for from < to {
		first := l.line(from)
		end := to
		if first-1+n < len(l.starts) && l.starts[first-1+n] < to {
			end = l.starts[first-1+n]
		}
		if strings.TrimSpace(l.src[from:end]) != "" {
			s, e := trimSpan(l.src, from, end)
			out = append(out, l.chunk(p, lang, codectx.KindWindow, windowName(p, l.line(s)), s, e))
		}
		from = end
	}
	return out
}

// trimSpan narrows [s, e) to drop leading blank lines and trailing
// whitespace; a non-blank first line keeps its indentation.
func trimSpan(src string, s, e int) (int, int) {
	for e > s && isSpace(src[e-1]) {
		e--
	}
	for i := s; i < e; i++ {
		if src[i] == '\n' {
			s = i + 1
		} else if !isSpace(src[i]) {
			break
		}
	}
	return s, e
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// markdownChunks cuts Markdown into one chunk per ATX heading section
// (headings inside fenced code are ignored). Text before the first heading
// is a window; sections longer than 2n lines are split into n-line windows,
// the first named by the heading, the rest "heading #L<line>".
func markdownChunks(p string, src string, n int) []codectx.Chunk {
	l := newLines(src)
	type section struct {
		start int
		title string
		trail string
	}
	var secs []section
	var stack []struct {
		level int
		title string
	}
	fence := ""
	for i, st := range l.starts {
		end := len(src)
		if i+1 < len(l.starts) {
			end = l.starts[i+1]
		}
		text := strings.TrimRight(src[st:end], "\r\n")
		trimmed := strings.TrimLeft(text, " ")
		if len(text)-len(trimmed) > 3 {
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		level := 0
		for level < len(trimmed) && trimmed[level] == '#' {
			level++
		}
		if level == 0 || level > 6 || (level < len(trimmed) && trimmed[level] != ' ' && trimmed[level] != '\t') {
			continue
		}
		title := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(trimmed[level:]), "#"))
		if title == "" {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].level >= level {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, struct {
			level int
			title string
		}{level, title})
		parts := make([]string, len(stack))
		for j, h := range stack {
			parts[j] = h.title
		}
		secs = append(secs, section{start: st, title: title, trail: strings.Join(parts, " > ")})
	}
	if len(secs) == 0 {
		return l.windows(p, codectx.Markdown, 0, len(src), n)
	}
	out := l.windows(p, codectx.Markdown, 0, secs[0].start, n)
	for i, s := range secs {
		end := len(src)
		if i+1 < len(secs) {
			end = secs[i+1].start
		}
		sl, el := l.span(s.start, end)
		if el-sl+1 <= 2*n {
			a, b := trimSpan(src, s.start, end)
			c := l.chunk(p, codectx.Markdown, codectx.KindWindow, s.title, a, b)
			c.Signature = s.trail
			out = append(out, c)
			continue
		}
		for j, w := range l.windows(p, codectx.Markdown, s.start, end, n) {
			if j == 0 {
				w.Name = s.title
			} else {
				w.Name = s.title + " #L" + strconv.Itoa(w.StartLine)
			}
			w.Signature = s.trail
			out = append(out, w)
		}
	}
	return out
}
