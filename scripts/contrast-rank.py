#!/usr/bin/env python3
"""Eleventh-round experiments on the learned file ranker (issue 13): the
sibling-contrast features (sib_*, top_distinct: a file against the other
top files of its directory and the top file) and the pseudo-relevance
feedback features (prf_*: the rank in a whole-file BM25 of the query
expanded by the words of its top k files), added to the shipped setting.
Needs numpy and scripts/train-rank.py beside it. Inputs are `codectx eval
--rank-only --features` dumps.

  scripts/contrast-rank.py grid TRAIN.jsonl
      leave-one-repository-out over the training repositories only: every
      feature set and L2 of the grid, with the paired bootstrap of the
      MRR difference against the shipped setting.
  scripts/contrast-rank.py score TRAIN.jsonl VAL.jsonl --settings 'FS,L2;FS,L2'
      the given settings (fixed beforehand) and the shipped one: LORO and
      validation figures (the model fitted on all of TRAIN), MRR by
      language, the fitted weights of the new features, and paired
      bootstrap intervals of the MRR difference on both sets.

Feature sets are train-rank.py's syntax (first+GROUP+feature~feature),
with the groups "sibling" and "prf" (k 3, m 10) and "prfK_M" added.
Metrics are over the dumped candidates (train-rank.py's).
"""
import argparse
import importlib.util
import os
import sys

import numpy as np

spec = importlib.util.spec_from_file_location("tr", os.path.join(os.path.dirname(os.path.abspath(__file__)), "train-rank.py"))
tr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tr)

SIBLING = ["sib_n", "sib_title", "sib_file", "sib_distinct", "top_distinct"]
tr.GROUPS["sibling"] = SIBLING
tr.GROUPS["prf"] = ["prf_rr", "prf_rel"]
for k, m in ((3, 20), (5, 10), (5, 20)):
    tr.GROUPS["prf%d_%d" % (k, m)] = ["prf_rr_%d_%d" % (k, m), "prf_rel_%d_%d" % (k, m)]
NEW = set(SIBLING) | {f for g in ("prf", "prf3_20", "prf5_10", "prf5_20") for f in tr.GROUPS[g]}

SHIPPED = ("first", 0.001)
DEPTH = 20


def loro(qs, ng, fs, l2):
    """Per-task metrics (MRR, R@1, R@5, R@10), each repository scored by a
    model fitted on the others."""
    feats = tr.feature_set(fs)
    per = np.zeros((len(qs), 4))
    for r in sorted({q["repo"] for q in qs}):
        trn = [q for q in qs if q["repo"] != r]
        te = [i for i, q in enumerate(qs) if q["repo"] == r]
        model = tr.fit(tr.select(trn, feats, DEPTH), l2)
        per[te] = tr.rerank_eval([qs[i] for i in te], feats, DEPTH, model, [ng[i] for i in te])
    return per


def boot(a, b, n=2000, seed=13):
    """Mean of a - b and its 95% interval, resampling tasks."""
    rng = np.random.default_rng(seed)
    d = np.asarray(a) - np.asarray(b)
    idx = rng.integers(0, len(d), (n, len(d)))
    m = d[idx].mean(1)
    return d.mean(), np.percentile(m, 2.5), np.percentile(m, 97.5)


def parse(s):
    out = []
    for part in s.split(";"):
        fs, l2 = part.rsplit(",", 1)
        out.append((fs, float(l2)))
    return out


GRID_SETS = (["first+sibling", "first+sib_title+sib_file", "first+sib_distinct+top_distinct", "first+sib_title+sib_distinct",
              "first+sibling~sib_n"] +
             ["first+%s" % g for g in ("prf", "prf3_20", "prf5_10", "prf5_20")] +
             ["first+prf_rr", "first+prf_rr_5_20", "first+sibling+prf", "first+sibling+prf5_20"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["grid", "score"])
    ap.add_argument("train")
    ap.add_argument("val", nargs="?")
    ap.add_argument("--settings")
    ap.add_argument("--l2", default="0.001,0.01")
    a = ap.parse_args()
    qs = tr.load([a.train])
    ng = tr.ngold_of(qs, tr.gold_lists([a.train]))
    base = loro(qs, ng, *SHIPPED)
    fmt = "| %s | %g | %.3f | %.3f | %.3f | %.3f | %.3f | %+.3f [%+.3f, %+.3f] |"
    if a.cmd == "grid":
        print("| features | L2 | LORO MRR | R@1 | R@5 | R@10 | objective | MRR difference [95%] |\n|---|---|---|---|---|---|---|---|")
        m = base.mean(0)
        print(fmt % ((SHIPPED[0] + " (shipped)", SHIPPED[1]) + tuple(m) + (m[0] + m[2] + m[3], 0, 0, 0)), flush=True)
        for fs in GRID_SETS:
            for l2 in map(float, a.l2.split(",")):
                per = loro(qs, ng, fs, l2)
                m = per.mean(0)
                print(fmt % ((fs, l2) + tuple(m) + (m[0] + m[2] + m[3],) + boot(per[:, 0], base[:, 0])), flush=True)
        return
    vq = tr.load([a.val])
    vng = tr.ngold_of(vq, tr.gold_lists([a.val]))
    langs = sorted({q["lang"] for q in vq})
    rows, diffs = [], []
    vbase = None
    for fs, l2 in [SHIPPED] + parse(a.settings):
        per = base if (fs, l2) == SHIPPED else loro(qs, ng, fs, l2)
        feats = tr.feature_set(fs)
        model = tr.fit(tr.select(qs, feats, DEPTH), l2)
        v = tr.rerank_eval(vq, feats, DEPTH, model, vng)
        if vbase is None:
            vbase = v
        lm, vm = per.mean(0), v.mean(0)
        bylang = [v[[i for i, q in enumerate(vq) if q["lang"] == g], 0].mean() for g in langs]
        w = ", ".join("%s %+.2f" % (f, x) for f, x in zip(feats, model[2]) if f in NEW)
        rows.append("| %s, L2 %g | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %s |" % (
            (fs, l2, lm[0], lm[2], vm[0], vm[1], vm[2], vm[3], " | ".join("%.3f" % x for x in bylang), w)))
        if (fs, l2) != SHIPPED:
            diffs.append("| %s, L2 %g - shipped | %+.3f [%+.3f, %+.3f] | %+.3f [%+.3f, %+.3f] |" % (
                (fs, l2) + boot(per[:, 0], base[:, 0]) + boot(v[:, 0], vbase[:, 0])))
    print("| model | LORO-18 MRR | R@5 | validation MRR | R@1 | R@5 | R@10 | %s | weights |" % " | ".join(langs))
    print("|---|---|---|---|---|---|---|%s---|" % ("---|" * len(langs)))
    print("\n".join(rows))
    print("\n| MRR difference | LORO mean [95% interval] | validation mean [95% interval] |\n|---|---|---|")
    print("\n".join(diffs))


if __name__ == "__main__":
    sys.exit(main())
