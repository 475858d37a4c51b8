#!/usr/bin/env python3
"""Seventh-round experiments on the learned file ranker (issue 13): the
model's loss, weighting and regularisation, blending with the RRF order,
and a wider reranked set (candidate recall), each measured
leave-repository-out on the training dumps and then, trained on all of
them, on the validation dumps. Needs numpy and scripts/train-rank.py
beside it (loading, fitting, metrics). Inputs are `codectx eval
--rank-only --features` dumps (top 100 files of the fused ranking).

  scripts/rank-variants.py model TRAIN.jsonl VAL.jsonl
      loss, weighting and regularisation variants of the shipped setting
      (36 features, listwise softmax, L2 0.001, 20 reranked).
  scripts/rank-variants.py widen TRAIN.jsonl VAL.jsonl
      reranks the top 20 plus files ranked 21-100 by the fused ranking
      that a rule picks: in a directory of the top k files, co-changing
      with the top BM25 files, a path holding the title's words, a hit
      of the symbol list, a definition of the title's symbols.
  scripts/rank-variants.py blend TRAIN.jsonl VAL.jsonl
      the model's order blended with the RRF order (rank average).
  scripts/rank-variants.py flags TRAIN.jsonl VAL.jsonl
      wider path flags, set in the dumps' columns before fitting:
      is_generated also for files under dist/, build/, bundle/, umd/
      (committed build output), is_test also for a root test.js /
      tests.py / spec.ts and directories named *_test(s), *-test(s).
  scripts/rank-variants.py noise TRAIN.jsonl VAL.jsonl
      how far the figures move by chance: validation MRR of the shipped
      setting fitted without one training repository (18 fits), and
      paired bootstrap intervals (2,000 resamples of tasks) of MRR
      differences between rankings, on validation and leave-repository-out.

Every row: LORO MRR, R@5, R@10 (each training repository scored by a
model fitted on the other 17), validation MRR, R@1, R@5, R@10 and MRR by
language. Metrics are over the dumped candidates (train-rank.py's).
"""
import argparse
import importlib.util
import os
import posixpath
import re
import sys

import numpy as np

_spec = importlib.util.spec_from_file_location("train_rank", os.path.join(os.path.dirname(os.path.abspath(__file__)), "train-rank.py"))
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)

FIRST = tr.feature_sets()["first"]  # the shipped model's 36 features
DEPTH = 20
LANGS = ["go", "java", "javascript", "python", "rust", "typescript"]


def load(path):
    qs = tr.load([path])
    gold = tr.gold_lists([path])
    paths = {d["task"]: [c["path"] for c in d["files"]] for d in tr.lines([path])}
    for q in qs:
        q["ngold"] = len(gold[q["task"]])
        q["paths"] = paths[q["task"]]
        q["idx"] = np.arange(min(DEPTH, len(q["y"])))  # the reranked files
    return qs


def fitw(qs, feats, l2=0.001, loss="any", l1=0.0, weight=None, iters=300, lr=0.05, topk=0, temp=1.0):
    """train-rank.py's listwise softmax fit (Adam, 300 steps), with a query
    weight (weight(q)), an L1 term (proximal step), a softmax temperature
    and, for topk > 0, a loss on the files ranked above the best gold one
    only (the others masked out once the fit has a first order)."""
    data = [(tr.columns(q["X"][q["idx"]], q["names"], feats), q["y"][q["idx"]], q) for q in qs]
    allX = np.vstack([X for X, _, _ in data if len(X)])
    mean, scale = allX.mean(0), allX.std(0)
    scale[scale < 1e-6] = 1
    train = [(X, y, q) for X, y, q in data if y.any() and len(y) > 1]
    n, d = max(len(y) for _, y, _ in train), allX.shape[1]
    Xp = np.zeros((len(train), n, d))
    M = np.zeros((len(train), n), dtype=bool)
    Y = np.zeros((len(train), n), dtype=bool)
    W = np.ones(len(train))
    for i, (X, y, q) in enumerate(train):
        Xp[i, :len(y)] = (X - mean) / scale
        M[i, :len(y)] = True
        Y[i, :len(y)] = y
        if weight:
            W[i] = weight(q)
    W = W / W.mean()
    Yn = Y / Y.sum(1, keepdims=True)
    w = np.zeros(d)
    m1, m2 = np.zeros(d), np.zeros(d)
    for t in range(1, iters + 1):
        s = (Xp @ w) / temp
        s = np.where(M, s, -1e9)
        s = s - s.max(1, keepdims=True)
        e = np.exp(s) * M
        p_all = e / e.sum(1, keepdims=True)
        eg = e * Y
        p_gold = eg / eg.sum(1, keepdims=True)
        target = {"any": p_gold, "each": Yn, "mix": (p_gold + Yn) / 2}[loss]
        g = np.einsum("q,qn,qnd->d", W, p_all - target, Xp) / len(train) / temp + l2 * w
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g * g
        step = lr * (m1 / (1 - 0.9 ** t)) / (np.sqrt(m2 / (1 - 0.999 ** t)) + 1e-8)
        w -= step
        if l1:
            w = np.sign(w) * np.maximum(np.abs(w) - lr * l1, 0)
    return mean, scale, w


def scores(q, feats, model):
    mean, scale, w = model
    return ((tr.columns(q["X"][q["idx"]], q["names"], feats) - mean) / scale) @ w


def rank_metrics(q, order):
    """MRR, R@1, R@5, R@10 of q with its reranked files in `order` (indices
    into q["idx"]) and the rest in RRF order."""
    rest = [j for j in range(len(q["y"])) if j not in set(q["idx"].tolist())]
    full = list(q["idx"][order]) + rest
    r = q["y"][full]
    h = np.flatnonzero(r)
    ng = q["ngold"]
    return (1 / (h[0] + 1) if len(h) else 0.0, r[:1].sum() / ng, r[:5].sum() / ng, r[:10].sum() / ng)


def order_by(q, s):
    return np.argsort(-s, kind="stable")


def evaluate(qs, feats, model, post=None):
    out = []
    for q in qs:
        s = scores(q, feats, model)
        out.append(rank_metrics(q, post(q, s) if post else order_by(q, s)))
    return np.array(out)


def loro(qs, fitter, evaler):
    per = np.zeros((len(qs), 4))
    for r in sorted({q["repo"] for q in qs}):
        te = [i for i, q in enumerate(qs) if q["repo"] == r]
        m = fitter([q for q in qs if q["repo"] != r])
        per[te] = evaler([qs[i] for i in te], m)
    return per


HEAD = ("| variant | LORO MRR | LORO R@5 | LORO R@10 | val MRR | val R@1 | val R@5 | val R@10 | %s |\n|---|---|---|---|---|---|---|---|%s" %
        (" | ".join(LANGS), "---|" * len(LANGS)))


def row(name, lo, va, vqs):
    by = {l: np.mean([va[i][0] for i, q in enumerate(vqs) if q["lang"] == l]) for l in LANGS}
    L, V = lo.mean(0), va.mean(0)
    print("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |" % (
        (name, L[0], L[2], L[3], V[0], V[1], V[2], V[3]) + (" | ".join("%.3f" % by[l] for l in LANGS),)), flush=True)
    return L, V


def run(name, T, V, feats=FIRST, post=None, **kw):
    fitter = lambda qs: fitw(qs, feats, **kw)
    evaler = lambda qs, m: evaluate(qs, feats, m, post)
    lo = loro(T, fitter, evaler)
    va = evaluate(V, feats, fitter(T), post)
    return row(name, lo, va, V)


def rrf_row(T, V):
    lo = np.array([rank_metrics(q, np.arange(len(q["idx"]))) for q in T])
    va = np.array([rank_metrics(q, np.arange(len(q["idx"]))) for q in V])
    row("RRF order", lo, va, V)


def cmd_model(T, V):
    print(HEAD)
    rrf_row(T, V)
    run("**shipped: listwise softmax, L2 0.001**", T, V)
    lang_n = {}
    for q in T:
        lang_n[q["lang"]] = lang_n.get(q["lang"], 0) + 1
    run("each language weighted equally", T, V, weight=lambda q: 1.0 / lang_n[q["lang"]])
    # Queries whose RRF order already has a gold file first teach little
    # about near misses; weight the others up (a general focus on misses).
    run("queries without a gold file first in RRF x2", T, V, weight=lambda q: 2.0 if not q["y"][0] else 1.0)
    run("one-gold-file queries x2", T, V, weight=lambda q: 2.0 if q["ngold"] == 1 else 1.0)
    for l1 in (0.003, 0.01, 0.03):
        run("L1 %g (proximal) + L2 0.001" % l1, T, V, l1=l1)
    for temp in (0.5, 2.0):
        run("softmax temperature %g" % temp, T, V, temp=temp)
    for iters in (100, 1000):
        run("%d Adam steps (shipped 300: early stopping as regularisation)" % iters, T, V, iters=iters)
    stability(T, V)


def stable_features(qs, feats, min_share=1.0):
    """Features whose weight has one sign in every leave-one-repository-out
    fit on qs (min_share: share of the fits that must agree)."""
    signs = []
    for r in sorted({q["repo"] for q in qs}):
        _, _, w = fitw([q for q in qs if q["repo"] != r], feats)
        signs.append(np.sign(w))
    S = np.array(signs)
    pos, neg = (S > 0).mean(0), (S < 0).mean(0)
    return [f for f, p, n in zip(feats, pos, neg) if max(p, n) >= min_share]


def stability(T, V):
    """Stability selection, nested: for each held-out repository the
    features are chosen on the other 17 only (their own 17 folds)."""
    for share in (1.0, 0.9):
        per = np.zeros((len(T), 4))
        kept = []
        for r in sorted({q["repo"] for q in T}):
            te = [i for i, q in enumerate(T) if q["repo"] == r]
            trq = [q for q in T if q["repo"] != r]
            fs = stable_features(trq, FIRST, share)
            kept.append(len(fs))
            per[te] = evaluate([T[i] for i in te], fs, fitw(trq, fs))
        fs = stable_features(T, FIRST, share)
        va = evaluate(V, fs, fitw(T, fs))
        row("stability selection: weight sign agreed in %d%% of the folds (%d-%d of 36 kept; %d on all 18)" % (
            share * 100, min(kept), max(kept), len(fs)), per, va, V)
        print("  dropped on all 18: %s" % ", ".join(f for f in FIRST if f not in fs), file=sys.stderr)


def with_idx(qs, pick):
    out = []
    for q in qs:
        q2 = dict(q)
        q2["idx"] = np.array(pick(q), dtype=int)
        out.append(q2)
    return out


def col(q, name):
    return q["X"][:, q["names"].index(name)]


def cmd_widen(T, V):
    def rule(kind, k=3, cap=10):
        def pick(q):
            n = len(q["y"])
            base = list(range(min(DEPTH, n)))
            cand = range(DEPTH, n)
            if kind == "dir":
                dirs = {posixpath.dirname(q["paths"][t]) for t in range(min(k, n))}
                extra = [j for j in cand if posixpath.dirname(q["paths"][j]) in dirs]
            elif kind == "cochange":
                c = col(q, "cochange")
                extra = sorted([j for j in cand if c[j] > 0], key=lambda j: -c[j])
            elif kind == "path":
                c = col(q, "path_title") + col(q, "stem_title")
                extra = sorted([j for j in cand if c[j] > 0], key=lambda j: -c[j])
            elif kind == "symbol":
                extra = [j for j in cand if col(q, "rr_symbol")[j] > 0]
            elif kind == "def":
                c = col(q, "def_title") + col(q, "def_share") if "def_title" in q["names"] else np.zeros(n)
                extra = sorted([j for j in cand if c[j] > 0], key=lambda j: -c[j])
            elif kind == "title":
                c = col(q, "title_rr")
                extra = sorted([j for j in cand if c[j] > 0], key=lambda j: -c[j])
            elif kind == "depth":
                extra = list(cand)[:cap]
            elif kind == "union":
                parts = [rule(x, k, cap)(q)[len(base):] for x in ("dir", "cochange", "path", "symbol")]
                extra = list(dict.fromkeys(j for p in zip(*[p + [None] * (cap - len(p)) for p in parts]) for j in p if j is not None))
            return base + extra[:cap]
        return pick

    print(HEAD.replace("| variant |", "| reranked set | val tasks reached |").replace("|---|", "|---|---|", 1))
    variants = [("top 20 (shipped)", lambda q: list(range(min(DEPTH, len(q["y"])))))]
    variants += [("+ up to %d files ranked 21+ in the directories of the top %d" % (c, k), rule("dir", k, c)) for k, c in ((1, 5), (3, 10), (5, 10))]
    variants += [("+ up to %d co-changing with the top BM25 files" % c, rule("cochange", cap=c)) for c in (5, 10)]
    variants += [("+ up to %d whose path holds title words" % c, rule("path", cap=c)) for c in (5, 10)]
    variants += [("+ up to 10 symbol-list hits", rule("symbol", cap=10))]
    variants += [("+ up to 10 defining the query's symbols", rule("def", cap=10))]
    variants += [("+ up to 10 from the title-only BM25 list", rule("title", cap=10))]
    variants += [("+ up to 10 of dir/co-change/path/symbol, interleaved", rule("union", 3, 10))]
    variants += [("+ the next 10 (top 30)", rule("depth", cap=10))]
    for name, pick in variants:
        T2, V2 = with_idx(T, pick), with_idx(V, pick)
        reach = np.mean([q["y"][q["idx"]].any() for q in V2])
        fitter = lambda qs: fitw(qs, FIRST)
        lo = loro(T2, fitter, lambda qs, m: evaluate(qs, FIRST, m))
        va = evaluate(V2, FIRST, fitter(T2))
        by = {l: np.mean([va[i][0] for i, q in enumerate(V2) if q["lang"] == l]) for l in LANGS}
        L, Vm = lo.mean(0), va.mean(0)
        print("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |" % (
            (name, reach, L[0], L[2], L[3], Vm[0], Vm[1], Vm[2], Vm[3]) + (" | ".join("%.3f" % by[l] for l in LANGS),)), flush=True)


def cmd_blend(T, V):
    print(HEAD)
    rrf_row(T, V)

    def blend(alpha):
        def post(q, s):
            n = len(s)
            model_rank = np.empty(n)
            model_rank[np.argsort(-s, kind="stable")] = np.arange(n)
            return np.argsort(alpha * model_rank + (1 - alpha) * np.arange(n), kind="stable")
        return post
    for alpha in (1.0, 0.8, 0.65, 0.5):
        run("rank blend: %.2f model + %.2f RRF" % (alpha, 1 - alpha), T, V, post=blend(alpha))


def build_output(p):
    return any(x in ("dist", "build", "bundle", "umd") for x in p.lower().split("/")[:-1])


def loose_test(p):
    parts = p.lower().split("/")
    return bool(re.match(r"^(test|tests|spec|specs)\.(js|ts|mjs|cjs|py)$", parts[-1])) or any(
        x.endswith(("_test", "_tests", "-test", "-tests")) for x in parts[:-1])


def cmd_flags(T, V):
    def flagged(qs, gen, test):
        out = []
        for q in qs:
            q2 = dict(q)
            X = q["X"].copy()
            for j, p in enumerate(q["paths"]):
                if gen and build_output(p):
                    X[j, q["names"].index("is_generated")] = 1.0
                if test and loose_test(p):
                    X[j, q["names"].index("is_test")] = 1.0
            q2["X"] = X
            out.append(q2)
        return out
    print(HEAD)
    run("**shipped flags**", T, V)
    for name, g, t in (("is_generated + build output", True, False), ("is_test + root test files, *_test dirs", False, True),
                       ("both", True, True)):
        T2, V2 = flagged(T, g, t), flagged(V, g, t)
        n = sum(int(q["X"][q["idx"], q["names"].index("is_generated")].sum() + q["X"][q["idx"], q["names"].index("is_test")].sum()
                    - p["X"][p["idx"], p["names"].index("is_generated")].sum() - p["X"][p["idx"], p["names"].index("is_test")].sum())
                for q, p in zip(V2, V))
        run("%s (validation top-20 files newly flagged: %d)" % (name, n), T2, V2)


def cmd_noise(T, V):
    fitter = lambda qs: fitw(qs, FIRST)
    evaler = lambda qs, m: evaluate(qs, FIRST, m)
    drop = []
    for r in sorted({q["repo"] for q in T}):
        drop.append(evaler(V, fitter([q for q in T if q["repo"] != r])).mean(0))
    D = np.array(drop)
    print("validation, shipped setting fitted without one of the 18 training repositories (18 fits):")
    for k, name in ((0, "MRR"), (1, "R@1"), (2, "R@5"), (3, "R@10")):
        print("  %s min %.3f median %.3f max %.3f" % (name, D[:, k].min(), np.median(D[:, k]), D[:, k].max()))
    rng = np.random.default_rng(13)

    def ci(a, b):
        d = a - b
        bs = np.array([d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)])
        return d.mean(), np.percentile(bs, 2.5), np.percentile(bs, 97.5)

    ship_lo = loro(T, fitter, evaler)[:, 0]
    ship_va = evaler(V, fitter(T))[:, 0]
    rrf_lo = np.array([rank_metrics(q, np.arange(len(q["idx"])))[0] for q in T])
    rrf_va = np.array([rank_metrics(q, np.arange(len(q["idx"])))[0] for q in V])
    print("\n| MRR difference | LORO mean [95% interval] | validation mean [95% interval] |\n|---|---|---|")
    print("| shipped - RRF order | %+.3f [%+.3f, %+.3f] | %+.3f [%+.3f, %+.3f] |" % (ci(ship_lo, rrf_lo) + ci(ship_va, rrf_va)))
    lang_n = {}
    for q in T:
        lang_n[q["lang"]] = lang_n.get(q["lang"], 0) + 1
    for name, kw in (("each language weighted equally", dict(weight=lambda q: 1.0 / lang_n[q["lang"]])),
                     ("100 Adam steps", dict(iters=100))):
        f2 = lambda qs, kw=kw: fitw(qs, FIRST, **kw)
        lo = loro(T, f2, evaler)[:, 0]
        va = evaler(V, f2(T))[:, 0]
        print("| %s - shipped | %+.3f [%+.3f, %+.3f] | %+.3f [%+.3f, %+.3f] |" % ((name,) + ci(lo, ship_lo) + ci(va, ship_va)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["model", "widen", "blend", "flags", "noise"])
    ap.add_argument("train")
    ap.add_argument("val")
    a = ap.parse_args()
    T, V = load(a.train), load(a.val)
    {"model": cmd_model, "widen": cmd_widen, "blend": cmd_blend, "flags": cmd_flags, "noise": cmd_noise}[a.cmd](T, V)


if __name__ == "__main__":
    main()
