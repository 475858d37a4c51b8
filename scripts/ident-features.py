#!/usr/bin/env python3
"""Append identifier-word features to codectx feature dumps, offline (issue 13).

The engine's lexical lists score chunks and whole files on every word of
their text (code, comments and strings alike), and `sym_cover` counts the
query's words among the names a file defines. This script measures two
other views of a file, built at the task's base commit from the git
directory alone:

  identifiers   every identifier the code uses (defined or referenced),
                split into words (camelCase, snake_case), comments and
                string literals removed
  prose         the words of the file's comments and string literals

and scores each with BM25 (k1 1.2, b 0.75; document frequencies over the
task language's files of the tree, as eval restricts candidates) for the
whole query and for its title. Columns added to every file's vector
("names" extended), for `scripts/train-rank.py` feature sets such as
"first+id_bm25_q+id_rr_q":

  id_bm25_q, id_bm25_t   BM25 of the query's / title's words on the file's
                         identifier words, over the best among the top 20
  pr_bm25_q, pr_bm25_t   the same on the file's comment and string words
  id_rr_q, id_rr_t       10/(10+rank) of the file in the whole tree ranked by
                         identifier BM25 (0 beyond rank 200)
  id_cover_q             idf-weighted share of the query's distinct words
                         found among the file's identifier words

  scripts/ident-features.py --tasks TASKS.jsonl --mirrors DIR IN.jsonl OUT.jsonl
  scripts/ident-features.py --tasks TASKS.jsonl --mirrors DIR --recall IN.jsonl
  scripts/ident-features.py --selftest

DIR holds bare git directories as DIR/OWNER+NAME/repo. --recall prints, by
language, where the identifier ranking puts each task's first gold file
(is it a candidate list that reaches what the fused top 20 misses?).
"""
import argparse
import collections
import functools
import json
import math
import os
import re
import subprocess
import sys

EXT = {
    "go": (".go",), "java": (".java",), "python": (".py",), "rust": (".rs",),
    "javascript": (".js", ".mjs", ".cjs", ".jsx"), "typescript": (".ts", ".tsx", ".mts", ".cts"),
}
STOP = set("""the a an of to in for and or is are be with on at by from this that it as fix add update use when not no
if else return func function def class var let const new import package public private protected static final void
self this true false null nil none int string str bool type struct impl fn pub mut use mod crate""".split())
K1, B = 1.2, 0.75
DEEP = 200

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Comments and string literals, roughly, for the C-like languages and Python.
LIT_C = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`", re.S)
LIT_PY = re.compile(r"#[^\n]*|\"\"\".*?\"\"\"|'''.*?'''|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)


def words(s):
    """Lower-case words of s, identifiers split into their parts (the whole
    identifier is kept too when it has several), stopwords and one-letter
    words dropped."""
    out = []
    for w in WORD.findall(s):
        parts = [p for p in PART.findall(w)]
        for t in ([w] if len(parts) != 1 else []) + parts:
            t = t.lower().strip("_")
            if len(t) > 1 and t not in STOP:
                out.append(t)
    return out


def split_code(text, language):
    """(identifier words, prose words) of a source file."""
    lit = LIT_PY if language == "python" else LIT_C
    prose = []

    def keep(m):
        prose.append(m.group(0))
        return " "
    code = lit.sub(keep, text)
    return collections.Counter(words(code)), collections.Counter(words(" ".join(prose)))


class Trees:
    def __init__(self, mirrors):
        self.mirrors = mirrors
        self.blobs = {}

    def gitdir(self, repo):
        return os.path.join(self.mirrors, repo.replace("/", "+"), "repo")

    @functools.lru_cache(maxsize=4)
    def tree(self, repo, commit, language):
        """{path: (identifier Counter, prose Counter)} of the language's files."""
        d = self.gitdir(repo)
        ls = subprocess.run(["git", "--git-dir", d, "ls-tree", "-r", commit], capture_output=True, text=True,
                            check=True).stdout
        ents = []
        for line in ls.splitlines():
            meta, path = line.split("\t", 1)
            mode, kind, sha = meta.split()
            if kind != "blob" or not path.endswith(EXT[language]) or "node_modules/" in path or path.endswith(".d.ts"):
                continue
            ents.append((path, sha))
        need = [sha for _, sha in ents if sha not in self.blobs]
        if need:
            p = subprocess.run(["git", "--git-dir", d, "cat-file", "--batch"], input=("\n".join(need) + "\n").encode(),
                               capture_output=True, check=True).stdout
            i = 0
            for sha in need:
                nl = p.index(b"\n", i)
                size = int(p[i:nl].split()[2])
                body = p[nl + 1:nl + 1 + size].decode("utf-8", "replace")
                i = nl + 1 + size + 1
                self.blobs[sha] = split_code(body[:400000], language)
        return {path: self.blobs[sha] for path, sha in ents}


class BM25:
    def __init__(self, docs):
        self.docs = docs
        self.n = len(docs)
        self.df = collections.Counter()
        total = 0
        for c in docs.values():
            self.df.update(c.keys())
            total += sum(c.values())
        self.avg = total / max(1, self.n)

    def idf(self, t):
        df = self.df.get(t, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def score(self, path, terms):
        c = self.docs.get(path)
        if not c:
            return 0.0
        dl = sum(c.values())
        s = 0.0
        for t in terms:
            tf = c.get(t, 0)
            if tf:
                s += self.idf(t) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / max(1e-9, self.avg)))
        return s

    def cover(self, path, terms):
        c = self.docs.get(path) or {}
        tot = sum(self.idf(t) for t in terms)
        return sum(self.idf(t) for t in terms if t in c) / tot if tot else 0.0

    def ranks(self, terms):
        sc = [(self.score(p, terms), p) for p in self.docs]
        sc = sorted((x for x in sc if x[0] > 0), key=lambda x: (-x[0], x[1]))[:DEEP]
        return {p: i + 1 for i, (_, p) in enumerate(sc)}


NAMES = ["id_bm25_q", "id_bm25_t", "pr_bm25_q", "pr_bm25_t", "id_rr_q", "id_rr_t", "id_cover_q"]


def terms_of(text, cap=48):
    return list(dict.fromkeys(words(text)))[:cap]


def task_views(trees, t):
    tree = trees.tree(t["repo"], t["base_commit"], t["language"])
    ident = BM25({p: v[0] for p, v in tree.items()})
    prose = BM25({p: v[1] for p, v in tree.items()})
    q = terms_of(t["query"])
    title = terms_of(t["query"].split("\n", 1)[0])
    return ident, prose, q, title


def selftest():
    """Checks of the tokenizer, the code/prose split and BM25 (no git needed)."""
    assert words("parseHTTPRequest max_retries x") == ["parsehttprequest", "parse", "http", "request",
                                                       "max_retries", "max", "retries"], words("parseHTTPRequest")
    ident, prose = split_code('// Retry the request\nfunc doRetry(n int) string { return "backoff ok" }', "go")
    assert ident == collections.Counter({"doretry": 1, "do": 1, "retry": 1}), ident
    assert prose == collections.Counter({"retry": 1, "request": 1, "backoff": 1, "ok": 1}), prose
    ident, prose = split_code('def load_cfg(path):\n    """Read the file."""  # note\n    return path', "python")
    assert ident == collections.Counter({"load_cfg": 1, "load": 1, "cfg": 1, "path": 2}), ident
    assert prose == collections.Counter({"read": 1, "file": 1, "note": 1}), prose
    bm = BM25({"a": collections.Counter({"retry": 2, "x": 2}), "b": collections.Counter({"x": 1}),
               "c": collections.Counter({"y": 3})})
    idf = math.log(1 + (3 - 1 + 0.5) / 1.5)
    want = idf * 2 * (K1 + 1) / (2 + K1 * (1 - B + B * 4 / (8 / 3)))
    assert abs(bm.score("a", ["retry"]) - want) < 1e-12
    assert bm.score("b", ["retry"]) == 0 and bm.ranks(["retry", "x"]) == {"a": 1, "b": 2}
    assert abs(bm.cover("b", ["retry", "x"]) - bm.idf("x") / (bm.idf("retry") + bm.idf("x"))) < 1e-12
    print("ok")


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--mirrors", required=True)
    ap.add_argument("--recall", action="store_true")
    ap.add_argument("inp")
    ap.add_argument("out", nargs="?")
    a = ap.parse_args()
    tasks = {}
    with open(a.tasks) as f:
        for line in f:
            t = json.loads(line)
            tasks[t["id"]] = t
    trees = Trees(a.mirrors)
    dumps = []
    with open(a.inp) as f:
        for line in f:
            dumps.append(json.loads(line))
    # Group by repository so the tree cache is reused.
    order = sorted(range(len(dumps)), key=lambda i: (dumps[i]["repo"], i))
    if a.recall:
        rows = collections.defaultdict(list)
        for i in order:
            d = dumps[i]
            t = tasks[d["task"]]
            ident, _, q, title = task_views(trees, t)
            rq = ident.ranks(q)
            best = min([rq.get(g, 10**6) for g in t["gold_files"]])
            fused = min([r for r in d.get("gold_ranks", []) if r > 0] or [10**6])
            for key in ("all", d["language"]):
                rows[key].append((best, fused))
        ks = (1, 5, 10, 20, 50, 200)
        print("| tasks | n | " + " | ".join("R@%d" % k for k in ks) + " | fused beyond 20, ident within 20 |")
        print("|---|---|" + "---|" * (len(ks) + 1))
        for key in sorted(rows, key=lambda k: (k != "all", k)):
            r = rows[key]
            print("| %s | %d | " % (key, len(r)) + " | ".join("%.3f" % (sum(b <= k for b, _ in r) / len(r)) for k in ks) +
                  " | %d of %d |" % (sum(b <= 20 < f for b, f in r), sum(f > 20 for _, f in r)))
        return
    for i in order:
        d = dumps[i]
        t = tasks[d["task"]]
        ident, prose, q, title = task_views(trees, t)
        rq, rt = ident.ranks(q), ident.ranks(title)
        raw = []
        for c in d["files"]:
            p = c["path"]
            raw.append([ident.score(p, q), ident.score(p, title), prose.score(p, q), prose.score(p, title),
                        10 / (10 + rq[p]) if p in rq else 0.0, 10 / (10 + rt[p]) if p in rt else 0.0,
                        ident.cover(p, q)])
        for j in range(4):
            top = max([r[j] for r in raw[:20]] + [1e-9])
            for r in raw:
                r[j] = min(r[j] / top, 2.0)
        if any(n in d["names"] for n in NAMES):
            sys.exit("dump already has identifier features")
        d["names"] = d["names"] + NAMES
        for c, r in zip(d["files"], raw):
            c["x"] = c["x"] + r
    with open(a.out, "w") as w:
        for d in dumps:
            w.write(json.dumps(d) + "\n")


if __name__ == "__main__":
    main()
