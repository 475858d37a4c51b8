#!/usr/bin/env python3
"""Offline experiments with graph signals of where a change lands, on the
feature dumps of `codectx eval --features` (which carry, per dumped file,
its graph links to the other dumped files: "out", "in"). Needs numpy, and
scripts/train-rank.py beside it (its loading, fitting and metrics).

  scripts/rank-graph.py near TRAIN.jsonl VAL.jsonl
      the near misses of the shipped model (first gold file 2nd-20th):
      how the first gold file and the file ranked first relate in the
      graph, and the engine's graph features of both (means, and the
      within-query AUC of each feature, gold vs the other top-20 files).
  scripts/rank-graph.py twopass TRAIN.jsonl VAL.jsonl SPEC ...
      a second linear model on the shipped features plus propagation
      features of the first pass (the shipped setting's model; for the
      training tasks its scores out of fold, each repository's from a
      model fitted without it). SPEC is PROP,PROP...[:FEATURE,...]:
      names of PROP below and engine features (query.FeatureNames) to
      add. Prints leave-repository-out and validation metrics.
  scripts/rank-graph.py widen TRAIN.jsonl VAL.jsonl
      reranks the top 20 plus graph neighbours of the top k files
      beyond them.
  scripts/rank-graph.py swap TRAIN.jsonl VAL.jsonl [--extra MINED.jsonl]
      a pair classifier that moves the first pass's best-ranked graph
      neighbour of its top file to first, and the oracle of that move.

Metrics are over the dumped candidates (train-rank.py's).
"""
import argparse
import collections
import importlib.util
import json
import os
import sys

import numpy as np

_spec = importlib.util.spec_from_file_location("train_rank", os.path.join(os.path.dirname(os.path.abspath(__file__)), "train-rank.py"))
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)

FIRST = tr.feature_sets()["first"]  # the shipped model's features
SETTING = dict(l2=0.001, loss="any", clip=0.0)  # the shipped setting
DEPTH = 20  # reranked files


def load(paths):
    qs = []
    for d in tr.lines(paths):
        names = d["names"]
        qs.append({"task": d["task"], "repo": d["repo"], "lang": d["language"], "names": names,
                   "X": np.array([c["x"] for c in d["files"]], dtype=float).reshape(-1, len(names)),
                   "y": np.array([c["gold"] for c in d["files"]], dtype=bool),
                   "out": [c.get("out") or [] for c in d["files"]], "in": [c.get("in") or [] for c in d["files"]],
                   "paths": [c["path"] for c in d["files"]], "ngold": len(d["gold"]), "gold_near": d.get("gold_near")})
    return qs


def score(q, feats, model):
    mean, scale, w, clip = model
    return tr.standardize(tr.columns(q["X"], q["names"], feats), mean, scale, clip) @ w


def fit(qs, feats):
    return tr.fit(tr.select(qs, feats, DEPTH), **SETTING)


def out_of_fold(qs, feats, pool=None):
    """First-pass scores of qs, each repository's from a model fitted on
    the pool (default qs) without that repository."""
    pool = qs if pool is None else pool
    models, out = {}, []
    for q in qs:
        r = q["repo"]
        if r not in models:
            models[r] = fit([p for p in pool if p["repo"] != r], feats)
        out.append(score(q, feats, models[r]))
    return out


def dirname(p):
    return p.rsplit("/", 1)[0] if "/" in p else ""


def linked(q, i, j):
    return j in q["out"][i] or j in q["in"][i]


# Propagation features of a first pass s over the top DEPTH files.
PROP = ["top1", "top1_in", "top1_out", "top1_unsure", "gap", "nb_out", "nb_in", "nb_out_sum", "nb_in_sum",
        "dir_top5", "rank", "walk", "walk_in", "walk_out"]


def propagate(q, s):
    n = len(q["y"])
    top = min(DEPTH, n)
    F = np.zeros((n, len(PROP)))
    if top == 0:
        return F
    order = np.argsort(-s[:top], kind="stable")
    rank = np.zeros(n, dtype=int)
    rank[order] = np.arange(1, top + 1)
    p = np.zeros(n)
    e = np.exp(s[:top] - s[:top].max())
    p[:top] = e / e.sum()
    rr = np.where(rank > 0, 10 / (10 + rank), 0.0)
    t1 = order[0]
    dirs = [dirname(x) for x in q["paths"]]
    top5 = set(order[:5])
    col = {f: k for k, f in enumerate(PROP)}
    for i in range(n):
        outs = [j for j in q["out"][i] if j < top]
        ins = [j for j in q["in"][i] if j < top]
        F[i, col["top1"]] = float(t1 in outs or t1 in ins)
        F[i, col["top1_in"]] = float(t1 in ins)
        F[i, col["top1_out"]] = float(t1 in outs)
        F[i, col["top1_unsure"]] = F[i, col["top1"]] * (1 - p[t1])
        F[i, col["gap"]] = s[t1] - s[i] if i < top else 0
        F[i, col["nb_out"]] = max([p[j] for j in outs], default=0)
        F[i, col["nb_in"]] = max([p[j] for j in ins], default=0)
        F[i, col["nb_out_sum"]] = sum(rr[j] for j in outs)
        F[i, col["nb_in_sum"]] = sum(rr[j] for j in ins)
        F[i, col["dir_top5"]] = sum(1 for j in top5 if j != i and dirs[j] == dirs[i])
        F[i, col["rank"]] = rr[i]
    # The mass a walk from the first pass's softmax brings each top file
    # over the top files' links (both ways, in edges, out edges), restart 0.5.
    for name, use in (("walk", ("in", "out")), ("walk_in", ("in",)), ("walk_out", ("out",))):
        A = np.zeros((top, top))
        for i in range(top):
            for u in use:
                for j in q[u][i]:
                    if j < top:
                        A[j, i] = 1
        deg = A.sum(1, keepdims=True)
        deg[deg == 0] = 1
        T = A / deg
        r = p[:top].copy()
        for _ in range(10):
            r = 0.5 * p[:top] + 0.5 * (r @ T)
        F[:top, col[name]] = r - 0.5 * p[:top]
    return F


def with_prop(qs, S, names):
    out = []
    for q, s in zip(qs, S):
        F = propagate(q, s)
        q2 = dict(q)
        q2["X"] = np.hstack([q["X"], F[:, [PROP.index(x) for x in names]]])
        q2["names"] = q["names"] + ["lp_" + x for x in names]
        out.append(q2)
    return out


def loro(qs, feats, evaluate):
    per = np.zeros((len(qs), 4))
    for r in sorted({q["repo"] for q in qs}):
        te = [i for i, q in enumerate(qs) if q["repo"] == r]
        per[te] = evaluate([qs[i] for i in te], fit([q for q in qs if q["repo"] != r], feats))
    return per.mean(0)


def by_lang(qs, rows):
    g = collections.defaultdict(list)
    for q, r in zip(qs, rows):
        g[q["lang"]].append(r[0])
    return " ".join("%s %.3f" % (k, np.mean(v)) for k, v in sorted(g.items()))


def twopass(train, val, specs):
    ship = fit(train, FIRST)
    s_tr, s_va = out_of_fold(train, FIRST), [score(q, FIRST, ship) for q in val]
    print("| variant | LORO MRR | R@5 | R@10 | validation MRR | R@5 | R@10 | by language (validation MRR) |\n|---|---|---|---|---|---|---|---|")
    for spec in [""] + specs:
        props, _, engine = spec.partition(":")
        props = [x for x in props.split(",") if x]
        feats = FIRST + [x for x in engine.split(",") if x] + ["lp_" + x for x in props]
        tq, vq = with_prop(train, s_tr, props), with_prop(val, s_va, props)
        ev = lambda qs, m: tr.rerank_eval(qs, feats, DEPTH, m, [q["ngold"] for q in qs])
        lo = loro(tq, feats, ev)
        v = ev(vq, fit(tq, feats))
        print("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |" % (
            spec or "shipped", lo[0], lo[2], lo[3], v.mean(0)[0], v.mean(0)[2], v.mean(0)[3], by_lang(val, v)), flush=True)


def near(train, val):
    ship = fit(train, FIRST)
    eng = ["prop_out", "prop_in", "prop_out_sum", "prop_in_sum", "def_calls", "def_called", "test_imports", "deg_rel", "dir_share", "links_top"]
    for name, qs in (("validation", val), ("training", train)):
        eng_ok = all(f in qs[0]["names"] for f in eng)
        n = 0
        c = collections.Counter()
        share, nlinked, pairs, auc = [], [], collections.defaultdict(list), collections.defaultdict(list)
        for q in qs:
            top = min(DEPTH, len(q["y"]))
            if not q["y"][:top].any():
                continue
            s = score(q, FIRST, ship)[:top]
            order = list(np.argsort(-s, kind="stable"))
            gi = [i for i in range(top) if q["y"][i]]
            oi = [i for i in range(top) if not q["y"][i]]
            for f in eng if eng_ok else []:
                x = q["X"][:, q["names"].index(f)]
                if oi:
                    auc[f].append(np.mean([(x[g] > x[o]) + 0.5 * (x[g] == x[o]) for g in gi for o in oi]))
            fg = int(np.flatnonzero(q["y"][order])[0])
            if fg == 0:
                continue
            n += 1
            t1, g = order[0], order[fg]
            L = [j for j in order[1:] if linked(q, j, t1)]
            nlinked.append(len(L))
            others = [j for j in order[1:10] if j != g and not q["y"][j]]
            if others:
                share.append(np.mean([linked(q, j, t1) for j in others]))
            if g in L:
                c["linked"] += 1
                c["first linked"] += L[0] == g
            Dd = [j for j in order[1:] if dirname(q["paths"][j]) == dirname(q["paths"][t1])]
            if g in Dd:
                c["same dir"] += 1
                c["first in dir"] += Dd[0] == g
            for f in eng if eng_ok else []:
                x = q["X"][:, q["names"].index(f)]
                pairs[f].append((x[t1], x[g]))
        print("%s: %d near misses; top-20 files linked to the file ranked first: mean %.1f; first gold file linked to it: %d, "
              "the best-ranked of them: %d; other top-10 files linked to it: %.0f%%; first gold file in its directory: %d, "
              "the best-ranked after it there: %d" % (name, n, np.mean(nlinked), c["linked"], c["first linked"], 100 * np.mean(share),
                                                      c["same dir"], c["first in dir"]))
        if eng_ok:
            print("| feature | file ranked first (mean) | first gold file (mean) | gold higher | gold lower | within-query AUC, gold vs other top-20 files |\n|---|---|---|---|---|---|")
            for f in eng:
                a = np.array(pairs[f])
                print("| %s | %.3f | %.3f | %.2f | %.2f | %.3f |" % (f, a[:, 0].mean(), a[:, 1].mean(), np.mean(a[:, 1] > a[:, 0]),
                                                                  np.mean(a[:, 1] < a[:, 0]), np.mean(auc[f])))
        miss = [q for q in qs if not q["y"][:DEPTH].any()]
        print("no gold file in the top %d: %d tasks; gold_near %s" % (DEPTH, len(miss), [q["gold_near"] for q in miss]))


def widen(train, val):
    def wide(q, k, cap):
        n = len(q["y"])
        idx = list(range(min(DEPTH, n)))
        idx += [j for j in range(DEPTH, n) if any(linked(q, j, t) for t in range(min(k, n)))][:cap]
        rest = [j for j in range(n) if j not in set(idx)]
        q2 = dict(q)
        q2["X"], q2["y"], q2["depth"] = q["X"][idx + rest], q["y"][idx + rest], len(idx)
        return q2

    def ev(qs, feats, model):
        out = []
        for q in qs:
            top = q["depth"]
            s = score({"X": q["X"][:top], "names": q["names"]}, feats, model)
            r = q["y"][np.concatenate([np.argsort(-s, kind="stable"), np.arange(top, len(q["y"]))]).astype(int)]
            h = np.flatnonzero(r)
            out.append((1 / (h[0] + 1) if len(h) else 0, r[:1].sum() / q["ngold"], r[:5].sum() / q["ngold"], r[:10].sum() / q["ngold"]))
        return np.array(out)

    def fitw(qs, feats):
        return tr.fit([(tr.columns(q["X"][:q["depth"]], q["names"], feats), q["y"][:q["depth"]]) for q in qs], **SETTING)

    print("| reranked set | validation tasks with a gold file in it | LORO MRR | R@5 | validation MRR | R@5 | R@10 |\n|---|---|---|---|---|---|---|")
    for k, cap, extra in ((0, 0, []), (1, 5, []), (5, 5, []), (3, 10, []), (3, 10, ["prop_in", "prop_out", "links_top"])):
        feats = FIRST + extra
        T, V = [wide(q, k, cap) for q in train], [wide(q, k, cap) for q in val]
        per = np.zeros((len(T), 4))
        for r in sorted({q["repo"] for q in T}):
            te = [i for i, q in enumerate(T) if q["repo"] == r]
            per[te] = ev([T[i] for i in te], feats, fitw([q for q in T if q["repo"] != r], feats))
        v = ev(V, feats, fitw(T, feats)).mean(0)
        lo = per.mean(0)
        print("| top %d + up to %d neighbours of the top %d%s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |" % (
            DEPTH, cap, k, " + " + ", ".join(extra) if extra else "", np.mean([q["y"][:q["depth"]].any() for q in V]),
            lo[0], lo[2], v[0], v[2], v[3]))


def swap(train, val, extra):
    ship = fit(train, FIRST)
    mean, scale, _, _ = ship

    def pairs(qs, S):
        out = []
        for q, s in zip(qs, S):
            top = min(DEPTH, len(q["y"]))
            order = list(np.argsort(-s[:top], kind="stable"))
            h = np.flatnonzero(q["y"][order])
            rec = {"repo": q["repo"], "mrr0": 1 / (h[0] + 1) if len(h) else 0, "z": None}
            t1 = order[0] if order else -1
            L = [j for j in order[1:] if linked(q, j, t1)]
            if L:
                c = L[0]
                Z = tr.standardize(tr.columns(q["X"][:top], q["names"], FIRST), mean, scale, 0)
                new = [c] + [j for j in order if j != c]
                h1 = np.flatnonzero(q["y"][new])
                rec.update(z=np.concatenate([Z[c] - Z[t1], Z[t1], [s[t1] - s[c], float(t1 in q["out"][c]), float(t1 in q["in"][c]), order.index(c)]]),
                           label=float(q["y"][c] and not q["y"][t1]), mrr1=1 / (h1[0] + 1) if len(h1) else 0)
            out.append(rec)
        return out

    def logit(P, l2):
        Z = np.array([r["z"] for r in P])
        y = np.array([r["label"] for r in P])
        mu, sd = Z.mean(0), Z.std(0)
        sd[sd < 1e-6] = 1
        Z = (Z - mu) / sd
        w, b = np.zeros(Z.shape[1]), 0.0
        for _ in range(500):
            p = 1 / (1 + np.exp(-(Z @ w + b)))
            w -= 0.5 * (Z.T @ (p - y) / len(y) + l2 * w)
            b -= 0.5 * np.mean(p - y)
        return lambda z: 1 / (1 + np.exp(-(((z - mu) / sd) @ w + b)))

    Ptr = pairs(train, out_of_fold(train, FIRST))
    Pva = pairs(val, [score(q, FIRST, ship) for q in val])
    Pex = pairs(extra, out_of_fold(extra, FIRST, pool=train)) if extra else []
    has = lambda P: [r for r in P if r["z"] is not None]
    for nm, P in (("training", Ptr), ("validation", Pva), ("extra", Pex)):
        if P:
            print("%s: %d tasks, %d pairs, %d where the neighbour is gold and the top file is not; MRR %.3f, oracle swap %.3f" % (
                nm, len(P), len(has(P)), sum(r["label"] for r in has(P)), np.mean([r["mrr0"] for r in P]),
                np.mean([r["mrr1"] if r.get("label") else r["mrr0"] for r in P])))
    mrr = lambda P, pr, th: np.mean([r["mrr1"] if r["z"] is not None and p > th else r["mrr0"] for r, p in zip(P, pr)])
    for l2 in (0.01, 0.1):
        pr = np.zeros(len(Ptr))
        for rep in sorted({r["repo"] for r in Ptr}):
            f = logit(has([r for r in Ptr + Pex if r["repo"] != rep]), l2)
            for i, r in enumerate(Ptr):
                if r["repo"] == rep and r["z"] is not None:
                    pr[i] = f(r["z"])
        f = logit(has(Ptr + Pex), l2)
        pv = np.array([f(r["z"]) if r["z"] is not None else 0 for r in Pva])
        for th in (0.3, 0.4, 0.5, 0.6, 0.7):
            print("l2 %g threshold %.1f: LORO MRR %.3f (%d swaps) | validation MRR %.3f (%d swaps)" % (
                l2, th, mrr(Ptr, pr, th), int((pr > th).sum()), mrr(Pva, pv, th), int((pv > th).sum())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["near", "twopass", "widen", "swap"])
    ap.add_argument("train")
    ap.add_argument("val")
    ap.add_argument("specs", nargs="*")
    ap.add_argument("--extra", help="more training dumps (swap): never scored")
    a = ap.parse_args()
    train, val = load([a.train]), load([a.val])
    if a.cmd == "near":
        near(train, val)
    elif a.cmd == "twopass":
        twopass(train, val, a.specs)
    elif a.cmd == "widen":
        widen(train, val)
    else:
        swap(train, val, load([a.extra]) if a.extra else [])


if __name__ == "__main__":
    sys.exit(main())
