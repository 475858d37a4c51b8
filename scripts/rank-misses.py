#!/usr/bin/env python3
"""Where the learned file ranker misses, by class (issue 13, seventh round).

Reads `codectx eval --rank-only --features` dumps (see train-rank.py) and a
model file (default: the shipped pkg/query/rank/model.json), reranks each
task's dumped candidates as the engine does (the model's top `depth`
files by score, the rest in RRF order) and sorts every task by where the
first gold file lands:

  hit         rank 1
  near        rank 2-5
  deep        rank 6-20
  pool        no gold file in the fused top 20 (the reranker cannot reach
              it): "pool 21-100" if it is in the dump, "pool absent" if not

then, per class, by language and trigger type, and for every miss (rank
2 and below) what kind of file is ranked first: in the first gold file's
directory, in a parent or child directory of it, elsewhere; a test, a
docs/example file, an index/barrel file, a larger file, one that defines
the title's symbols more than the gold file does (def_title, when the
dump has it). Candidates are the task's language files only (codectx
eval restricts them), so an other-language or Markdown file cannot
outrank a gold file here.

  scripts/rank-misses.py DUMP.jsonl [--model MODEL.json] [--tasks]
  scripts/rank-misses.py TRAIN.jsonl --loro
      the training repositories, each task ranked by a model of the
      shipped setting (train-rank.py --setting first,any,0.001,20,0)
      fitted without its repository: the misses a decision may be made on.

--tasks also lists the misses one per line (task id, class, the gold
file's rank, the first file's path); that is for reading, never for
committing (paths of fetched repositories).
"""
import argparse
import collections
import importlib.util
import json
import os
import posixpath

import numpy as np

_spec = importlib.util.spec_from_file_location("train_rank", os.path.join(os.path.dirname(os.path.abspath(__file__)), "train-rank.py"))
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)

HERE = os.path.dirname(os.path.abspath(__file__))
SHIPPED = os.path.join(HERE, "..", "pkg", "query", "rank", "model.json")


def load_model(path):
    with open(path) as f:
        m = json.load(f)
    return m


def columns(X, names, feats):
    cols = []
    for f in feats:
        a, _, b = f.partition("*")
        c = X[:, names.index(a)]
        if b:
            c = c * X[:, names.index(b)]
        cols.append(c)
    return np.stack(cols, 1)


def order_of(d, m):
    """Indices of d's files in the model's order (top depth reranked)."""
    names = d["names"]
    X = np.array([c["x"] for c in d["files"]], dtype=float).reshape(-1, len(names))
    n = len(X)
    if m is None or n == 0:
        return list(range(n))
    top = min(m["depth"], n)
    Z = (columns(X[:top], names, m["features"]) - np.array(m["mean"])) / np.array(m["scale"])
    clip = m.get("clip", 0)
    if clip:
        Z = np.clip(Z, -clip, clip)
    s = Z @ np.array(m["weights"]) + m.get("bias", 0)
    return list(np.argsort(-s, kind="stable")) + list(range(top, n))


def klass(rank, d):
    if rank == 1:
        return "hit"
    if 2 <= rank <= 5:
        return "near 2-5"
    if 6 <= rank <= 20 and min([r for r in d["gold_ranks"] if r > 0], default=0) <= 20:
        return "deep 6-20"
    first = min([r for r in d["gold_ranks"] if r > 0], default=0)
    if first == 0:
        return "pool absent"
    if first > 20:
        return "pool 21+"
    return "deep 6-20"


CLASSES = ["hit", "near 2-5", "deep 6-20", "pool 21+", "pool absent"]


def relation(a, b):
    """How path a's directory relates to path b's."""
    da, db = posixpath.dirname(a), posixpath.dirname(b)
    if da == db:
        return "same directory"
    if da.startswith(db + "/") or db.startswith(da + "/") or da == "" or db == "":
        return "parent/child directory"
    ta, tb = da.split("/"), db.split("/")
    if ta[:1] == tb[:1] and len(ta) > 1 and len(tb) > 1 and ta[:-1] == tb[:-1]:
        return "sibling directory"
    return "elsewhere"


def feat(d, i, name):
    names = d["names"]
    if name not in names:
        return None
    return d["files"][i]["x"][names.index(name)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--model", default=SHIPPED)
    ap.add_argument("--config")
    ap.add_argument("--rrf", action="store_true", help="classify the RRF order instead of the model's")
    ap.add_argument("--tasks", action="store_true")
    ap.add_argument("--loro", action="store_true", help="rank each repository's tasks by a model fitted without it")
    a = ap.parse_args()
    m = None if a.rrf else load_model(a.model)
    tr.CONFIG = a.config
    dumps = list(tr.lines([a.dump]))
    if a.loro:
        feats = tr.feature_set("first")
        qs = tr.load([a.dump])
        models = {}
        for r in sorted({q["repo"] for q in qs}):
            mean, scale, w, clip = tr.fit(tr.select([q for q in qs if q["repo"] != r], feats, 20), 0.001, loss="any")
            models[r] = {"features": feats, "mean": mean, "scale": scale, "weights": w, "clip": clip, "depth": 20}
    rows = []
    for d in dumps:
        order = order_of(d, models[d["repo"]] if a.loro and not a.rrf else m)
        ranked = [d["files"][i] for i in order]
        hits = [k for k, c in enumerate(ranked) if c["gold"]]
        rank = hits[0] + 1 if hits else 0
        rows.append((d, order, rank, klass(rank, d)))

    def share_table(key, title):
        groups = collections.defaultdict(collections.Counter)
        for d, _, rank, k in rows:
            groups[key(d)][k] += 1
            groups["all"][k] += 1
        print("\n| %s | tasks | MRR | %s |" % (title, " | ".join(CLASSES)))
        print("|---|---|---|" + "---|" * len(CLASSES))
        for g in sorted(groups, key=lambda g: (g != "all", g)):
            c = groups[g]
            n = sum(c.values())
            mrr = np.mean([1.0 / r if r else 0.0 for d, _, r, _ in rows if g == "all" or key(d) == g])
            print("| %s | %d | %.3f | %s |" % (g, n, mrr, " | ".join(str(c[k]) for k in CLASSES)))

    share_table(lambda d: d["language"], "language")
    share_table(lambda d: d["trigger"], "trigger")

    # MRR lost to each class: what a perfect fix of the class would add.
    n = len(rows)
    print("\n| class | tasks | MRR lost (sum of 1 - 1/rank over its tasks, / all tasks) |\n|---|---|---|")
    for k in CLASSES[1:]:
        sub = [r for _, _, r, kk in rows if kk == k]
        print("| %s | %d | %.3f |" % (k, len(sub), sum(1 - (1.0 / r if r else 0.0) for r in sub) / n))

    # Finer: the gold file's rank in the near misses, and whether the RRF
    # order had it on top (the model lost it) or not.
    fine = collections.Counter()
    for d, order, rank, k in rows:
        rrf = [c["gold"] for c in d["files"]]
        r0 = rrf.index(True) + 1 if True in rrf else 0
        tag = "rank %s" % (rank if rank in (1, 2, 3) else "4-5" if 4 <= rank <= 5 else "6-20" if 6 <= rank <= 20 else "21+ or absent")
        fine[tag, "tasks"] += 1
        fine[tag, "RRF rank 1" if r0 == 1 else "RRF rank 2-5" if 2 <= r0 <= 5 else "RRF rank 6+ or absent"] += 1
        fine[tag, "one gold file" if len(d["gold"]) == 1 else "several gold files"] += 1
    tags = ["rank 1", "rank 2", "rank 3", "rank 4-5", "rank 6-20", "rank 21+ or absent"]
    cols = ["tasks", "RRF rank 1", "RRF rank 2-5", "RRF rank 6+ or absent", "one gold file", "several gold files"]
    print("\n| first gold file under the model | %s |\n|---|%s" % (" | ".join(cols), "---|" * len(cols)))
    for t in tags:
        print("| %s | %s |" % (t, " | ".join(str(fine[t, c]) for c in cols)))

    # What outranks the gold file in the misses that have it ranked.
    kinds = collections.defaultdict(collections.Counter)
    for d, order, rank, k in rows:
        if k == "hit":
            continue
        grp = "near/deep" if k in ("near 2-5", "deep 6-20") else "pool"
        top = order[0] if order else None
        if top is None:
            continue
        tp = d["files"][top]["path"]
        gold_paths = [p for p in d["gold"]]
        # first gold file: the best-ranked one, else the first listed
        gi = next((i for i in order if d["files"][i]["gold"]), None)
        gp = d["files"][gi]["path"] if gi is not None else gold_paths[0]
        kinds[grp]["tasks"] += 1
        kinds[grp][relation(tp, gp)] += 1
        rel_any = min((["same directory", "parent/child directory", "sibling directory", "elsewhere"].index(relation(tp, g))
                       for g in gold_paths))
        kinds[grp]["any gold file's directory: " + ["same", "parent/child", "sibling", "elsewhere"][rel_any]] += 1
        for flag in ("is_test", "is_docs", "is_index", "decl_only", "is_generated"):
            if (feat(d, top, flag) or 0) > 0:
                kinds[grp]["first file " + flag] += 1
        if gi is not None:
            for name, label in (("log_size", "first file larger"), ("def_title", "first file defines more of the title"),
                                ("title_rr", "first file higher in title-only BM25"), ("cochange", "first file co-changes more"),
                                ("rr_symbol", "first file higher in the symbol list"), ("path_title", "first file's path holds more title words")):
                a_, b_ = feat(d, top, name), feat(d, gi, name)
                if a_ is not None and a_ > b_:
                    kinds[grp][label] += 1
            if gi in (d["files"][top].get("out") or []) or gi in (d["files"][top].get("in") or []):
                kinds[grp]["gold linked to the first file in the graph"] += 1
            # is the gold file the best-ranked file of the first file's directory after it?
            same = [i for i in order[1:] if posixpath.dirname(d["files"][i]["path"]) == posixpath.dirname(tp)]
            if same and same[0] == gi:
                kinds[grp]["gold is the next file of the first file's directory"] += 1
    for grp in ("near/deep", "pool"):
        c = kinds[grp]
        if not c:
            continue
        print("\n| misses (%s): the file ranked first | tasks | share |\n|---|---|---|" % grp)
        t = c.pop("tasks")
        print("| all | %d | 1.00 |" % t)
        for key, v in sorted(c.items(), key=lambda kv: -kv[1]):
            print("| %s | %d | %.2f |" % (key, v, v / t))
    if a.tasks:
        print()
        for d, order, rank, k in rows:
            if k != "hit":
                print(d["task"], k, rank, d["files"][order[0]]["path"] if order else "-", d["gold"][:3], d["gold_ranks"][:3])


if __name__ == "__main__":
    main()
