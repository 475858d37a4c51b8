package query

import (
	"slices"
	"strings"

	"codectx/pkg/tokenize"
)

// abbrevPairs are the abbreviations programmers write for words that task
// and commit texts spell out: "Format f64 in error messages" changes a
// `fn fmt`, "bad request context" a `req` and a `ctx`. The list is the
// common vocabulary of code (as in the identifier-expansion literature),
// not drawn from any repository; each line is a word and its short forms.
const abbrevPairs = `
address addr
allocate alloc
allocation alloc
allocator alloc
argument arg
asynchronous async
attribute attr
authentication auth
authorization auth
boolean bool
buffer buf
button btn
calculate calc
character char
column col
command cmd
config cfg conf
configuration config cfg conf
connection conn
context ctx
current cur
database db
declaration decl
definition def
delete del
description desc
deserialize de
deserialization de
destination dst
directory dir
document doc
element elem
environment env
error err
execute exec
execution exec
expression expr
extension ext
format fmt
generate gen
generator gen
image img
implement impl
implementation impl
index idx
information info
initialize init
initialization init
integer int
iterator iter
length len
library lib
manager mgr
maximum max
message msg
minimum min
miscellaneous misc
mutable mut
number num
object obj
operation op
package pkg
parameter param
pointer ptr
position pos
previous prev
process proc
reference ref
regexp regex
repository repo
request req
response resp res
sequence seq
serialize ser
serialization ser
signature sig
source src
specification spec
statistic stat
string str
synchronize sync
system sys
template tmpl
temporary tmp temp
transaction txn tx
utility util
value val
variable var
`

// abbrevs maps a word (as a query token) to its short forms, and a short
// form to the words it stands for.
var abbrevs = func() map[string][]string {
	m := map[string][]string{}
	add := func(from, to string) {
		if slices.Contains(m[from], to) {
			return
		}
		m[from] = append(m[from], to)
	}
	for _, line := range strings.Split(abbrevPairs, "\n") {
		f := strings.Fields(line)
		for _, short := range f[min(1, len(f)):] {
			add(f[0], short)
			add(short, f[0])
		}
	}
	return m
}()

// abbrevWeight is the BM25 weight of a term added by abbreviation, against
// 1 for the query's own words.
const abbrevWeight = 0.25

// abbrevTerms returns the short or long forms of the prose words of q that
// terms does not already have. A word followed by a few more letters
// counts as the word ("formatting" -> fmt, "initialized" -> init). Words
// of an identifier the query writes out (value::Serializer, HTTPError)
// are the code's own spelling and are not expanded.
func abbrevTerms(q string, terms []string) []string {
	var out []string
	for _, f := range strings.Fields(q) {
		w := strings.Trim(f, ".,;:!?()[]{}\"'`")
		if w == "" || !isPlainWord(w) {
			continue
		}
		for _, t := range tokenize.Tokens(w) {
			for _, form := range abbrevForms(t) {
				if !slices.Contains(terms, form) && !slices.Contains(out, form) {
					out = append(out, form)
				}
			}
		}
	}
	return out
}

// abbrevForms returns the forms of token t, or of the word it inflects.
func abbrevForms(t string) []string {
	if forms, ok := abbrevs[t]; ok {
		return forms
	}
	for n := len(t) - 1; n >= 5 && n >= len(t)-4; n-- {
		if forms, ok := abbrevs[t[:n]]; ok {
			return forms
		}
	}
	return nil
}
