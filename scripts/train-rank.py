#!/usr/bin/env python3
"""Train codectx's learned file ranker (pkg/query/rank/model.json).

Input: the feature dumps of `codectx eval --features FILE` (one JSON line per
task: the query's top files in RRF order, each with its feature vector and
gold label). Needs numpy (a venv is enough: python3 -m venv V; V/bin/pip
install numpy).

The model is linear, score = sum w_i * z_i with z_i = (x_i - mean_i) /
scale_i (optionally clipped to [-clip, clip]), trained with a listwise
softmax loss: per query, -log(sum over gold files of softmax(score)), which
puts the first changed file on top ("any"; "each" and "mix" pull every
gold file up), plus L2. The feature set, loss, L2, the number of reranked
files and the clip are chosen by leave-one-repository-out validation on the
training dumps: for each repository, a model trained on the others is
scored on it, by MRR + R@5 + R@10.

  scripts/train-rank.py cv TRAIN.jsonl[,MORE.jsonl] [--extra MINED.jsonl]
      leave-repository-out metrics of every setting, and of the RRF order;
      --extra dumps are training data only (never scored).
  scripts/train-rank.py fit TRAIN.jsonl --out model.json [--eval VAL.jsonl]
          [--setting FEATURES,LOSS,L2,DEPTH,CLIP]
      fits the setting chosen by cv (or the one given) on all of TRAIN and
      writes the model; with --eval, scores it (and the RRF order) on VAL,
      by repository, language and trigger. The shipped model is
      --setting first,any,0.001,20,0 (see docs/benchmarks.md).
  scripts/train-rank.py score MODEL.json VAL.jsonl
      scores a model file (and the RRF order) on VAL.
  scripts/train-rank.py ablate TRAIN.jsonl VAL.jsonl [--setting ...]
      the validation effect of each signal group: the chosen setting
      trained without the group's features, scored on VAL.
  scripts/train-rank.py recall DUMP.jsonl
      first-stage candidate recall: where the fused RRF ranking (before
      reranking) puts the first gold file of each task, by language and
      trigger, and where each deep single list (query.DeepLists) puts it.

Every command takes --config NAME to read only the dump lines of that
eval configuration (a dump of several configurations holds one line per
task and configuration).

Metrics here are over the dumped candidates only (a gold file outside them
counts as not found); `codectx eval` gives the exact figures.
"""
import argparse
import collections
import json
import re
import sys

import numpy as np

# Feature groups, for ablation and feature-set selection.
GROUPS = {
    "fusion": ["fused_rel", "fused_rr", "fused_x_concept"],
    "lists": ["rr_symbol", "rr_bm25", "rr_bm25-file", "rr_bm25-path", "rr_bm25-literal",
              "rr_dense", "rr_graph", "rr_graph-index", "rr_history", "bm25_rel", "bm25_chunks",
              "file_bm25_rel", "sym_x_code"],
    "title": ["title_rr"],
    "coverage": ["title_cover", "title_cover_rel", "query_cover"],
    "path": ["path_title", "stem_title", "dir_title", "path_body", "path_x_concept", "dir_first", "path_depth"],
    "priors": ["prior", "is_test", "is_docs", "decl_only", "is_index", "is_generated"],
    "size": ["log_chunks", "log_size"],
    "graph": ["log_degree", "near_top", "same_dir_top"],
    "test pair": ["test_pair"],
    "definitions": ["def_share", "def_title", "def_best", "stem_ident", "stem_ident_title", "sym_cover"],
    "propagation": ["prop_out", "prop_in", "prop_out_sum", "prop_in_sum", "links_top"],
    "neighbours": ["def_calls", "def_called", "test_imports", "deg_rel", "dir_share"],
    "recency": ["hist_commits", "hist_recency"],
    "cochange": ["cochange", "cochange_title"],
    "replay": ["replay_top", "replay_prec", "replay_missed", "replay_lift"],
    "title chunks": ["title_chunk_rr", "title_chunk_rel"],
    "query": ["code_share", "trig_symbol", "trig_temporal", "trig_implicit", "additive", "sym_x_code"],
}


def files_of(paths):
    """Dump files: each argument may name several, joined by commas."""
    return [f for p in paths for f in p.split(",") if f]


# CONFIG, when set (--config), is the only eval configuration whose dump
# lines are read.
CONFIG = None


def lines(paths):
    for p in files_of(paths):
        with open(p) as f:
            for line in f:
                d = json.loads(line)
                if CONFIG is None or d.get("config") == CONFIG:
                    yield d


def load(paths):
    qs = []
    for d in lines(paths):
        names = d["names"]
        X = np.array([c["x"] for c in d["files"]], dtype=float).reshape(-1, len(names))
        y = np.array([c["gold"] for c in d["files"]], dtype=bool)
        qs.append({"task": d["task"], "repo": d["repo"], "lang": d["language"],
                   "trigger": d["trigger"], "names": names, "X": X, "y": y})
    return qs


def columns(X, names, feats):
    """The model's feature columns of X: a name "a*b" is a product."""
    cols = []
    for f in feats:
        a, _, b = f.partition("*")
        c = X[:, names.index(a)]
        if b:
            c = c * X[:, names.index(b)]
        cols.append(c)
    return np.stack(cols, 1) if cols else np.zeros((len(X), 0))


def select(qs, feats, depth):
    return [(columns(q["X"][:depth], q["names"], feats), q["y"][:depth]) for q in qs]


def standardize(X, mean, scale, clip):
    """(X - mean) / scale, clipped to [-clip, clip] when clip > 0: a rare
    feature (almost always 0 in training) has a tiny scale, and without the
    clip one file where it fires on an unseen repository gets a score of
    many standard deviations (measured: the barrel-index list on the dev
    set's TypeScript repository pushed its index file from rank 8-10 to
    17-19)."""
    Z = (X - mean) / scale
    return np.clip(Z, -clip, clip) if clip > 0 else Z


def fit(data, l2, iters=300, lr=0.05, loss="any", clip=0.0):
    """Listwise softmax loss with L2, full-batch Adam. Returns mean, scale, w.

    loss "any": -log of the softmax mass of the gold files (one gold file on
    top is enough); "each": the mean over gold files of -log softmax (every
    gold file is pulled up, which is what packing at small budgets needs);
    "mix": the mean of the two."""
    allX = np.vstack([X for X, _ in data if len(X)])
    mean, scale = allX.mean(0), allX.std(0)
    scale[scale < 1e-6] = 1
    d = allX.shape[1]
    # Pad queries to one array: Q x N x d, with a mask.
    train = [(X, y) for X, y in data if y.any() and len(y) > 1]
    n = max(len(y) for _, y in train)
    Xp = np.zeros((len(train), n, d))
    M = np.zeros((len(train), n), dtype=bool)
    Y = np.zeros((len(train), n), dtype=bool)
    for i, (X, y) in enumerate(train):
        Xp[i, :len(y)] = standardize(X, mean, scale, clip)
        M[i, :len(y)] = True
        Y[i, :len(y)] = y
    Yn = Y / Y.sum(1, keepdims=True)
    w = np.zeros(d)
    m1, m2 = np.zeros(d), np.zeros(d)
    for t in range(1, iters + 1):
        s = Xp @ w
        s = np.where(M, s, -1e9)
        s = s - s.max(1, keepdims=True)
        e = np.exp(s) * M
        p_all = e / e.sum(1, keepdims=True)
        eg = e * Y
        p_gold = eg / eg.sum(1, keepdims=True)
        # d loss / d s = p_all - p_gold ("any"), p_all - y/G ("each")
        target = {"any": p_gold, "each": Yn, "mix": (p_gold + Yn) / 2}[loss]
        g = np.einsum("qn,qnd->d", p_all - target, Xp) / len(train) + l2 * w
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g * g
        w -= lr * (m1 / (1 - 0.9 ** t)) / (np.sqrt(m2 / (1 - 0.999 ** t)) + 1e-8)
    return mean, scale, w, clip


def metrics(X, y, model):
    """MRR, R@1, R@5 of one query, ranked by model (None: the dumped RRF order)."""
    if len(y) == 0:
        return 0.0, 0.0, 0.0
    if model is None:
        order = np.arange(len(y))
    else:
        mean, scale, w, clip = model
        s = standardize(X, mean, scale, clip) @ w
        order = np.argsort(-s, kind="stable")
    ranked = y[order]
    gold = max(1, int(y.sum()))
    hits = np.flatnonzero(ranked)
    mrr = 1.0 / (hits[0] + 1) if len(hits) else 0.0
    return mrr, ranked[:1].sum() / gold, ranked[:5].sum() / gold


def rerank_eval(qs, feats, depth, model, ngold):
    """Metrics of reranking the top depth files, the rest left in RRF order."""
    out = []
    for q, ng in zip(qs, ngold):
        X, y = q["X"], q["y"]
        if model is None or len(y) == 0:
            order = np.arange(len(y))
        else:
            mean, scale, w, clip = model
            top = min(depth, len(y))
            s = standardize(columns(X[:top], q["names"], feats), mean, scale, clip) @ w
            order = np.concatenate([np.argsort(-s, kind="stable"), np.arange(top, len(y))])
        ranked = y[order]
        hits = np.flatnonzero(ranked)
        mrr = 1.0 / (hits[0] + 1) if len(hits) else 0.0
        out.append((mrr, ranked[:1].sum() / ng, ranked[:5].sum() / ng, ranked[:10].sum() / ng))
    return np.array(out)


def ngold_of(qs, dumps):
    """Gold count per query, from the dump lines (gold outside the candidates counts)."""
    return [len(dumps[q["task"]]) for q in qs]


def gold_lists(paths):
    return {d["task"]: d["gold"] for d in lines(paths)}


RECALL_AT = (1, 5, 10, 20, 50, 100, 200)


def recall_rows(ds, ranks):
    """Share of tasks whose first gold file is within the top k of a
    ranking (ranks(d): each gold file's 1-based rank, 0 absent), for each
    k of RECALL_AT, and the share where no gold file is ranked."""
    first = [min([r for r in ranks(d) if r > 0], default=0) for d in ds]
    n = max(1, len(ds))
    return [sum(1 for f in first if 0 < f <= k) / n for k in RECALL_AT], sum(1 for f in first if f == 0) / n


def recall(path):
    ds = list(lines([path]))
    if not ds or "gold_ranks" not in ds[0]:
        sys.exit("train-rank.py: %s has no gold_ranks (a dump of an older codectx eval)" % path)
    head = "| %s | tasks | " + " | ".join("R@%d" % k for k in RECALL_AT) + " | missing |\n|---|---|" + "---|" * (len(RECALL_AT) + 1)
    groups = collections.defaultdict(list)
    for d in ds:
        groups["all"].append(d)
        groups[d["language"]].append(d)
        groups[d["trigger"]].append(d)
    pools = sorted(d["pool"] for d in ds)
    print("first gold file in the fused RRF ranking (before reranking); files in the ranking: median %d, max %d" % (pools[len(pools) // 2], pools[-1]))
    print(head % "group")
    for g in sorted(groups, key=lambda g: (g != "all", g.isupper(), g)):
        at, miss = recall_rows(groups[g], lambda d: d["gold_ranks"])
        print("| %s | %d | %s | %.3f |" % (g, len(groups[g]), " | ".join("%.3f" % v for v in at), miss))
    print("\nfirst gold file in each deep single list (all tasks)")
    print(head % "list")
    for name in sorted({k for d in ds for k in d.get("deep", {})}):
        at, miss = recall_rows(ds, lambda d: d["deep"].get(name, []))
        print("| %s | %d | %s | %.3f |" % (name, len(ds), " | ".join("%.3f" % v for v in at), miss))


ALL = [f for g in GROUPS.values() for f in g]


# Interactions: signals whose worth depends on the kind of query. The query
# flags alone are constant within a query and cannot reorder its files.
CROSS_BASE = ["rr_symbol", "rr_bm25", "rr_bm25-file", "rr_bm25-path", "rr_history", "rr_graph", "fused_rel",
              "path_title", "stem_title", "title_rr", "cochange", "hist_recency", "is_test", "is_docs", "decl_only"]
CROSS_BY = ["trig_symbol", "trig_temporal", "code_share", "additive"]


# The 36 features of the first learned model (before coverage, directory,
# title co-change, test-pair and definition features).
NEW = GROUPS["coverage"] + ["dir_first", "path_depth", "test_pair", "cochange_title"] + GROUPS["definitions"] + \
    GROUPS["propagation"] + GROUPS["neighbours"] + GROUPS["replay"] + GROUPS["title chunks"]


def feature_sets():
    base = [f for f in dict.fromkeys(ALL) if f not in GROUPS["query"] or "_x_" in f]
    first = [f for f in base if f not in NEW]
    crosses = base + ["%s*%s" % (a, b) for a in CROSS_BASE for b in CROSS_BY]
    few = base + ["rr_symbol*trig_symbol", "rr_history*trig_temporal", "rr_bm25-path*trig_symbol",
                  "is_test*code_share", "stem_title*trig_symbol", "fused_rel*trig_temporal"]
    return {"base": base, "first": first, "few-crosses": few, "crosses": crosses}


def feature_set(name):
    """A named feature set, or NAME+ADD~DROP...: the set plus or minus
    feature groups or single features ("first+propagation~path_x_concept")."""
    parts = re.split(r"([+~])", name)
    feats = list(feature_sets()[parts[0]])
    for op, a in zip(parts[1::2], parts[2::2]):
        for f in GROUPS.get(a, [a]):
            if op == "+" and f not in feats:
                feats.append(f)
            elif op == "~" and f in feats:
                feats.remove(f)
    return feats


FEATURE_SETS = ("base", "first")
SETTINGS = [(fs, loss, l2, depth, clip) for fs in FEATURE_SETS for loss in ("any", "mix")
            for l2 in (0.001, 0.01) for depth in (20, 50) for clip in (0, 3)]
METRICS = "MRR %.3f R@1 %.3f R@5 %.3f R@10 %.3f"


def objective(m):
    """What cv maximises: MRR, R@5 and R@10 alike (R@10 stands for what
    small budgets pack: about ten files fit at 2k tokens, most as stubs)."""
    return m[0] + m[2] + m[3]


def cv(qs, ngold, verbose=True, settings=None, extra=()):
    """Leave-one-repository-out over qs's repositories: for each, a model
    trained on the other repositories' tasks (of qs and of extra, which
    is training data only) is scored on its tasks of qs."""
    repos = sorted({q["repo"] for q in qs})
    results = {}
    base = rerank_eval(qs, [], 0, None, ngold).mean(0)
    if verbose:
        print("RRF order (in-candidate): " + METRICS % tuple(base))
    for fs, loss, l2, depth, clip in settings or SETTINGS:
        feats = feature_set(fs)
        per = np.zeros((len(qs), 4))
        for r in repos:
            tr = [q for q in list(qs) + list(extra) if q["repo"] != r]
            te = [i for i, q in enumerate(qs) if q["repo"] == r]
            model = fit(select(tr, feats, depth), l2, loss=loss, clip=clip)
            per[te] = rerank_eval([qs[i] for i in te], feats, depth, model, [ngold[i] for i in te])
        results[(fs, loss, l2, depth, clip)] = per.mean(0)
        if verbose:
            print("%-6s loss=%-4s l2=%-6g depth=%-3d clip=%-3g " % (fs, loss, l2, depth, clip) + METRICS % tuple(per.mean(0)), flush=True)
    best = max(results, key=lambda k: objective(results[k]))
    return best, results[best], base


def table(qs, ngold, feats, depth, model, key):
    groups = collections.defaultdict(list)
    for i, q in enumerate(qs):
        groups[q[key]].append(i)
    rows = []
    for g in sorted(groups):
        ix = groups[g]
        sub = [qs[i] for i in ix]
        ng = [ngold[i] for i in ix]
        a = rerank_eval(sub, [], 0, None, ng).mean(0)
        b = rerank_eval(sub, feats, depth, model, ng).mean(0)
        rows.append("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |" % ((g, len(ix)) + tuple(a) + tuple(b)))
    return ("| %s | tasks | MRR rrf | R@1 rrf | R@5 rrf | R@10 rrf | MRR learned | R@1 learned | R@5 learned | R@10 learned |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n" % key) + "\n".join(rows)


def parse_setting(s):
    fs, loss, l2, depth, clip = s.split(",")
    return fs, loss, float(l2), int(depth), float(clip)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["cv", "fit", "ablate", "score", "recall"])
    ap.add_argument("train", help="training dumps (comma-separated), or the model for score")
    ap.add_argument("val", nargs="?", help="validation dumps (ablate, score)")
    ap.add_argument("--out")
    ap.add_argument("--eval")
    ap.add_argument("--setting", help="FEATURES,LOSS,L2,DEPTH,CLIP: skip cv and use this setting")
    ap.add_argument("--extra", help="more training dumps (comma-separated), used to fit but never scored in cv: "
                    "tasks mined in addition from the training repositories")
    ap.add_argument("--config", help="read only the dump lines of this eval configuration")
    a = ap.parse_args()
    global CONFIG
    CONFIG = a.config
    if a.cmd == "recall":
        recall(a.train)
        return
    if a.cmd == "score":
        with open(a.train) as f:
            m = json.load(f)
        report(a.val, m["features"], m["depth"], (np.array(m["mean"]), np.array(m["scale"]), np.array(m["weights"]), m.get("clip", 0)))
        return
    qs = load([a.train])
    ng = ngold_of(qs, gold_lists([a.train]))
    extra = load([a.extra]) if a.extra else []
    if a.cmd == "cv":
        best, r, base = cv(qs, ng, extra=extra)
        print("chosen:", best, METRICS % tuple(r))
        return
    if a.setting:
        best, r, base = cv(qs, ng, verbose=True, settings=[parse_setting(a.setting)], extra=extra)
    else:
        best, r, base = cv(qs, ng, verbose=a.cmd == "fit", extra=extra)
    train_qs = qs + extra
    fs, loss, l2, depth, clip = best
    feats = feature_set(fs)
    if a.cmd == "ablate":
        vq = load([a.val])
        vng = ngold_of(vq, gold_lists([a.val]))
        full = rerank_eval(vq, feats, depth, fit(select(train_qs, feats, depth), l2, loss=loss, clip=clip), vng).mean(0)
        print("| signal group left out | validation MRR | R@1 | R@5 | R@10 | MRR change |\n|---|---|---|---|---|---|")
        print("| (none: all features) | %.3f | %.3f | %.3f | %.3f | |" % tuple(full))
        for g, gf in GROUPS.items():
            sub = [f for f in feats if not any(p in gf for p in f.split("*"))]
            if sub == feats:
                continue
            m = rerank_eval(vq, sub, depth, fit(select(train_qs, sub, depth), l2, loss=loss, clip=clip), vng).mean(0)
            print("| %s | %.3f | %.3f | %.3f | %.3f | %+.3f |" % ((g,) + tuple(m) + (m[0] - full[0],)))
        return
    model = fit(select(train_qs, feats, depth), l2, loss=loss, clip=clip)
    mean, scale, w, _ = model
    note = ("trained by scripts/train-rank.py on %d tasks of %d repositories; setting %s loss=%s l2=%g depth=%d clip=%g chosen by "
            "leave-repository-out MRR %.3f R@5 %.3f R@10 %.3f (RRF order %.3f %.3f %.3f)") % (
        len(train_qs), len({q["repo"] for q in train_qs}), fs, loss, l2, depth, clip, r[0], r[2], r[3], base[0], base[2], base[3])
    out = {"kind": "linear", "features": feats, "mean": [round(v, 6) for v in mean], "scale": [round(v, 6) for v in scale],
           "weights": [round(v, 6) for v in w], "bias": 0, "depth": depth, "clip": clip, "note": note}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(note)
    for fname, wt in sorted(zip(feats, w), key=lambda t: -abs(t[1])):
        print("  %-16s %+.3f" % (fname, wt))
    if a.eval:
        report(a.eval, feats, depth, model)


def report(path, feats, depth, model):
    vq = load([path])
    vng = ngold_of(vq, gold_lists([path]))
    print(table(vq, vng, feats, depth, model, "repo"))
    print(table(vq, vng, feats, depth, model, "lang"))
    print(table(vq, vng, feats, depth, model, "trigger"))
    b = rerank_eval(vq, [], 0, None, vng).mean(0)
    m = rerank_eval(vq, feats, depth, model, vng).mean(0)
    print("overall (%d tasks): rrf " % len(vq) + METRICS % tuple(b) + "; learned " + METRICS % tuple(m))


if __name__ == "__main__":
    sys.exit(main())
