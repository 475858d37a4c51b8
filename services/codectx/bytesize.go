package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// byteUnits are the units a size flag takes, as GOMEMLIMIT takes them
// (powers of two) and in powers of ten.
var byteUnits = map[string]int64{
	"b":   1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// parseBytes reads a size in bytes: an integer, optionally negative
// (some flags give a negative value a meaning), with an optional unit
// from byteUnits, case-insensitive ("640MiB", "1GB", "4096").
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	if i < len(t) && (t[i] == '-' || t[i] == '+') {
		i++
	}
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: want an integer number of bytes, optionally with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s)
	}
	if unit == "" {
		return n, nil
	}
	m, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, t[i:])
	}
	if n > math.MaxInt64/m || n < math.MinInt64/m {
		return 0, fmt.Errorf("size %q: out of range", s)
	}
	return n * m, nil
}

// byteSize is the flag.Value of a size flag. When the flag is not given on
// the command line, parseFlags reads env (if set) with the same syntax and
// fails on a value it cannot read, instead of silently keeping the default.
type byteSize struct {
	v   *int64
	env string
}

func (b byteSize) String() string {
	if b.v == nil {
		return "0"
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b.v = n
	return nil
}

// bytesVar registers a size flag at p with default def; env, when not
// empty, names the environment variable that overrides the default.
func bytesVar(fs *flag.FlagSet, p *int64, name, env string, def int64, usage string) {
	*p = def
	fs.Var(byteSize{v: p, env: env}, name, usage)
}

// bytesFlag is bytesVar returning a new variable.
func bytesFlag(fs *flag.FlagSet, name string, def int64, usage string) *int64 {
	p := new(int64)
	bytesVar(fs, p, name, "", def, usage)
	return p
}

// applyBytesEnv sets each size flag of fs that the command line did not
// give from its environment variable.
func applyBytesEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(byteSize)
		if !ok || b.env == "" || given[f.Name] {
			return
		}
		if s := os.Getenv(b.env); s != "" {
			if err := b.Set(s); err != nil {
				errs = append(errs, fmt.Errorf("%s: $%s: %w", fs.Name(), b.env, err))
			}
		}
	})
	return errors.Join(errs...)
}
