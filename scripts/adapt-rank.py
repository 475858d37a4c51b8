#!/usr/bin/env python3
"""Per-repository adaptation of the learned file ranker (issue 13): the
global linear model plus a small per-repository delta, w_repo = w_global +
delta, with delta fitted on tasks mined from that repository's own past
(before its first corpus task) under an L2 pull toward 0, and optionally
only on a few features. Needs numpy and scripts/train-rank.py beside it
(loading, the global fit, metrics).

Inputs are `codectx eval --rank-only --features` dumps: the training and
validation corpus tasks, and the tasks of
`scripts/mine-tasks.py --pick newest --before CORPUS.jsonl` (each
repository's history strictly older than the earliest base commit of its
corpus tasks, the corpus's PRs excluded).

  scripts/adapt-rank.py grid TRAIN.jsonl MINED.jsonl
      every setting, leave-one-repository-out over the training
      repositories: for each repository R, the global model (shipped
      setting) is fitted on the other repositories' corpus tasks, the
      delta on R's mined tasks, and R's corpus tasks are scored; prints
      the setting that maximises MRR + R@5 + R@10 (train-rank.py's
      objective). Validation is not read. A last column asks the
      transfer question apart: the delta fitted on a repository's older
      mined tasks, scored on its newest 10 mined tasks (repositories with
      more than 10); a control table fits the delta instead on as many
      mined tasks of the other training repositories.
  scripts/adapt-rank.py corpus TRAIN.jsonl MINED.jsonl
      a diagnostic, not a deployable setting: the delta fitted, for each
      training task, on the other corpus tasks of its repository (which
      may be later than it), the global model fitted on the other
      repositories: what adaptation could give if a repository's own
      tasks were of the corpus's kind. Training repositories only.
  scripts/adapt-rank.py score TRAIN.jsonl MINED.jsonl VAL.jsonl --settings S[;S...]
      the given settings (chosen by grid), leave-repository-out and on
      validation (global model fitted on all training repositories, delta
      from each validation repository's own mined tasks), with paired
      bootstrap intervals (2,000 resamples of tasks) of the MRR
      difference against the global model on both sets.

A setting is FEATURES,L2,TASKS: FEATURES names the features of the
shipped model the delta may move (all 36; repo: the 16 path, prior,
size, history and co-change features; lists: the 17 retrieval-list,
BM25 and fusion features; bias: is_test, is_generated, log_size,
log_chunks, hist_commits, hist_recency),
L2 the pull toward 0 (on the same loss as train-rank.py's, per mined
task), TASKS the number of the repository's newest mined tasks used.
"refit,W,TASKS" instead fits one model on the other repositories' corpus
tasks and R's newest mined tasks, each of these weighted W.

--each MINED_TASKS.jsonl (the tasks file of `mine-tasks.py --before
CORPUS.jsonl --each`, its dump as MINED.jsonl) fits a delta per corpus
task instead, on the newest mined tasks strictly older than that task's
own base commit: a deployment's view (the history just before the
snapshot), with no history later than the task (grid: settings without
refit).

Metrics are over the dumped candidates (train-rank.py's); a repository
without usable mined tasks (none has a gold file in the reranked 20) keeps
the global model.
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

SHIPPED = ("first", "any", 0.001, 20, 0.0)
FEATS = tr.feature_set(SHIPPED[0])
DEPTH = SHIPPED[3]
LANGS = ["go", "java", "javascript", "python", "rust", "typescript"]

G = tr.GROUPS
SUBSETS = {
    "all": FEATS,
    "repo": [f for f in FEATS if f in G["path"] + G["priors"] + G["size"] + G["recency"] + G["cochange"]],
    "lists": [f for f in FEATS if f in G["lists"] + G["title"] + G["fusion"]],
    "bias": [f for f in FEATS if f in ("is_test", "is_generated", "log_size", "log_chunks", "hist_commits", "hist_recency")],
}
GRID = [("%s,%g,%d" % (fs, l2, k)) for fs in ("all", "repo", "lists", "bias")
        for l2 in (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0) for k in (10, 20, 40)] + \
       [("refit,%g,%d" % (wt, k)) for wt in (1.0, 3.0) for k in (20, 40)]


def load(path):
    qs = tr.load([path])
    gold = tr.gold_lists([path])
    for q in qs:
        q["ngold"] = len(gold[q["task"]])
    return qs


def newest(mined, repo, k):
    """The repository's k newest mined tasks (mine-tasks.py --pick newest
    writes them newest first)."""
    return [q for q in mined if q["repo"] == repo][:k]


def fit_global(qs, weights=None):
    fs, loss, l2, depth, clip = SHIPPED
    if weights is None:
        return tr.fit(tr.select(qs, FEATS, depth), l2, loss=loss, clip=clip)
    return fit_weighted(qs, weights, l2)


def fit_weighted(qs, weights, l2, iters=300, lr=0.05):
    """train-rank.py's fit with a weight per query (for refit)."""
    data = [(X, y, wq) for (X, y), wq in zip(tr.select(qs, FEATS, DEPTH), weights)]
    allX = np.vstack([X for X, _, _ in data if len(X)])
    mean, scale = allX.mean(0), allX.std(0)
    scale[scale < 1e-6] = 1
    w = fit_delta([(X, y) for X, y, _ in data], mean, scale, np.zeros(len(FEATS)), np.ones(len(FEATS), bool), l2,
                  qw=np.array([wq for _, _, wq in data]), iters=iters, lr=lr, decay=False)
    return mean, scale, w, 0.0


def fit_delta(data, mean, scale, w0, mask, l2, qw=None, iters=500, lr=0.05, decay=True):
    """w0 + delta, delta fitted by train-rank.py's listwise softmax loss
    ("any") on data, with l2 * |delta|^2 / 2, delta 0 outside mask, in the
    global model's standardisation (Adam, the step decaying to 0 unless
    decay is False, as in train-rank.py's fit). Returns w0 + delta."""
    keep = [i for i, (X, y) in enumerate(data) if y.any() and len(y) > 1]
    if not keep:
        return w0.copy()
    train = [data[i] for i in keep]
    qw = np.ones(len(train)) if qw is None else np.asarray(qw, float)[keep]
    qw = qw / qw.mean()
    n, d = max(len(y) for _, y in train), len(w0)
    Xp = np.zeros((len(train), n, d))
    M = np.zeros((len(train), n), dtype=bool)
    Y = np.zeros((len(train), n), dtype=bool)
    for i, (X, y) in enumerate(train):
        Xp[i, :len(y)] = (X - mean) / scale
        M[i, :len(y)] = True
        Y[i, :len(y)] = y
    delta = np.zeros(d)
    m1, m2 = np.zeros(d), np.zeros(d)
    for t in range(1, iters + 1):
        s = Xp @ (w0 + delta)
        s = np.where(M, s, -1e9)
        s = s - s.max(1, keepdims=True)
        e = np.exp(s) * M
        p_all = e / e.sum(1, keepdims=True)
        eg = e * Y
        p_gold = eg / eg.sum(1, keepdims=True)
        g = np.einsum("q,qn,qnd->d", qw, p_all - p_gold, Xp) / len(train) + l2 * delta
        g = g * mask
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g * g
        # The step decays linearly to 0: Adam's steps keep a size of about
        # lr however small the gradient, so a constant step leaves a delta
        # of about lr where the L2 pulls it to 0.
        step = lr * (1 - (t - 1) / iters) if decay else lr
        delta -= step * (m1 / (1 - 0.9 ** t)) / (np.sqrt(m2 / (1 - 0.999 ** t)) + 1e-8)
    return w0 + delta


def adapted(glob, others, mined_r, setting):
    """The repository's model under setting, from the global model glob
    (fitted on others) and its mined tasks."""
    kind, a, k = setting.split(",")
    a, k = float(a), int(k)
    mined_r = mined_r[:k]
    if not any(q["y"][:DEPTH].any() for q in mined_r):
        return glob
    if kind == "refit":
        return fit_global(others + mined_r, [1.0] * len(others) + [a] * len(mined_r))
    mean, scale, w0, clip = glob
    mask = np.array([f in SUBSETS[kind] for f in FEATS])
    w = fit_delta(tr.select(mined_r, FEATS, DEPTH), mean, scale, w0, mask, a)
    return mean, scale, w, clip


def score(qs, model):
    return tr.rerank_eval(qs, FEATS, DEPTH, model, [q["ngold"] for q in qs])


# EACH, when set (--each): corpus task id -> the ids of the mined tasks
# strictly older than its own base commit (mine-tasks.py --before --each);
# each task then gets its own delta.
EACH = None


def per_task(qs, glob, others, mined, settings, out, ix):
    """Scores of qs (at rows ix of out), each with a delta fitted on its
    own mined tasks (EACH), newest first."""
    cache = {}
    for i, q in zip(ix, qs):
        mq = [m for m in mined if m["task"] in EACH.get(q["task"], ())]
        for s in settings:
            k = int(s.split(",")[2])
            key = (s, tuple(m["task"] for m in mq[:k]))
            if key not in cache:
                cache[key] = adapted(glob, others, mq, s)
            out[s][i] = score([q], cache[key])[0]


def loro(T, mined, settings):
    """Per-task metrics of each training task, for the global model (None)
    and each setting, each repository's global model fitted without it."""
    out = {s: np.zeros((len(T), 4)) for s in [None] + list(settings)}
    for r in sorted({q["repo"] for q in T}):
        te = [i for i, q in enumerate(T) if q["repo"] == r]
        others = [q for q in T if q["repo"] != r]
        glob = fit_global(others)
        mr = newest(mined, r, 10 ** 9)
        out[None][te] = score([T[i] for i in te], glob)
        if EACH is not None:
            per_task([T[i] for i in te], glob, others, mr, settings, out, te)
            continue
        for s in settings:
            out[s][te] = score([T[i] for i in te], adapted(glob, others, mr, s))
    return out


def within(T, mined, settings, held=10, control=False):
    """The transfer question apart: for each training repository with more
    than held mined tasks, the global model fitted on the other
    repositories' corpus tasks, the delta on its older mined tasks (all
    but the newest held), scored on its newest held mined tasks. With
    control, the delta is fitted instead on as many tasks drawn at random
    from the other training repositories' mined tasks: what adapting to
    mined tasks in general, not to the repository, gives."""
    out = {s: [] for s in [None] + list(settings)}
    rng = np.random.default_rng(13)
    for r in sorted({q["repo"] for q in T}):
        mr = newest(mined, r, 10 ** 9)
        if len(mr) <= held:
            continue
        others = [q for q in T if q["repo"] != r]
        glob = fit_global(others)
        out[None].append(score(mr[:held], glob))
        pool = [q for q in mined if q["repo"] != r and q["repo"] in {t["repo"] for t in T}]
        for s in settings:
            fit_on = mr[held:]
            if control:
                k = min(len(fit_on), int(s.split(",")[2]))
                fit_on = [pool[i] for i in rng.choice(len(pool), k, replace=False)]
            out[s].append(score(mr[:held], adapted(glob, others, fit_on, s)))
    return {s: np.vstack(v) for s, v in out.items()}


def corpus_loo(T, settings):
    out = {s: np.zeros((len(T), 4)) for s in [None] + list(settings)}
    for r in sorted({q["repo"] for q in T}):
        te = [i for i, q in enumerate(T) if q["repo"] == r]
        others = [q for q in T if q["repo"] != r]
        glob = fit_global(others)
        for i in te:
            rest = [T[j] for j in te if j != i]
            out[None][i] = score([T[i]], glob)[0]
            for s in settings:
                out[s][i] = score([T[i]], adapted(glob, others, rest, s))[0]
    return out


def cmd_corpus(T):
    settings = ["%s,%g,100" % (fs, l2) for fs in ("all", "repo", "lists", "bias") for l2 in (0.1, 0.3, 1.0, 3.0, 10.0)] + \
               ["refit,%g,100" % wt for wt in (1.0, 3.0)]
    res = corpus_loo(T, settings)
    rng = np.random.default_rng(13)
    print("| setting (delta on the repository's other corpus tasks) | MRR | R@1 | R@5 | R@10 | MRR difference [95% interval] |\n|---|---|---|---|---|---|")
    for s in [None] + settings:
        m = res[s].mean(0)
        d = "" if s is None else "%+.3f [%+.3f, %+.3f]" % ci(res[s][:, 0], res[None][:, 0], rng)
        print("| %s | %.3f | %.3f | %.3f | %.3f | %s |" % ((name(s),) + tuple(m) + (d,)), flush=True)


def validation(T, V, mined, settings):
    out = {s: np.zeros((len(V), 4)) for s in [None] + list(settings)}
    glob = fit_global(T)
    for r in sorted({q["repo"] for q in V}):
        te = [i for i, q in enumerate(V) if q["repo"] == r]
        mr = newest(mined, r, 10 ** 9)
        out[None][te] = score([V[i] for i in te], glob)
        if EACH is not None:
            per_task([V[i] for i in te], glob, T, mr, settings, out, te)
            continue
        for s in settings:
            out[s][te] = score([V[i] for i in te], adapted(glob, T, mr, s))
    return out


def ci(a, b, rng):
    d = a - b
    bs = np.array([d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)])
    return d.mean(), np.percentile(bs, 2.5), np.percentile(bs, 97.5)


def name(s):
    return "global (shipped setting)" if s is None else s


def mined_counts(mined, repos):
    rows = []
    for r in repos:
        ms = [q for q in mined if q["repo"] == r]
        rows.append((r, len(ms), sum(1 for q in ms if q["y"][:DEPTH].any())))
    return rows


GRID_EACH = [("%s,%g,%d" % (fs, l2, k)) for fs in ("all", "repo", "lists", "bias")
             for l2 in (0.3, 1.0, 3.0, 10.0) for k in (10, 20, 40)]


def cmd_grid(T, mined):
    if EACH is not None:
        res = loro(T, mined, GRID_EACH)
        rng = np.random.default_rng(13)
        print("| setting (a delta per task) | LORO MRR | R@1 | R@5 | R@10 | LORO MRR difference [95% interval] |\n|---|---|---|---|---|---|")
        for s in [None] + GRID_EACH:
            d = "" if s is None else "%+.3f [%+.3f, %+.3f]" % ci(res[s][:, 0], res[None][:, 0], rng)
            print("| %s | %.3f | %.3f | %.3f | %.3f | %s |" % ((name(s),) + tuple(res[s].mean(0)) + (d,)), flush=True)
        best = max(GRID_EACH, key=lambda s: tr.objective(res[s].mean(0)))
        print("\nchosen (MRR + R@5 + R@10, leave-repository-out):", best, "%.3f %.3f %.3f %.3f" % tuple(res[best].mean(0)))
        return
    print("| repository | mined tasks | with a gold file in the reranked 20 |\n|---|---|---|")
    for r, n, u in mined_counts(mined, sorted({q["repo"] for q in T})):
        print("| %s | %d | %d |" % (r, n, u))
    res = loro(T, mined, GRID)
    wi = within(T, mined, GRID)
    rng = np.random.default_rng(13)
    print("\n| setting | LORO MRR | R@1 | R@5 | R@10 | LORO MRR difference [95%% interval] | newest 10 mined (%d tasks): MRR | R@5 | "
          "MRR difference [95%% interval] |\n|---|---|---|---|---|---|---|---|---|" % len(wi[None]))
    for s in [None] + GRID:
        m, w = res[s].mean(0), wi[s].mean(0)
        d = "| |" if s is None else "| %+.3f [%+.3f, %+.3f] |" % ci(res[s][:, 0], res[None][:, 0], rng)
        e = "" if s is None else "%+.3f [%+.3f, %+.3f]" % ci(wi[s][:, 0], wi[None][:, 0], rng)
        print("| %s | %.3f | %.3f | %.3f | %.3f %s %.3f | %.3f | %s |" % ((name(s),) + tuple(m) + (d, w[0], w[2], e)), flush=True)
    best = max(GRID, key=lambda s: tr.objective(res[s].mean(0)))
    picks = ["all,1,20", "all,3,20", "all,3,40", "repo,1,20", "repo,3,20", "refit,1,40", "refit,3,40"]
    ctl = within(T, mined, picks, control=True)
    print("\ncontrol: the delta fitted on as many mined tasks of the other training repositories, drawn at random, "
          "scored on each repository's newest 10 mined tasks")
    print("| setting | own older mined tasks: MRR | others' mined tasks: MRR | MRR difference, own - others [95% interval] |\n|---|---|---|---|")
    for s in picks:
        print("| %s | %.3f | %.3f | %+.3f [%+.3f, %+.3f] |" % ((s, wi[s][:, 0].mean(), ctl[s][:, 0].mean()) + ci(wi[s][:, 0], ctl[s][:, 0], rng)))
    print("\nchosen (MRR + R@5 + R@10, leave-repository-out):", best, "%.3f %.3f %.3f %.3f" % tuple(res[best].mean(0)))


def cmd_score(T, V, mined, settings):
    print("| repository | mined tasks | with a gold file in the reranked 20 |\n|---|---|---|")
    for r, n, u in mined_counts(mined, sorted({q["repo"] for q in V})):
        print("| %s | %d | %d |" % (r, n, u))
    lo = loro(T, mined, settings)
    va = validation(T, V, mined, settings)
    print("\n| model | LORO-18 MRR | R@5 | R@10 | validation MRR | R@1 | R@5 | R@10 | %s |\n|---|---|---|---|---|---|---|---|%s" %
          (" | ".join(LANGS), "---|" * len(LANGS)))
    for s in [None] + list(settings):
        L, W = lo[s].mean(0), va[s].mean(0)
        by = [np.mean([va[s][i][0] for i, q in enumerate(V) if q["lang"] == l]) for l in LANGS]
        print("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |" % (
            (name(s), L[0], L[2], L[3], W[0], W[1], W[2], W[3]) + (" | ".join("%.3f" % b for b in by),)))
    rng = np.random.default_rng(13)
    print("\n| MRR difference | LORO mean [95% interval] | validation mean [95% interval] |\n|---|---|---|")
    for s in settings:
        print("| %s - global | %+.3f [%+.3f, %+.3f] | %+.3f [%+.3f, %+.3f] |" % (
            (s,) + ci(lo[s][:, 0], lo[None][:, 0], rng) + ci(va[s][:, 0], va[None][:, 0], rng)))
    print("\nleave-repository-out MRR by training repository (mined tasks in brackets)")
    cnt = collections.Counter(q["repo"] for q in mined)
    print("| repository | tasks | %s |\n|---|---|%s" % (" | ".join(name(s) for s in [None] + list(settings)), "---|" * (1 + len(settings))))
    for r in sorted({q["repo"] for q in T}):
        ix = [i for i, q in enumerate(T) if q["repo"] == r]
        print("| %s (%d) | %d | %s |" % (r, cnt[r], len(ix), " | ".join("%.3f" % lo[s][ix, 0].mean() for s in [None] + list(settings))))
    print("\nvalidation MRR by repository")
    print("| repository | tasks | %s |\n|---|---|%s" % (" | ".join(name(s) for s in [None] + list(settings)), "---|" * (1 + len(settings))))
    for r in sorted({q["repo"] for q in V}):
        ix = [i for i, q in enumerate(V) if q["repo"] == r]
        print("| %s | %d | %s |" % (r, len(ix), " | ".join("%.3f" % va[s][ix, 0].mean() for s in [None] + list(settings))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["grid", "score", "corpus"])
    ap.add_argument("train")
    ap.add_argument("mined")
    ap.add_argument("val", nargs="?")
    ap.add_argument("--settings", help="settings to score, separated by ';'")
    ap.add_argument("--config", help="read only the dump lines of this eval configuration")
    ap.add_argument("--each", help="the mined tasks file of mine-tasks.py --before --each: a delta per corpus task, "
                    "fitted on the mined tasks strictly older than its own base commit")
    a = ap.parse_args()
    tr.CONFIG = a.config
    if a.each:
        global EACH
        EACH = collections.defaultdict(set)
        with open(a.each) as f:
            for line in f:
                t = json.loads(line)
                for tid in t.get("before", []):
                    EACH[tid].add(t["id"])
    T, M = load(a.train), load(a.mined)
    if a.cmd == "grid":
        cmd_grid(T, M)
        return
    if a.cmd == "corpus":
        cmd_corpus(T)
        return
    if not a.val or not a.settings:
        sys.exit("adapt-rank.py: score needs VAL.jsonl and --settings")
    cmd_score(T, load(a.val), M, a.settings.split(";"))


if __name__ == "__main__":
    main()
