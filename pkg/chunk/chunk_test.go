package chunk

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/codectx"
)

// want is the expected shape of one chunk; zero fields are not checked,
// except that nil slices are checked as empty when check* is set.
type want struct {
	kind       codectx.Kind
	name       string
	start, end int
	sig        string
	doc        string
	calls      []string
	types      []string
	checkCalls bool
	checkTypes bool
	bodyHas    []string
	bodyNot    []string
}

func parse(t *testing.T, path, src string) Result {
	t.Helper()
	r := Parse(context.Background(), path, []byte(src), Options{})
	if r.Skip != "" || r.Degraded != "" {
		t.Fatalf("%s: skip=%q degraded=%q", path, r.Skip, r.Degraded)
	}
	checkInvariants(t, src, r)
	return r
}

// checkInvariants asserts what holds for every chunk of every file.
func checkInvariants(t *testing.T, src string, r Result) {
	t.Helper()
	if len(r.Chunks) == 0 {
		t.Fatal("no chunks")
	}
	for i, c := range r.Chunks {
		if c.Hash != codectx.HashText(c.Body) {
			t.Errorf("%s: hash mismatch", c.Name)
		}
		if c.StartByte > c.EndByte || c.EndByte > len(src) || c.StartLine > c.EndLine {
			t.Errorf("%s: bad span bytes %d-%d lines %d-%d", c.Name, c.StartByte, c.EndByte, c.StartLine, c.EndLine)
			continue
		}
		if got := strings.Count(src[:c.StartByte], "\n") + 1; got != c.StartLine {
			t.Errorf("%s: StartLine %d, bytes say %d", c.Name, c.StartLine, got)
		}
		isOutline := c.Body != src[c.StartByte:c.EndByte]
		if isOutline && !strings.Contains(c.Body, "...") {
			t.Errorf("%s: Body is neither the source slice nor an outline", c.Name)
		}
		if i > 0 && c.StartByte < r.Chunks[i-1].StartByte {
			t.Errorf("%s: chunks not in source order", c.Name)
		}
		if c.Path == "" || c.Language != r.Language {
			t.Errorf("%s: path %q language %q", c.Name, c.Path, c.Language)
		}
	}
	if r.Chunks[0].Kind != codectx.KindModule && r.Language != codectx.Text && r.Language != codectx.Markdown {
		t.Errorf("first chunk is %s, want module", r.Chunks[0].Kind)
	}
}

func byName(r Result) map[string]codectx.Chunk {
	m := map[string]codectx.Chunk{}
	for _, c := range r.Chunks {
		if _, dup := m[c.Name]; !dup {
			m[c.Name] = c
		}
	}
	return m
}

func names(r Result) []string {
	var out []string
	for _, c := range r.Chunks {
		out = append(out, string(c.Kind)+" "+c.Name)
	}
	return out
}

func checkChunks(t *testing.T, r Result, wants []want) {
	t.Helper()
	got := byName(r)
	for _, w := range wants {
		c, ok := got[w.name]
		if !ok {
			t.Errorf("no chunk %q; have %q", w.name, names(r))
			continue
		}
		if c.Kind != w.kind {
			t.Errorf("%s: kind %q, want %q", w.name, c.Kind, w.kind)
		}
		if w.start != 0 && (c.StartLine != w.start || c.EndLine != w.end) {
			t.Errorf("%s: lines %d-%d, want %d-%d", w.name, c.StartLine, c.EndLine, w.start, w.end)
		}
		if w.sig != "" && c.Signature != w.sig {
			t.Errorf("%s: signature %q, want %q", w.name, c.Signature, w.sig)
		}
		if w.doc != "" && c.Doc != w.doc {
			t.Errorf("%s: doc %q, want %q", w.name, c.Doc, w.doc)
		}
		if (w.calls != nil || w.checkCalls) && !reflect.DeepEqual(c.Calls, w.calls) {
			t.Errorf("%s: calls %q, want %q", w.name, c.Calls, w.calls)
		}
		if (w.types != nil || w.checkTypes) && !reflect.DeepEqual(c.Types, w.types) {
			t.Errorf("%s: types %q, want %q", w.name, c.Types, w.types)
		}
		for _, s := range w.bodyHas {
			if !strings.Contains(c.Body, s) {
				t.Errorf("%s: body lacks %q:\n%s", w.name, s, c.Body)
			}
		}
		for _, s := range w.bodyNot {
			if strings.Contains(c.Body, s) {
				t.Errorf("%s: body has %q:\n%s", w.name, s, c.Body)
			}
		}
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		path    string
		content string
		want    codectx.Language
	}{
		{"a/b.go", "", codectx.Go},
		{"x.py", "", codectx.Python},
		{"x.pyi", "", codectx.Python},
		{"x.ts", "", codectx.TypeScript},
		{"types/index.d.ts", "", codectx.TypeScript},
		{"x.mts", "", codectx.TypeScript},
		{"x.cts", "", codectx.TypeScript},
		{"X.TSX", "", codectx.TSX},
		{"x.js", "", codectx.JavaScript},
		{"x.mjs", "", codectx.JavaScript},
		{"x.cjs", "", codectx.JavaScript},
		{"x.jsx", "", codectx.JavaScript},
		{"A.java", "", codectx.Java},
		{"lib.rs", "", codectx.Rust},
		{"README.md", "", codectx.Markdown},
		{"doc.markdown", "", codectx.Markdown},
		{"config.yaml", "", codectx.Text},
		{"Makefile", "all:\n", codectx.Text},
		{"bin/tool", "#!/usr/bin/env python3\nprint(1)\n", codectx.Python},
		{"bin/serve", "#!/usr/bin/env node\n", codectx.JavaScript},
	}
	for _, tt := range tests {
		if got := Detect(tt.path, []byte(tt.content)); got != tt.want {
			t.Errorf("Detect(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

const goSrc = `// Copyright 2024 The Authors.

// Package router routes requests.
package router

import (
	"fmt"
	h "net/http"
)

// ErrNoRoute is returned when nothing matches.
var ErrNoRoute = fmt.Errorf("no route")

// Router dispatches requests.
// It is safe for concurrent use.
type Router struct {
	mux *h.ServeMux
	n   int
}

// Handler handles.
type Handler interface {
	Serve(w h.ResponseWriter, r *h.Request) error
}

type (
	// ID names a route.
	ID = string
	Table map[ID]*Router
)

//go:noinline
// Mount attaches sub under prefix.
func (r *Router) Mount(prefix string, sub *Router) error {
	if len(prefix) == 0 {
		return ErrNoRoute
	}
	r.mux.Handle(prefix, sub.handler())
	fmt.Println(prefix)
	return validate(prefix).Err()
}

func (r Router) Name() string { return "router" }

func (l List[T]) Len() int { return len(l) }

func New() *Router {
	return &Router{mux: h.NewServeMux()}
}
`

func TestParseGo(t *testing.T) {
	r := parse(t, "internal/router/router.go", goSrc)
	if r.Package != "router" {
		t.Errorf("package %q", r.Package)
	}
	if want := []string{"fmt", "net/http"}; !reflect.DeepEqual(r.Imports, want) {
		t.Errorf("imports %q, want %q", r.Imports, want)
	}
	checkChunks(t, r, []want{
		{kind: codectx.KindModule, name: "router", start: 3, end: 9, doc: "Package router routes requests.", bodyNot: []string{"Copyright"}},
		{kind: codectx.KindWindow, name: "internal/router/router.go#L11", start: 11, end: 12, calls: []string{"fmt.Errorf"}},
		{kind: codectx.KindStruct, name: "Router", start: 14, end: 19, sig: "type Router struct",
			doc: "Router dispatches requests.\nIt is safe for concurrent use.", types: []string{"h.ServeMux"}},
		{kind: codectx.KindInterface, name: "Handler", start: 21, end: 24, sig: "type Handler interface",
			types: []string{"h.ResponseWriter", "h.Request"}},
		{kind: codectx.KindType, name: "ID", start: 27, end: 28, sig: "type ID = string", doc: "ID names a route."},
		{kind: codectx.KindType, name: "Table", start: 29, end: 29, sig: "type Table map[ID]*Router", types: []string{"ID", "Router"}},
		{kind: codectx.KindMethod, name: "(*Router).Mount", start: 32, end: 41,
			sig:   "func (r *Router) Mount(prefix string, sub *Router) error",
			doc:   "Mount attaches sub under prefix.",
			calls: []string{"r.mux.Handle", "sub.handler", "fmt.Println", "Err", "validate"},
			types: []string{"Router"}},
		{kind: codectx.KindMethod, name: "(Router).Name", start: 43, end: 43, sig: "func (r Router) Name() string", checkCalls: true},
		{kind: codectx.KindMethod, name: "(List).Len", start: 45, end: 45, types: []string{"List", "T"}},
		{kind: codectx.KindFunction, name: "New", start: 47, end: 49, calls: []string{"h.NewServeMux"}, types: []string{"Router"}},
	})
	for _, c := range r.Chunks {
		if strings.HasPrefix(c.Body, "type (") || strings.TrimSpace(c.Body) == ")" {
			t.Errorf("grouped type punctuation leaked into chunk %q", c.Name)
		}
	}
}

const pySrc = `#!/usr/bin/env python
"""Application object.

Holds the registry.
"""
from __future__ import annotations

import os.path as osp, sys
from . import views
from ..pkg.mod import (a, b)
from .utils import helper

log = make_logger(__name__)


@decorate(1)
class Flask(Scaffold, metaclass=Meta):
    """The flask object."""

    debug: bool = False

    def add_url_rule(self, rule: str, view: t.Callable) -> Rule:
        """Connect a URL rule.

        Extra indented lines.
        """
        self._check(rule)
        return helper(rule).bind()

    @property
    def name(self) -> str:
        def inner():
            return os.getcwd()
        return inner()

    class Config(dict):
        def load(self):
            pass


async def main(argv: list[str]) -> Optional[Flask]:
    app = Flask()
    await app.run(argv)
`

func TestParsePython(t *testing.T) {
	r := parse(t, "src/flask/app.py", pySrc)
	if want := []string{"__future__", "os.path", "sys", ".", "..pkg.mod", ".utils"}; !reflect.DeepEqual(r.Imports, want) {
		t.Errorf("imports %q, want %q", r.Imports, want)
	}
	checkChunks(t, r, []want{
		{kind: codectx.KindModule, name: "src.flask.app", start: 2, end: 11, doc: "Application object.\n\nHolds the registry."},
		{kind: codectx.KindWindow, name: "src/flask/app.py#L13", start: 13, end: 13, calls: []string{"make_logger"}},
		{kind: codectx.KindClass, name: "Flask", start: 16, end: 38, sig: "class Flask(Scaffold, metaclass=Meta)",
			doc: "The flask object.", calls: []string{"decorate"}, types: []string{"Scaffold"},
			bodyHas: []string{"@decorate(1)", "debug: bool = False", "def add_url_rule(self, rule: str, view: t.Callable) -> Rule: ...",
				"    @property\n    def name(self) -> str: ...", "class Config(dict): ..."},
			bodyNot: []string{"self._check", "Connect a URL rule", "def load"}},
		{kind: codectx.KindMethod, name: "Flask.add_url_rule", start: 22, end: 28,
			sig: "def add_url_rule(self, rule: str, view: t.Callable) -> Rule", doc: "Connect a URL rule.\n\nExtra indented lines.",
			calls: []string{"self._check", "bind", "helper"}, types: []string{"t.Callable", "Rule"}},
		{kind: codectx.KindMethod, name: "Flask.name", start: 30, end: 34, calls: []string{"os.getcwd", "inner"}},
		{kind: codectx.KindClass, name: "Flask.Config", start: 36, end: 38},
		{kind: codectx.KindMethod, name: "Flask.Config.load", start: 37, end: 38},
		{kind: codectx.KindFunction, name: "main", start: 41, end: 43, sig: "async def main(argv: list[str]) -> Optional[Flask]",
			calls: []string{"Flask", "app.run"}, types: []string{"Optional", "Flask"}},
	})
	if _, ok := byName(r)["inner"]; ok {
		t.Error("nested function got its own chunk")
	}
	for path, want := range map[string]string{"pkg/__init__.py": "pkg", "a/b/c.pyi": "a.b.c", "m.py": "m"} {
		if got := pyModule(path, ""); got != want {
			t.Errorf("pyModule(%q) = %q, want %q", path, got, want)
		}
	}
}

const javaSrc = `/* License */
package org.jsoup.nodes;

import java.util.List;
import static org.junit.Assert.assertEquals;

/**
 * A HTML document.
 *
 * @author someone
 */
@Deprecated
public class Document extends Element implements Cloneable {
    private OutputSettings settings = new OutputSettings();

    /**
     * Get the output settings.
     */
    public OutputSettings outputSettings(List<String> names) {
        this.touch(names).done();
        return Util.copy(settings);
    }

    Document(String baseUri) {
        super(baseUri);
    }

    public enum QuirksMode {
        noQuirks, quirks;
        boolean on() { return this != noQuirks; }
    }
}
`

func TestParseJava(t *testing.T) {
	r := parse(t, "src/main/java/org/jsoup/nodes/Document.java", javaSrc)
	if r.Package != "org.jsoup.nodes" {
		t.Errorf("package %q", r.Package)
	}
	if want := []string{"java.util.List", "org.junit.Assert.assertEquals"}; !reflect.DeepEqual(r.Imports, want) {
		t.Errorf("imports %q, want %q", r.Imports, want)
	}
	checkChunks(t, r, []want{
		{kind: codectx.KindModule, name: "org.jsoup.nodes.Document", start: 2, end: 5},
		{kind: codectx.KindClass, name: "Document", start: 7, end: 32,
			sig: "@Deprecated public class Document extends Element implements Cloneable", doc: "A HTML document.\n\n@author someone",
			types:   []string{"Element", "Cloneable", "OutputSettings"},
			bodyHas: []string{"public OutputSettings outputSettings(List<String> names) { ... }", "Document(String baseUri) { ... }", "public enum QuirksMode { ... }"},
			bodyNot: []string{"Util.copy", "Get the output settings"}},
		{kind: codectx.KindMethod, name: "Document.outputSettings", start: 16, end: 22, doc: "Get the output settings.",
			sig:   "public OutputSettings outputSettings(List<String> names)",
			calls: []string{"done", "this.touch", "Util.copy"}, types: []string{"OutputSettings", "List", "String"}},
		{kind: codectx.KindMethod, name: "Document.Document", start: 24, end: 26, sig: "Document(String baseUri)"},
		{kind: codectx.KindType, name: "Document.QuirksMode", start: 28, end: 31},
		{kind: codectx.KindMethod, name: "Document.QuirksMode.on", start: 30, end: 30},
	})
}

const tsSrc = `import express, { Router } from "express";
import * as path from './router';
export { x } from "../shared/x";

/** The application. */
export class App<T> extends Base<T> implements Handler {
  private stack: Layer[] = [];

  /**
   * Register middleware.
   */
  use(fn: Middleware): this {
    this.stack.push(new Layer(fn));
    return this;
  }

  get size(): number { return this.stack.length; }

  handle = (req: Request) => { dispatch(req, this.stack); };
}

export interface Handler {
  handle(req: Request): void;
}

export type Middleware = (req: Request) => void;

export enum Mode { Dev, Prod }

export const createApp = (opts: Options): App<string> => {
  const fs = require("fs");
  return new App(opts);
};

export default function listen(port: number) {
  path.join("a", "b");
}
`

func TestParseTypeScript(t *testing.T) {
	r := parse(t, "src/app.ts", tsSrc)
	if want := []string{"express", "./router", "../shared/x", "fs"}; !reflect.DeepEqual(r.Imports, want) {
		t.Errorf("imports %q, want %q", r.Imports, want)
	}
	checkChunks(t, r, []want{
		{kind: codectx.KindModule, name: "src/app", start: 1, end: 2},
		{kind: codectx.KindClass, name: "App", start: 5, end: 20, sig: "export class App<T> extends Base<T> implements Handler",
			doc: "The application.", bodyHas: []string{"use(fn: Middleware): this { ... }", "get size(): number { ... }", "handle = (req: Request) => { ... }"},
			bodyNot: []string{"this.stack.push"}},
		{kind: codectx.KindMethod, name: "App.use", start: 9, end: 15, doc: "Register middleware.", sig: "use(fn: Middleware): this",
			calls: []string{"this.stack.push"}, types: []string{"Middleware", "Layer"}},
		{kind: codectx.KindMethod, name: "App.size", start: 17, end: 17},
		{kind: codectx.KindMethod, name: "App.handle", start: 19, end: 19, calls: []string{"dispatch"}, types: []string{"Request"}},
		{kind: codectx.KindInterface, name: "Handler", start: 22, end: 24, sig: "export interface Handler"},
		{kind: codectx.KindType, name: "Middleware", start: 26, end: 26},
		{kind: codectx.KindType, name: "Mode", start: 28, end: 28, sig: "export enum Mode"},
		{kind: codectx.KindFunction, name: "createApp", start: 30, end: 33, calls: []string{"require"}, types: []string{"Options", "App"}},
		{kind: codectx.KindFunction, name: "listen", start: 35, end: 37, calls: []string{"path.join"}},
	})
}

func TestParseJavaScriptAndTSX(t *testing.T) {
	js := `'use strict';
const EventEmitter = require('events');

/**
 * Router doc.
 */
class Router extends EventEmitter {
  static create() { return new Router(); }
}

module.exports = Router;
`
	r := parse(t, "lib/router.js", js)
	if want := []string{"events"}; !reflect.DeepEqual(r.Imports, want) {
		t.Errorf("imports %q, want %q", r.Imports, want)
	}
	checkChunks(t, r, []want{
		{kind: codectx.KindModule, name: "lib/router", start: 1, end: 2},
		{kind: codectx.KindClass, name: "Router", start: 4, end: 9, doc: "Router doc.", types: []string{"EventEmitter"}},
		{kind: codectx.KindMethod, name: "Router.create", start: 8, end: 8, types: []string{"Router"}},
		{kind: codectx.KindWindow, name: "lib/router.js#L11", start: 11, end: 11},
	})

	tsx := `import React from "react";

export function Greeting({ name }: Props): JSX.Element {
  const [n, setN] = useState<number>(0);
  return <button onClick={() => setN(n + 1)}>{name}</button>;
}
`
	r = parse(t, "web/Greeting.tsx", tsx)
	if r.Language != codectx.TSX {
		t.Errorf("language %q", r.Language)
	}
	checkChunks(t, r, []want{
		{kind: codectx.KindFunction, name: "Greeting", start: 3, end: 6, calls: []string{"useState", "setN"}, types: []string{"Props", "JSX.Element"}},
	})
}

const rustSrc = `//! Deserialization.
//! Second line.
use std::{fmt, io::{self, Read}};
use crate::de::Deserializer as De;
use super::x;
extern crate serde;
mod read;

/// A JSON deserializer.
#[derive(Debug)]
pub struct Deserializer<R> {
    read: R,
}

pub trait Visitor {
    fn visit(&self);
    /// Default.
    fn name(&self) -> String { String::new() }
}

impl<'de, R: Read> de::Deserializer<'de> for &mut Deserializer<R> {
    /// Deserialize anything.
    fn deserialize_any<V>(self, v: V) -> Result<V::Value> {
        self.parse_value(&v)?;
        Value::from(x.y.z())
    }
}

pub enum Number { Int(i64), Float(f64) }

// not a doc comment
fn free() {}

#[cfg(test)]
mod tests {
    fn roundtrip() { super::free(); }
}
`

func TestParseRust(t *testing.T) {
	r := parse(t, "serde_json/src/de.rs", rustSrc)
	if r.Package != "crate::de" {
		t.Errorf("package %q", r.Package)
	}
	if want := []string{"std::fmt", "std::io", "std::io::Read", "crate::de::Deserializer", "super::x", "serde"}; !reflect.DeepEqual(r.Imports, want) {
		t.Errorf("imports %q, want %q", r.Imports, want)
	}
	checkChunks(t, r, []want{
		{kind: codectx.KindModule, name: "crate::de", start: 1, end: 7, doc: "Deserialization.\nSecond line."},
		{kind: codectx.KindStruct, name: "Deserializer", start: 9, end: 13, doc: "A JSON deserializer.", sig: "pub struct Deserializer<R>",
			bodyHas: []string{"#[derive(Debug)]"}},
		{kind: codectx.KindInterface, name: "Visitor", start: 15, end: 19, bodyHas: []string{"fn visit(&self);", "fn name(&self) -> String { ... }"}},
		{kind: codectx.KindMethod, name: "Visitor::name", start: 17, end: 18, doc: "Default.", calls: []string{"String::new"}},
		{kind: codectx.KindType, name: "impl de::Deserializer for Deserializer", start: 21, end: 27},
		{kind: codectx.KindMethod, name: "Deserializer::deserialize_any", start: 22, end: 26, doc: "Deserialize anything.",
			sig:   "fn deserialize_any<V>(self, v: V) -> Result<V::Value>",
			calls: []string{"self.parse_value", "Value::from", "x.y.z"}, types: []string{"V", "Result", "V::Value"}},
		{kind: codectx.KindType, name: "Number", start: 29, end: 29},
		{kind: codectx.KindFunction, name: "free", start: 32, end: 32, doc: ""},
		{kind: codectx.KindFunction, name: "tests::roundtrip", start: 36, end: 36, calls: []string{"super::free"}},
	})
	if c := byName(r)["free"]; c.Doc != "" || c.StartLine != 32 {
		t.Errorf("plain comment taken as doc: %q line %d", c.Doc, c.StartLine)
	}
	for path, want := range map[string]string{"src/lib.rs": "crate", "src/de/mod.rs": "crate::de", "x/src/a/b.rs": "crate::a::b", "build.rs": "crate::build"} {
		if got := rustModule(path); got != want {
			t.Errorf("rustModule(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestModuleChunkWithoutHeader(t *testing.T) {
	r := parse(t, "a.py", "def f():\n    return 1\n")
	m := r.Chunks[0]
	if m.Kind != codectx.KindModule || m.Name != "a" || m.Body != "" || m.StartLine != 1 || m.EndLine != 1 {
		t.Errorf("module chunk %+v", m)
	}
	if len(r.Chunks) != 2 || r.Chunks[1].Name != "f" {
		t.Errorf("chunks %q", names(r))
	}
}

func TestSkip(t *testing.T) {
	long := strings.Repeat("x", 6000)
	tests := []struct {
		name    string
		path    string
		content string
		opt     Options
		want    string
	}{
		{"nul byte", "a.go", "package a\x00\x01", Options{}, codectx.SkipBinary},
		{"control bytes", "blob.dat", strings.Repeat("\x01\x02\x03a", 100), Options{}, codectx.SkipBinary},
		{"too large", "a.go", "package a\n" + strings.Repeat("// x\n", 100), Options{MaxFileSize: 100}, codectx.SkipTooLarge},
		{"default max", "a.txt", strings.Repeat("a\n", 1<<19+1), Options{}, codectx.SkipTooLarge},
		{"long line js", "dist/app.js", "var a=1;" + long, Options{}, codectx.SkipMinified},
		{"wide json", "data.json", strings.Repeat(`{"k":"`+strings.Repeat("v", 400)+`"}`+"\n", 10), Options{}, codectx.SkipMinified},
		{"min.js path", "vendor/jquery.min.js", "var a = 1;\n", Options{}, codectx.SkipGenerated},
		{"pb.go path", "api/v1/api.pb.go", "package api\n", Options{}, codectx.SkipGenerated},
		{"pb2 path", "api/api_pb2.py", "x = 1\n", Options{}, codectx.SkipGenerated},
		{"lock file", "web/package-lock.json", "{}\n", Options{}, codectx.SkipGenerated},
		{"go header", "z.go", "// Code generated by stringer -type=Kind; DO NOT EDIT.\n\npackage a\n", Options{}, codectx.SkipGenerated},
		{"python header", "z.py", "# Code generated by tool. DO NOT EDIT.\nx = 1\n", Options{}, codectx.SkipGenerated},
		{"@generated", "Z.java", "/* @generated */\nclass Z {}\n", Options{}, codectx.SkipGenerated},
		{"empty", "a.go", "", Options{}, codectx.SkipEmpty},
		{"whitespace", "a.md", " \n\t\n", Options{}, codectx.SkipEmpty},
		{"long line go is fine", "a.go", "package a\n\nvar s = \"" + long + "\"\n", Options{}, ""},
		{"short wide json is fine", "a.json", `{"k": "` + strings.Repeat("v", 400) + `"}`, Options{}, ""},
		{"mentions generated code", "a.go", "package a\n\n// Code generated files are skipped.\nfunc f() {}\n", Options{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Parse(context.Background(), tt.path, []byte(tt.content), tt.opt)
			if r.Skip != tt.want {
				t.Fatalf("Skip = %q, want %q", r.Skip, tt.want)
			}
			if tt.want != "" && len(r.Chunks) != 0 {
				t.Errorf("skipped file has %d chunks", len(r.Chunks))
			}
			if tt.want == "" && len(r.Chunks) == 0 {
				t.Error("no chunks")
			}
		})
	}
}

func TestInvalidUTF8(t *testing.T) {
	src := "package a\n\n// Caf\xe9 doc.\nfunc F() { g() }\n"
	r := Parse(context.Background(), "a.go", []byte(src), Options{})
	if r.Degraded != codectx.DegradedInvalidUTF8 || r.Skip != "" {
		t.Fatalf("skip=%q degraded=%q", r.Skip, r.Degraded)
	}
	c := byName(r)["F"]
	if c.Doc != "Caf\uFFFD doc." || !reflect.DeepEqual(c.Calls, []string{"g"}) {
		t.Errorf("F doc %q calls %q", c.Doc, c.Calls)
	}
	repaired := strings.ToValidUTF8(src, "\uFFFD")
	if repaired[c.StartByte:c.EndByte] != c.Body {
		t.Error("offsets do not refer to the repaired text")
	}
}

func TestParseTimeout(t *testing.T) {
	// Deeply nested expressions; a 1µs budget cannot parse 200 KB of them.
	deep := "x = " + strings.Repeat("[", 50000) + strings.Repeat("]", 50000) + "\n"
	deep += strings.Repeat("y = ((((((((1))))))))\n", 5000)
	r := Parse(context.Background(), "deep.py", []byte(deep), Options{ParseTimeout: time.Microsecond})
	if r.Degraded != codectx.DegradedParseTimeout {
		t.Fatalf("degraded %q, want %q", r.Degraded, codectx.DegradedParseTimeout)
	}
	checkWindows(t, r, len(strings.TrimSpace(deep)))
	// The pooled parser must be usable again after a halted parse.
	parse(t, "ok.py", pySrc)
}

func TestParseDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Parse(ctx, "a.go", []byte(goSrc), Options{})
	if r.Degraded != codectx.DegradedParseTimeout {
		t.Fatalf("degraded %q", r.Degraded)
	}
	checkWindows(t, r, len(strings.TrimSpace(goSrc)))
}

func TestParsePanicRecovered(t *testing.T) {
	testHookParsed = func() { panic("boom") }
	r := Parse(context.Background(), "a.go", []byte(goSrc), Options{})
	testHookParsed = nil
	if r.Degraded != codectx.DegradedParseError {
		t.Fatalf("degraded %q", r.Degraded)
	}
	checkWindows(t, r, len(strings.TrimSpace(goSrc)))
	parse(t, "a.go", goSrc)
}

func TestParseGarbage(t *testing.T) {
	src := strings.Repeat("}}} ))) {{{ ;; <<< >>> @@ \n", 50)
	r := Parse(context.Background(), "junk.go", []byte(src), Options{})
	if r.Degraded != codectx.DegradedParseError {
		t.Fatalf("degraded %q", r.Degraded)
	}
	checkWindows(t, r, len(strings.TrimSpace(src)))
	// A file with a local syntax error still gets its symbols.
	r = parse(t, "b.go", "package b\n\nfunc A() { x := }\n\nfunc B() {}\n")
	if _, ok := byName(r)["B"]; !ok {
		t.Errorf("chunks %q", names(r))
	}
}

func checkWindows(t *testing.T, r Result, size int) {
	t.Helper()
	if len(r.Chunks) == 0 {
		t.Fatal("no windows")
	}
	for _, c := range r.Chunks {
		if c.Kind != codectx.KindWindow {
			t.Fatalf("chunk %q is %s, want window", c.Name, c.Kind)
		}
	}
	if last := r.Chunks[len(r.Chunks)-1]; last.EndByte < size {
		t.Errorf("windows end at %d of %d", last.EndByte, size)
	}
}

func TestTextWindows(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		if i > 45 && i <= 85 {
			b.WriteString("\n") // lines 46-85 are blank: window 41-80 is partly blank, 81-85 dropped
			continue
		}
		fmt.Fprintf(&b, "key%d: value\n", i)
	}
	src := b.String()
	r := Parse(context.Background(), "conf/app.yaml", []byte(src), Options{WindowLines: 40})
	checkInvariants(t, src, r)
	var got []string
	for _, c := range r.Chunks {
		if c.Kind != codectx.KindWindow {
			t.Errorf("%s: kind %s", c.Name, c.Kind)
		}
		got = append(got, fmt.Sprintf("%s %d-%d", c.Name, c.StartLine, c.EndLine))
	}
	want := []string{"conf/app.yaml#L1 1-40", "conf/app.yaml#L41 41-45", "conf/app.yaml#L86 86-100"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("windows %q, want %q", got, want)
	}
}

func TestMarkdown(t *testing.T) {
	src := "Intro text.\n\n# Title\n\nSome words.\n\n## Install\n\n```sh\n# not a heading\ngo install\n```\n\n## Use ##\nRun it.\n"
	r := Parse(context.Background(), "README.md", []byte(src), Options{})
	checkInvariants(t, src, r)
	var got []string
	for _, c := range r.Chunks {
		got = append(got, fmt.Sprintf("%s|%s|%d-%d", c.Name, c.Signature, c.StartLine, c.EndLine))
	}
	want := []string{"README.md#L1||1-1", "Title|Title|3-5", "Install|Title > Install|7-12", "Use|Title > Use|14-15"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sections %q, want %q", got, want)
	}
	// A long section is split into windows.
	long := "# Big\n" + strings.Repeat("line\n", 100)
	r = Parse(context.Background(), "big.md", []byte(long), Options{WindowLines: 40})
	if len(r.Chunks) != 3 || r.Chunks[0].Name != "Big" || r.Chunks[1].Name != "Big #L41" {
		t.Errorf("long section chunks %q", names(r))
	}
}

func TestCommentOnlyGapsDropped(t *testing.T) {
	src := "package a\n\n// Section: helpers.\n// ----\n\nfunc A() {}\n\n/* trailing\n   notes */\n"
	r := parse(t, "a.go", src)
	if got := names(r); !reflect.DeepEqual(got, []string{"module a", "function A"}) {
		t.Errorf("chunks %q", got)
	}
}

func TestConcurrentParse(t *testing.T) {
	srcs := map[string]string{"a.go": goSrc, "a.py": pySrc, "A.java": javaSrc, "a.ts": tsSrc, "a.rs": rustSrc}
	want := map[string]int{}
	for p, s := range srcs {
		want[p] = len(parse(t, p, s).Chunks)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				for p, s := range srcs {
					if got := len(Parse(context.Background(), p, []byte(s), Options{}).Chunks); got != want[p] {
						t.Errorf("%s: %d chunks, want %d", p, got, want[p])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
