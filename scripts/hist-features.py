#!/usr/bin/env python3
"""Append history features to codectx feature dumps, offline (issue 13).

The history is what the index keeps as the segment's history: the first-parent
log of the task's base commit, 500 commits, each commit's files as changed
against its first parent without rename detection (`git log --first-parent -m
--no-renames -n 500 --name-only BASE`). Only commits before the indexed one
are read, so no feature sees the task's own change. The index's
`hist_commits` is reproduced exactly from this log (checked with --check).

  scripts/hist-features.py --tasks TASKS.jsonl --mirrors DIR [--check] IN.jsonl OUT.jsonl

DIR holds bare git directories as DIR/OWNER+NAME/repo. OUT is IN with these
columns added to every file's feature vector ("names" extended), for
`scripts/train-rank.py` feature sets such as "first+knn_rr_5":

  co_top1, co_top3    co-change with the top 1 / 3 files of the RRF order
                      (commits shared, each 1/sqrt(files), commits of over 50
                      files skipped, as the engine's cochange)
  co_top1_conf        share of the top file's commits that touched the file
  co_def, co_def_conf co-change with the candidates that define the query's most
                      specific symbol (def_best = 1)
  co_m1, co_m1_conf   co-change with the shipped model's first-choice file
  co_rec_top3         co_top3 with each commit weighted by recency 1/(1+i/20)
  co_rel              cochange over the best cochange among the candidates
  cop                 co-change propagation: sum over the other top-20 files j of
                      softmax(model score)_j * share of j's commits touching the file
  hist_recent50       log1p(commits among the newest 50 touching the file)
  hist_rel            commits touching the file / the most among the candidates
  rec_rank, freq_rank 10/(10+rank) of the file's recency / commit count among
                      the top 20
  knn_rr_K            where similar changes landed: the K commit messages most
                      similar to the query (BM25), each commit's files scored
                      by similarity/sqrt(files); 10/(10+rank) of the file in
                      that ranking ("knn_rr_Kt": the title alone)
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

import numpy as np

LIMIT = 500     # commits of history, as index.Options.HistoryLimit
BIG = 50        # commits touching more files are skipped, as in the engine
KNN = [(3, "q"), (5, "q"), (20, "q"), (5, "t"), (10, "t")]
NAMES = (["co_top1", "co_top1_conf", "co_top3", "co_def", "co_def_conf", "co_m1", "co_m1_conf", "co_rec_top3", "co_rel",
          "cop", "hist_recent50", "hist_rel", "rec_rank", "freq_rank"] +
         ["knn_rr_%d%s" % (k, "" if w == "q" else "t") for k, w in KNN])
STOP = set("the a an of to in for and or is are be with on at by from this that it as fix add update use when not no".split())


def toks(s):
    """Words, camelCase parts too, lower case, without a few stopwords."""
    out = []
    for w in re.findall(r"[A-Za-z0-9_]+", s):
        parts = re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", w)
        for t in [w] + (parts if len(parts) > 1 else []):
            t = t.lower()
            if len(t) > 1 and t not in STOP:
                out.append(t)
    return out


class History:
    def __init__(self, mirrors):
        self.mirrors = mirrors

    @functools.lru_cache(maxsize=None)
    def log(self, repo, commit):
        """[(message tokens, sorted distinct files)], newest first."""
        d = os.path.join(self.mirrors, repo.replace("/", "+"), "repo")
        out = subprocess.run(["git", "--git-dir", d, "log", "--first-parent", "-m", "--no-renames", "-n", str(LIMIT),
                              "--name-only", "--format=%x00%H%n%B%x01", commit],
                             capture_output=True, text=True, check=True).stdout
        cs = []
        for blk in out.split("\x00")[1:]:
            msg, _, files = blk.partition("\x01")
            cs.append((toks(msg.split("\n", 1)[1] if "\n" in msg else ""), sorted({f for f in files.split("\n") if f.strip()})))
        return cs


def bm25(qt, docs):
    n = len(docs)
    df = collections.Counter(t for d in docs for t in set(d))
    avg = sum(len(d) for d in docs) / max(1, n)
    q = set(qt)
    out = np.zeros(n)
    for i, d in enumerate(docs):
        tf = collections.Counter(d)
        for t in q & tf.keys():
            idf = math.log(1 + (n - df[t] + .5) / (df[t] + .5))
            out[i] += idf * tf[t] * 2.2 / (tf[t] + 1.2 * (.25 + .75 * len(d) / avg))
    return out


def rr_of(v, k=None):
    """10/(10+rank) of each entry of v by value (0 where v is 0)."""
    k = len(v) if k is None else k
    out = np.zeros(len(v))
    for i in range(len(v)):
        if v[i] > 0:
            out[i] = 10 / (10 + 1 + (v[:k] > v[i]).sum())
    return out


def features(d, task, H, model):
    names = d["names"]
    col = {n: i for i, n in enumerate(names)}
    paths = [c["path"] for c in d["files"]]
    X = np.array([c["x"] for c in d["files"]], dtype=float).reshape(-1, len(names))
    idx = collections.defaultdict(list)
    for i, (_, fs) in enumerate(H):
        for p in fs:
            idx[p].append(i)

    def co(seeds, recency=False):
        m = collections.defaultdict(float)
        for s in seeds:
            for ci in idx.get(s, []):
                fs = H[ci][1]
                if len(fs) > BIG:
                    continue
                w = 1 / math.sqrt(len(fs)) * (1 / (1 + ci / 20) if recency else 1)
                for p in fs:
                    if p != s:
                        m[p] += w
        return m

    def conf(seed):
        m, n = collections.defaultdict(float), 0
        for ci in idx.get(seed, []):
            fs = H[ci][1]
            if len(fs) > BIG:
                continue
            n += 1
            for p in fs:
                if p != seed:
                    m[p] += 1
        return {p: v / n for p, v in m.items()} if n else {}

    k = min(20, len(paths))
    s = ((X[:k][:, [col[f] for f in model["features"]]] - model["mean"]) / model["scale"]) @ model["weights"]
    soft = np.exp(s - s.max())
    soft /= soft.sum()
    first = paths[int(np.argmax(s))] if k else None
    db = X[:k, col["def_best"]]
    defs = [paths[i] for i in range(k) if db[i] >= 0.999][:2]
    c1, c3, cd, cr, cm = co(paths[:1]), co(paths[:3]), co(defs), co(paths[:3], True), co([first] if first else [])
    f1 = conf(paths[0]) if paths else {}
    fm = conf(first) if first else {}
    fd = collections.defaultdict(float)
    for sd in defs:
        for p, v in conf(sd).items():
            fd[p] = max(fd[p], v)
    cop = np.zeros(len(paths))
    for j in range(k):
        cj = conf(paths[j])
        for i, p in enumerate(paths):
            if i != j:
                cop[i] += soft[j] * cj.get(p, 0)
    cnt = np.array([len(idx.get(p, [])) for p in paths], dtype=float)
    newest = np.array([1 / (1 + idx[p][0] / 20) if idx.get(p) else 0 for p in paths])
    cc = X[:, col["cochange"]]
    docs = [m for m, _ in H]
    knn = []
    sims = {"q": bm25(toks(task["query"]), docs), "t": bm25(toks(task["query"].split("\n")[0]), docs)}
    for K, w in KNN:
        sim = sims[w]
        f = collections.defaultdict(float)
        for ci in np.argsort(-sim, kind="stable")[:K]:
            fs = H[ci][1]
            if sim[ci] <= 0 or len(fs) > BIG:
                continue
            for p in fs:
                f[p] += sim[ci] / math.sqrt(len(fs))
        knn.append(rr_of(np.array([f.get(p, 0) for p in paths])))
    rec_rank, freq_rank = rr_of(newest, k), rr_of(cnt, k)
    out = []
    for i, p in enumerate(paths):
        out.append([math.log1p(c1.get(p, 0)), f1.get(p, 0), math.log1p(c3.get(p, 0)), math.log1p(cd.get(p, 0)), fd.get(p, 0),
                    math.log1p(cm.get(p, 0)), fm.get(p, 0), math.log1p(cr.get(p, 0)),
                    cc[i] / cc.max() if cc.max() > 0 else 0, cop[i],
                    math.log1p(sum(1 for ci in idx.get(p, []) if ci < 50)), cnt[i] / cnt[:k].max() if cnt[:k].max() > 0 else 0,
                    rec_rank[i], freq_rank[i]] + [v[i] for v in knn])
    return out, cnt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", required=True, help="the tasks the dump was made from (base_commit, query)")
    ap.add_argument("--mirrors", required=True, help="directory of bare git dirs, OWNER+NAME/repo")
    ap.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "..", "pkg", "query", "rank", "model.json"),
                    help="first-pass model (co_m1, cop)")
    ap.add_argument("--check", action="store_true", help="fail unless the log reproduces the dump's hist_commits")
    ap.add_argument("dump")
    ap.add_argument("out")
    a = ap.parse_args()
    tasks = {}
    with open(a.tasks) as f:
        for line in f:
            t = json.loads(line)
            tasks[t["id"]] = t
    with open(a.model) as f:
        model = json.load(f)
    for k in ("mean", "scale", "weights"):
        model[k] = np.array(model[k])
    hist = History(a.mirrors)
    with open(a.dump) as f, open(a.out, "w") as w:
        for line in f:
            d = json.loads(line)
            t = tasks.get(d["task"])
            if t is None:
                sys.exit("hist-features.py: task %s is not in %s" % (d["task"], a.tasks))
            if any(n in d["names"] for n in NAMES):
                sys.exit("hist-features.py: %s already has history columns" % a.dump)
            H = hist.log(t["repo"], t["base_commit"])
            cols, cnt = features(d, t, H, model)
            if a.check:
                hc = d["names"].index("hist_commits")
                for c, n in zip(d["files"], cnt):
                    if abs(math.log1p(n) - c["x"][hc]) > 1e-6:
                        sys.exit("hist-features.py: %s %s: %d commits in the log, the index had %.0f" % (
                            d["task"], c["path"], n, math.expm1(c["x"][hc])))
            d["names"] = d["names"] + NAMES
            for c, x in zip(d["files"], cols):
                c["x"] = c["x"] + [round(float(v), 6) for v in x]
            w.write(json.dumps(d) + "\n")


if __name__ == "__main__":
    main()
