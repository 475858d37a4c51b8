#!/usr/bin/env python3
"""Train the chunk ranker: which of a file's chunks the pack takes first.

Reads `codectx eval --chunk-features` dumps (one line per task and gold
file: the file's chunks with their features and the task's changed lines
in each) and fits a linear model with a listwise softmax loss per file:
minus the log of the softmax mass on the chunks holding changed lines,
each weighted by its share of them ("lines") or alike ("any"), with L2.
Settings (features, target, L2) are chosen by leave-one-repository-out.

  train-chunks.py grid  TRAIN.jsonl                 # leave-repository-out table
  train-chunks.py fit   TRAIN.jsonl --setting S --out pkg/query/rank/chunk.json
  train-chunks.py score MODEL.json DUMP.jsonl       # a model on other tasks

Figures per file: hit@1 (the first chunk holds a changed line), lines@1 and
lines@3 (the share of the file's changed lines in the first one and three
chunks), for the model, for the fused order ("rel") and for an oracle.
"""
import argparse
import json
import sys

import numpy as np

GROUPS = {
    "lists": ["rr_symbol", "rr_symbol-super", "rr_bm25", "rr_bm25-file", "rr_bm25-path", "rr_bm25-literal",
              "rr_dense", "rr_graph", "rr_graph-index", "rr_history", "bm25_rel"],
    "size": ["log_lines", "line_share"],
    "kind": ["kind_module", "kind_function", "kind_method", "kind_class", "kind_struct", "kind_interface",
             "kind_type", "kind_window", "outline", "has_doc", "first"],
    "name": ["name_words", "name_exact"],
    "cover": ["cover", "cover_rel"],
}
FEATURE_SETS = {
    "rel": ["rel"],
    "rel+size": ["rel"] + GROUPS["size"],
    "rel+lists": ["rel"] + GROUPS["lists"],
    "nocover": ["rel"] + GROUPS["lists"] + GROUPS["size"] + GROUPS["kind"] + GROUPS["name"],
    "rel+size+cover": ["rel"] + GROUPS["size"] + GROUPS["cover"],
    "rel+size+name": ["rel"] + GROUPS["size"] + GROUPS["name"],
    "rel+size+kind": ["rel"] + GROUPS["size"] + GROUPS["kind"],
    "rel+size+bm25": ["rel", "bm25_rel", "rr_bm25", "rr_symbol"] + GROUPS["size"],
    "all": ["rel"] + GROUPS["lists"] + GROUPS["size"] + GROUPS["kind"] + GROUPS["name"] + GROUPS["cover"],
}


def load(paths):
    out = []
    for path in paths.split(","):
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                if not d["chunks"]:
                    continue
                X = np.array([c["x"] for c in d["chunks"]], dtype=float)
                hits = np.array([c["hits"] for c in d["chunks"]], dtype=float)
                out.append({"task": d["task"], "repo": d["repo"], "lang": d["language"], "path": d["path"],
                            "rank": d["rank"], "names": d["names"], "X": X, "hits": hits,
                            "changed": d["changed"], "lines": [(c["start"], c["end"]) for c in d["chunks"]]})
    return out


def cols(g, feats):
    idx = [g["names"].index(f) for f in feats]
    return g["X"][:, idx]


def fit(groups, feats, target, l2, steps=400, lr=0.1):
    train = [g for g in groups if g["hits"].sum() > 0 and len(g["hits"]) > 1]
    allx = np.vstack([cols(g, feats) for g in train])
    mean, scale = allx.mean(0), allx.std(0)
    scale[scale == 0] = 1
    data = []
    for g in train:
        x = (cols(g, feats) - mean) / scale
        t = g["hits"] / g["hits"].sum() if target == "lines" else (g["hits"] > 0).astype(float)
        data.append((x, t))
    w = np.zeros(len(feats))
    m, v = np.zeros_like(w), np.zeros_like(w)
    for it in range(1, steps + 1):
        grad = l2 * w
        for x, t in data:
            s = x @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            if target == "lines":
                # cross entropy against the lines' distribution
                grad += x.T @ (p - t) / len(data)
            else:
                q = p * t
                q /= q.sum()
                grad += x.T @ (p - q) / len(data)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= lr * (m / (1 - 0.9 ** it)) / (np.sqrt(v / (1 - 0.999 ** it)) + 1e-8)
    return {"features": feats, "mean": mean, "scale": scale, "w": w}


def score(model, g):
    return ((cols(g, model["features"]) - model["mean"]) / model["scale"]) @ model["w"]


def covered(g, order, k):
    """The share of the file's changed lines in the first k chunks of order:
    the hits of the chosen chunks not inside another chosen one (chunks are
    nested or apart)."""
    top = order[:k]
    sp = g["lines"]
    outer = [i for i in top if not any(j != i and sp[j][0] <= sp[i][0] and sp[j][1] >= sp[i][1]
                                       and (sp[j] != sp[i] or j < i) for j in top)]
    return min(1.0, sum(g["hits"][i] for i in outer) / g["changed"])


def metrics(groups, scorer):
    rows = []
    for g in groups:
        s = scorer(g)
        order = list(np.argsort(-s, kind="stable"))
        rows.append((float(g["hits"][order[0]] > 0), covered(g, order, 1), covered(g, order, 3)))
    a = np.array(rows) if rows else np.zeros((0, 3))
    return a.mean(0) if len(a) else np.zeros(3)


def oracle(g):
    return g["hits"] + 1e-6 * g["X"][:, g["names"].index("rel")]


def rel(g):
    return g["X"][:, g["names"].index("rel")] + 1e-9 * -np.arange(len(g["hits"]))


def loro(groups, feats, target, l2):
    repos = sorted({g["repo"] for g in groups})
    rows = []
    for r in repos:
        m = fit([g for g in groups if g["repo"] != r], feats, target, l2)
        held = [g for g in groups if g["repo"] == r]
        rows += [metrics([g], lambda g: score(m, g)) for g in held]
    return np.array(rows).mean(0)


def parse_setting(s):
    fs, target, l2 = s.split(",")
    return FEATURE_SETS[fs], target, float(l2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["grid", "fit", "score"])
    ap.add_argument("a")
    ap.add_argument("b", nargs="?")
    ap.add_argument("--setting", default="all,lines,0.01")
    ap.add_argument("--out")
    ap.add_argument("--sets", help="grid: these feature sets only (comma-separated)")
    ap.add_argument("--l2", default="0.001,0.01,0.1", help="grid: these L2 values")
    args = ap.parse_args()
    if args.cmd == "grid":
        groups = load(args.a)
        print(f"{len(groups)} files, {len({g['task'] for g in groups})} tasks, {len({g['repo'] for g in groups})} repositories\n")
        print("| order | hit@1 | lines@1 | lines@3 |\n|---|---|---|---|")
        for name, f in [("fused (today)", rel), ("oracle", oracle)]:
            print("| %s | %.3f | %.3f | %.3f |" % ((name,) + tuple(metrics(groups, f))))
        for fs in (args.sets.split(",") if args.sets else FEATURE_SETS):
            for target in ["any", "lines"]:
                for l2 in [float(x) for x in args.l2.split(",")]:
                    r = loro(groups, FEATURE_SETS[fs], target, l2)
                    print("| %s,%s,%g (leave-repository-out) | %.3f | %.3f | %.3f |" % ((fs, target, l2) + tuple(r)))
                    sys.stdout.flush()
    elif args.cmd == "fit":
        feats, target, l2 = parse_setting(args.setting)
        groups = load(args.a)
        m = fit(groups, feats, target, l2)
        out = {"kind": "linear", "features": feats, "mean": list(m["mean"]), "scale": list(m["scale"]),
               "weights": list(m["w"]), "bias": 0, "depth": 20,
               "note": f"chunk ranker: scripts/train-chunks.py fit, setting {args.setting}, {len(groups)} files"}
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        for n, w in zip(feats, m["w"]):
            print(f"{n:16s} {w:+.3f}")
    else:
        with open(args.a) as f:
            d = json.load(f)
        m = {"features": d["features"], "mean": np.array(d["mean"]), "scale": np.array(d["scale"]),
             "w": np.array(d["weights"])}
        groups = load(args.b)
        print("| order | hit@1 | lines@1 | lines@3 |\n|---|---|---|---|")
        for name, f in [("fused (today)", rel), ("model", lambda g: score(m, g)), ("oracle", oracle)]:
            print("| %s | %.3f | %.3f | %.3f |" % ((name,) + tuple(metrics(groups, f))))


if __name__ == "__main__":
    main()
