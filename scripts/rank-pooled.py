#!/usr/bin/env python3
"""Eighth-round experiments on the learned file ranker (issue 13), with
more training repositories pooled in (bench/diverse.json, mined with
scripts/mine-tasks.py). Needs numpy and scripts/train-rank.py beside it;
"trees" also needs lightgbm. Inputs are `codectx eval --rank-only
--features` dumps; TRAIN may name several, joined by commas, and
leave-repository-out then runs over all their repositories.

  scripts/rank-pooled.py trees TRAIN.jsonl[,MORE.jsonl] VAL.jsonl
      LambdaMART and XE-NDCG trees (LightGBM) on the shipped model's 36
      features, reranking the top 20: leave-repository-out over TRAIN's
      repositories, then fitted on all of TRAIN and scored on VAL.
  scripts/rank-pooled.py adapt TRAIN.jsonl[,MORE.jsonl] [W]
      an upper bound of adapting the model to one repository: each task
      of a held-out repository ranked by a model fitted on the other
      repositories plus the other tasks of its own (repeated W times,
      default 3), beside the plain leave-repository-out model. The other
      tasks include later PRs, so the bound is generous.

Metrics are over the dumped candidates (train-rank.py's): MRR, R@1, R@5,
R@10.
"""
import importlib.util
import os
import sys

import numpy as np

_spec = importlib.util.spec_from_file_location("train_rank", os.path.join(os.path.dirname(os.path.abspath(__file__)), "train-rank.py"))
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)

FEATS = tr.feature_set("first")  # the shipped model's 36 features
DEPTH = 20
METRICS = "MRR %.3f R@1 %.3f R@5 %.3f R@10 %.3f"


def load(arg):
    paths = arg.split(",")
    qs = tr.load(paths)
    return qs, tr.ngold_of(qs, tr.gold_lists(paths))


def evaluate(qs, ngold, predict):
    """Mean metrics of reranking each query's top DEPTH files by predict."""
    out = []
    for q, ng in zip(qs, ngold):
        y = q["y"]
        top = min(DEPTH, len(y))
        if top == 0:
            out.append((0, 0, 0, 0))
            continue
        s = predict(tr.columns(q["X"][:top], q["names"], FEATS))
        ranked = y[np.concatenate([np.argsort(-s, kind="stable"), np.arange(top, len(y))])]
        hits = np.flatnonzero(ranked)
        out.append((1 / (hits[0] + 1) if len(hits) else 0, ranked[:1].sum() / ng, ranked[:5].sum() / ng, ranked[:10].sum() / ng))
    return np.array(out).mean(0)


def fit_trees(qs, p):
    import lightgbm as lgb
    Xs, ys, groups = [], [], []
    for q in qs:
        y = q["y"][:DEPTH]
        if y.any() and len(y) > 1:
            Xs.append(tr.columns(q["X"][:DEPTH], q["names"], FEATS))
            ys.append(y.astype(int))
            groups.append(len(y))
    prm = dict(objective=p.get("obj", "lambdarank"), num_leaves=p["leaves"], learning_rate=p["lr"],
               min_data_in_leaf=p.get("min_leaf", 20), bagging_fraction=0.8, bagging_freq=1, feature_fraction=0.8,
               lambda_l2=1.0, lambdarank_truncation_level=DEPTH, label_gain=[0, 1], seed=1, num_threads=2, verbose=-1)
    m = lgb.train(prm, lgb.Dataset(np.vstack(Xs), np.concatenate(ys), group=groups), num_boost_round=p["trees"])
    return m.predict


def cmd_trees(train_arg, val_arg):
    T, tng = load(train_arg)
    V, vng = load(val_arg)
    repos = sorted({q["repo"] for q in T})
    for p in [dict(trees=100, leaves=4, lr=0.05), dict(trees=300, leaves=4, lr=0.03),
              dict(trees=200, leaves=8, lr=0.03, min_leaf=40), dict(trees=300, leaves=4, lr=0.03, obj="rank_xendcg"),
              dict(trees=500, leaves=3, lr=0.02, min_leaf=50)]:
        per = np.zeros(4)
        for r in repos:
            tr_qs = [q for q in T if q["repo"] != r]
            te = [(q, n) for q, n in zip(T, tng) if q["repo"] == r]
            per += evaluate([q for q, _ in te], [n for _, n in te], fit_trees(tr_qs, p)) * len(te)
        va = evaluate(V, vng, fit_trees(T, p))
        print(p, "LORO " + METRICS % tuple(per / len(T)), "| validation " + METRICS % tuple(va), flush=True)


def cmd_adapt(train_arg, w):
    Q, ng = load(train_arg)
    plain = np.zeros((len(Q), 4))
    adapted = np.zeros((len(Q), 4))
    for r in sorted({q["repo"] for q in Q}):
        others = [q for q in Q if q["repo"] != r]
        te = [i for i, q in enumerate(Q) if q["repo"] == r]
        m0 = tr.fit(tr.select(others, FEATS, DEPTH), 0.001)
        plain[te] = tr.rerank_eval([Q[i] for i in te], FEATS, DEPTH, m0, [ng[i] for i in te])
        for i in te:
            own = [Q[j] for j in te if j != i] * w
            m1 = tr.fit(tr.select(others + own, FEATS, DEPTH), 0.001)
            adapted[i] = tr.rerank_eval([Q[i]], FEATS, DEPTH, m1, [ng[i]])[0]
    print("plain leave-repository-out: " + METRICS % tuple(plain.mean(0)))
    print("adapted (own tasks x%d):     " % w + METRICS % tuple(adapted.mean(0)))


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("trees", "adapt"):
        sys.exit(__doc__)
    if sys.argv[1] == "trees":
        if len(sys.argv) != 4:
            sys.exit("rank-pooled.py trees TRAIN.jsonl[,MORE.jsonl] VAL.jsonl")
        cmd_trees(sys.argv[2], sys.argv[3])
    else:
        cmd_adapt(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)


if __name__ == "__main__":
    main()
