#!/usr/bin/env python3
"""Thirteenth-round experiment on the learned file ranker (issue 13): word
associations between a change's description and the files it changes,
learnt across repositories from their histories, offline.

The engine's lexical lists match a query word only to itself. Across many
past changes, some words of a description go with other words in the file
that changed rather than in its neighbours ("timeout" with "deadline",
"option" with a file named config). For a query word q and a file word w
(an identifier word of the file, or "p:" and a word of its path), the
association is, over the mined tasks whose query holds q and whose top 20
candidates hold w somewhere,

    a(q, w) = sum over tasks (share of gold files holding w
                              - share of other candidates holding w)
              / (number of such tasks + SHRINK)

kept only where at least MIN_TASKS tasks from at least MIN_REPOS
repositories saw the pair: associations that hold in one repository only
are that repository's vocabulary, not a general one. The candidates are
the first stage's top 20 files (the dump's order), so an association says
what tells the changed file apart from the files it competes with.

Tables are learnt per repository; the columns of a task of repository R
use the sum over the other repositories, so no task is scored with
associations learnt on its own repository's history (leave one
repository out, nested).

  scripts/assoc-features.py learn --tasks MINED.jsonl --dumps MINED-FEATURES.jsonl \
      --mirrors DIR --repos REPO,REPO,... --out TABLE.npz
  scripts/assoc-features.py add --table TABLE.npz --tasks TASKS.jsonl --mirrors DIR IN.jsonl OUT.jsonl
  scripts/assoc-features.py grid TRAIN.jsonl [--sets 'FS;FS'] [--group NAME=COL,COL]
  scripts/assoc-features.py score TRAIN.jsonl VAL.jsonl --settings 'FS,L2' [--group NAME=COL,COL]
  scripts/assoc-features.py --selftest

Columns added ("names" extended):

  as_max     mean over the query's words of the file's strongest association
  as_max_x   the same without the word itself (w != q): only what BM25 lacks
  as_sum     mean over the query's words of the sum of the file's associations
  as_path    as_max over the file's path words only
  *_rel      each of the above minus the best among the top 20, over the
             spread of the top 20 (0 when they agree)

DIR holds bare git directories as DIR/OWNER+NAME/repo. Needs numpy; the
tokenizer and the file reader are scripts/ident-features.py's.
"""
import argparse
import collections
import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np

spec = importlib.util.spec_from_file_location(
    "idf", os.path.join(os.path.dirname(os.path.abspath(__file__)), "ident-features.py"))
idf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(idf)

TOP = 20
SHRINK = 5.0
MIN_TASKS = 3
MIN_REPOS = 2
NAMES = ["as_max", "as_max_x", "as_sum", "as_path", "as_max_rel", "as_max_x_rel", "as_sum_rel", "as_path_rel"]
PATH_SPLIT = re.compile(r"[/._\-]+")


class Files:
    """Identifier and path words of files at a commit, blobs read once."""

    def __init__(self, mirrors):
        self.trees = idf.Trees(mirrors)
        self.cache = {}

    def words(self, repo, commit, language, paths):
        """{path: frozenset of words} for the paths that exist at commit."""
        d = self.trees.gitdir(repo)
        out = {}
        need = []
        for p in paths:
            key = (repo, commit, p)
            if key in self.cache:
                out[p] = self.cache[key]
            else:
                need.append(p)
        if need:
            spec = "".join("%s:%s\n" % (commit, p) for p in need).encode()
            raw = subprocess.run(["git", "--git-dir", d, "cat-file", "--batch"], input=spec,
                                 capture_output=True, check=True).stdout
            i = 0
            for p in need:
                nl = raw.index(b"\n", i)
                head = raw[i:nl].split()
                if len(head) < 3 or head[1] != b"blob":
                    i = nl + 1
                    ws = frozenset(path_words(p))
                else:
                    size = int(head[2])
                    body = raw[nl + 1:nl + 1 + size].decode("utf-8", "replace")
                    i = nl + 1 + size + 1
                    ident, _ = idf.split_code(body[:400000], language)
                    ws = frozenset(ident) | frozenset(path_words(p))
                self.cache[(repo, commit, p)] = ws
                out[p] = ws
        return out


def path_words(path):
    """"p:"-prefixed words of a path's directories and file name, without
    the extension."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    out = []
    for part in PATH_SPLIT.split(stem):
        out.extend("p:" + w for w in idf.words(part))
    return out


def query_words(text):
    return idf.terms_of(text)


class Vocab:
    def __init__(self):
        self.ids = {}
        self.words = []

    def id(self, w):
        i = self.ids.get(w)
        if i is None:
            i = self.ids[w] = len(self.words)
            self.words.append(w)
        return i


def task_pairs(vocab, q, cands, gold):
    """Pair keys (q id, w id) and their gold-minus-others shares for one task."""
    ng = sum(gold)
    no = len(cands) - ng
    if ng == 0 or no == 0:
        return None
    share = collections.defaultdict(float)
    for ws, g in zip(cands, gold):
        inc = 1.0 / ng if g else -1.0 / no
        for w in ws:
            share[w] += inc
    wid = np.fromiter((vocab.id(w) for w in share), dtype=np.int64, count=len(share))
    val = np.fromiter(share.values(), dtype=np.float64, count=len(share))
    qid = np.array([vocab.id(x) for x in q], dtype=np.int64)
    keys = (qid[:, None] << 32 | wid[None, :]).ravel()
    return keys, np.tile(val, len(qid))


def reduce(keys, vals):
    k, inv = np.unique(np.concatenate(keys), return_inverse=True)
    v = np.concatenate(vals)
    return k, np.bincount(inv, weights=v, minlength=len(k)), np.bincount(inv, minlength=len(k)).astype(np.float64)


def learn(a):
    repos = set(a.repos.split(","))
    tasks = {}
    with open(a.tasks) as f:
        for line in f:
            t = json.loads(line)
            if t["repo"] in repos:
                tasks[t["id"]] = t
    files = Files(a.mirrors)
    vocab = Vocab()
    per = collections.defaultdict(lambda: ([], []))
    used = collections.Counter()
    with open(a.dumps) as f:
        for line in f:
            d = json.loads(line)
            t = tasks.get(d["task"])
            if t is None:
                continue
            top = d["files"][:TOP]
            ws = files.words(t["repo"], t["base_commit"], t["language"], [c["path"] for c in top])
            q = [x for x in query_words(t["query"]) if x]
            got = task_pairs(vocab, q, [ws.get(c["path"], frozenset()) for c in top], [c["gold"] for c in top])
            if got is None or not q:
                continue
            per[t["repo"]][0].append(got[0])
            per[t["repo"]][1].append(got[1])
            used[t["repo"]] += 1
            if len(files.cache) > 200000:
                files.cache.clear()
    out = {"vocab": np.array(vocab.words, dtype=object), "repos": np.array(sorted(per), dtype=object)}
    for i, r in enumerate(sorted(per)):
        k, s, n = reduce(*per[r])
        out["k%d" % i], out["s%d" % i], out["n%d" % i] = k, s, n
        print("%s: %d tasks, %d pairs" % (r, used[r], len(k)), file=sys.stderr)
    np.savez_compressed(a.out, **out)


class Table:
    """The association table, summed over repositories, one left out on
    demand."""

    def __init__(self, path, shrink=SHRINK, min_tasks=MIN_TASKS, min_repos=MIN_REPOS):
        self.shrink, self.min_tasks, self.min_repos = shrink, min_tasks, min_repos
        z = np.load(path, allow_pickle=True)
        self.vocab = {w: i for i, w in enumerate(z["vocab"])}
        self.repos = list(z["repos"])
        parts = [(z["k%d" % i], z["s%d" % i], z["n%d" % i]) for i in range(len(self.repos))]
        allk = np.unique(np.concatenate([p[0] for p in parts]))
        self.keys = allk
        self.s = np.zeros((len(self.repos), len(allk)))
        self.n = np.zeros((len(self.repos), len(allk)))
        for i, (k, s, n) in enumerate(parts):
            j = np.searchsorted(allk, k)
            self.s[i, j] = s
            self.n[i, j] = n
        self.cache = {}

    def without(self, repo):
        """{(q id << 32 | w id): association}, repo's part left out."""
        if repo in self.cache:
            return self.cache[repo]
        keep = [i for i, r in enumerate(self.repos) if r != repo]
        s = self.s[keep].sum(0)
        n = self.n[keep].sum(0)
        nrep = (self.n[keep] > 0).sum(0)
        ok = (n >= self.min_tasks) & (nrep >= self.min_repos)
        a = s[ok] / (n[ok] + self.shrink)
        out = dict(zip(self.keys[ok].tolist(), a.tolist()))
        self.cache = {repo: out}
        return out


def scores(table, assoc, q, ws):
    """(as_max, as_max_x, as_sum, as_path) of one file."""
    qids = [(x, table.vocab.get(x)) for x in q]
    qids = [(x, i) for x, i in qids if i is not None]
    if not qids:
        return [0.0] * 4
    wids = [(w, table.vocab.get(w)) for w in ws]
    wids = [(w, i) for w, i in wids if i is not None]
    mx = mxx = sm = mp = 0.0
    for x, qi in qids:
        base = qi << 32
        best = bestx = bestp = 0.0
        tot = 0.0
        for w, wi in wids:
            v = assoc.get(base | wi)
            if v is None:
                continue
            tot += v
            best = max(best, v)
            if w != x:
                bestx = max(bestx, v)
            if w.startswith("p:"):
                bestp = max(bestp, v)
        mx += best
        mxx += bestx
        sm += tot
        mp += bestp
    k = len(qids)
    return [mx / k, mxx / k, sm / k, mp / k]


def add(a):
    table = Table(a.table, a.shrink, a.min_tasks, a.min_repos)
    tasks = {}
    with open(a.tasks) as f:
        for line in f:
            t = json.loads(line)
            tasks[t["id"]] = t
    files = Files(a.mirrors)
    dumps = [json.loads(line) for line in open(a.inp)]
    for d in sorted(dumps, key=lambda d: d["repo"]):
        if any(n in d["names"] for n in NAMES):
            sys.exit("dump already has association features")
        t = tasks[d["task"]]
        assoc = table.without(t["repo"])
        ws = files.words(t["repo"], t["base_commit"], t["language"], [c["path"] for c in d["files"]])
        q = query_words(t["query"])
        raw = [scores(table, assoc, q, ws.get(c["path"], frozenset())) for c in d["files"]]
        top = raw[:TOP]
        rel = []
        for j in range(4):
            vals = [r[j] for r in top]
            hi, lo = max(vals), min(vals)
            span = hi - lo
            rel.append((hi, span))
        d["names"] = d["names"] + NAMES
        for c, r in zip(d["files"], raw):
            c["x"] = c["x"] + r + [(r[j] - rel[j][0]) / rel[j][1] if rel[j][1] > 0 else 0.0 for j in range(4)]
    with open(a.out, "w") as w:
        for d in dumps:
            w.write(json.dumps(d) + "\n")


_ranker = None


def ranker(groups=()):
    """scripts/contrast-rank.py (and train-rank.py through it), with the
    association groups and the given ones ("NAME=COL,COL") registered;
    loaded once."""
    global _ranker
    if _ranker is not None:
        return _ranker
    here = os.path.dirname(os.path.abspath(__file__))
    sp = importlib.util.spec_from_file_location("cr", os.path.join(here, "contrast-rank.py"))
    cr = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(cr)
    cr.tr.GROUPS["assoc"] = NAMES
    cr.tr.GROUPS["assoc_max"] = ["as_max", "as_max_rel"]
    cr.tr.GROUPS["assoc_x"] = ["as_max_x", "as_max_x_rel"]
    cr.tr.GROUPS["assoc_sum"] = ["as_sum", "as_sum_rel"]
    cr.tr.GROUPS["assoc_path"] = ["as_path", "as_path_rel"]
    cr.NEW = set(NAMES)
    for g in groups:
        name, cols = g.split("=", 1)
        cr.tr.GROUPS[name] = cols.split(",")
        cr.NEW |= set(cols.split(","))
    _ranker = cr
    return cr


GRID = ["first+assoc", "first+assoc_max", "first+assoc_x", "first+assoc_sum", "first+assoc_path",
        "first+as_max_x_rel", "first+as_path_rel"]


def grid(a):
    """Leave-one-repository-out over the training dumps: each feature set
    and L2, against the shipped setting, with the paired bootstrap."""
    cr = ranker(a.group)
    qs = cr.tr.load([a.train])
    ng = cr.tr.ngold_of(qs, cr.tr.gold_lists([a.train]))
    base = cr.loro(qs, ng, *cr.SHIPPED)
    print("| features | L2 | LORO MRR | R@1 | R@5 | R@10 | MRR difference [95%] |\n|---|---|---|---|---|---|---|")
    m = base.mean(0)
    print("| %s (shipped) | %g | %.3f | %.3f | %.3f | %.3f | |" % ((cr.SHIPPED[0], cr.SHIPPED[1]) + tuple(m)), flush=True)
    for fs in (a.sets.split(";") if a.sets else GRID):
        for l2 in map(float, a.l2.split(",")):
            per = cr.loro(qs, ng, fs, l2)
            m = per.mean(0)
            print("| %s | %g | %.3f | %.3f | %.3f | %.3f | %+.3f [%+.3f, %+.3f] |" % (
                (fs, l2) + tuple(m) + cr.boot(per[:, 0], base[:, 0])), flush=True)


def selftest():
    v = Vocab()
    keys, vals = task_pairs(v, ["retry"], [frozenset({"backoff", "x"}), frozenset({"x"}), frozenset({"y"})],
                            [True, False, False])
    got = {(v.words[k >> 32], v.words[k & 0xffffffff]): s for k, s in zip(keys.tolist(), vals.tolist())}
    assert got == {("retry", "backoff"): 1.0, ("retry", "x"): 0.5, ("retry", "y"): -0.5}, got
    assert task_pairs(v, ["retry"], [frozenset({"x"})], [True]) is None
    assert path_words("src/http_client/RetryPolicy.java") == ["p:src", "p:http", "p:client", "p:retrypolicy",
                                                              "p:retry", "p:policy"]
    k, s, n = reduce([np.array([5, 3, 5])], [np.array([1.0, 2.0, 0.5])])
    assert k.tolist() == [3, 5] and s.tolist() == [2.0, 1.5] and n.tolist() == [1.0, 2.0]
    print("ok")


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("learn")
    p.add_argument("--tasks", required=True)
    p.add_argument("--dumps", required=True)
    p.add_argument("--mirrors", required=True)
    p.add_argument("--repos", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("add")
    p.add_argument("--table", required=True)
    p.add_argument("--tasks", required=True)
    p.add_argument("--mirrors", required=True)
    p.add_argument("--shrink", type=float, default=SHRINK)
    p.add_argument("--min-tasks", type=int, default=MIN_TASKS)
    p.add_argument("--min-repos", type=int, default=MIN_REPOS)
    p.add_argument("inp")
    p.add_argument("out")
    p = sub.add_parser("grid")
    p.add_argument("train")
    p.add_argument("--sets", help="feature sets, ';'-separated (default: the round's grid)")
    p.add_argument("--l2", default="0.001,0.01")
    p.add_argument("--group", action="append", default=[], help="NAME=COL,COL: a feature group of other columns")
    p = sub.add_parser("score", help="contrast-rank.py's score with the association groups")
    p.add_argument("--group", action="append", default=[], help="NAME=COL,COL: a feature group of other columns")
    a, rest = ap.parse_known_args()
    if a.cmd == "score":
        cr = ranker(a.group)
        sys.argv = [sys.argv[0], "score"] + rest
        return cr.main()
    return {"learn": learn, "add": add, "grid": grid}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
