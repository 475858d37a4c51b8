#!/usr/bin/env python3
"""Twelfth-round experiments on the learned file ranker (issue 13): learned
query-term weights. The queries are PR titles and bodies, and many of their
words name nothing in the code. A small model predicts, from features of a
term that need no tuning to a repository (query.TermFeatureNames: idf,
title or body, code-like shape, position, whether paths or symbols of the
snapshot hold it, how it spreads over the first stage's top files), a
weight in (0, 2) per query term; the query's whole-file BM25 is then
re-scored over the dumped candidates with those weights (the dump holds
each term's BM25 score in each candidate, so the sum of a file's term
scores is its whole-file score), and the re-weighted ranking's rank and
score become features of the reranker (tw_*).

Needs numpy and scripts/train-rank.py beside it. Inputs are `codectx eval
--rank-only --features` dumps made by a codectx that writes "terms".

Term models (TM):
  rank   the weights are fitted to the ranking itself: the listwise softmax
         loss of the re-weighted whole-file score over the dumped candidates
         (the first gold file on top), through w_t = 2 sigmoid(theta . z_t),
         z_t the standardised term features, L2 on theta; theta = 0 is the
         plain whole-file BM25. rank20: over the top 20 candidates only.
  rankc  the same over the candidates' chunks (a chunk of a gold file is
         gold), scored by the chunk query's terms.
  label  logistic regression of a per-term label: 1 when the share of the
         task's gold files (among the candidates) holding the term is above
         the share of the other top-20 candidates holding it; w_t = 2 p_t.
  resid, residc
         fitted in the reranker's context: the shipped setting's score of
         the reranked files plus a learned scale times the re-weighted
         whole-file (resid) or best-chunk (residc) score.

No term model sees the repository it is scored on: in leave-one-repository-
out, the held-out repository's terms are weighted by a model fitted on the
other 17, and each of those 17 repositories' terms (the reranker's training
data) by a model fitted on the 16 others (nested); for validation, the
validation terms by a model fitted on all 18, the training terms by the
17-repository models.

  scripts/term-weights.py terms TRAIN.jsonl [VAL.jsonl]
      the term model alone: MRR/R@k of the dumped candidates ordered by the
      re-weighted whole-file BM25 and by the re-weighted best chunk,
      against the plain ones (LORO on TRAIN; VAL
      scored by the model fitted on all of TRAIN), and the term model's
      weights.
  scripts/term-weights.py grid TRAIN.jsonl
      leave-one-repository-out of the reranker with each tw_* feature set
      added to the shipped setting, paired bootstrap against the shipped.
  scripts/term-weights.py score TRAIN.jsonl VAL.jsonl --settings 'FS,L2,TM;...'
      the given settings (fixed beforehand) and the shipped one: LORO and
      validation (candidate-set metrics), MRR by language, the new
      features' weights, paired bootstrap intervals on both sets.

Every command takes --kinds (the term models to try), --term-l2 and
--beta (the term model's L2 and softmax sharpness) and
--drop-term-features (term features left out; "candidates" for the five
read from the first stage's top files). With TW_PER_REPO=1 in the
environment, score also prints validation MRR by repository.

Feature sets are train-rank.py's syntax, with the groups "tw" (tw_rr,
tw_rel: the re-weighted whole-file BM25's rank and relative score among
the dumped candidates), "twt" (tw_title_rr, tw_title_rel: the same over
the title's file-name terms), "twg" (tw_gain: tw_rel minus the plain
relative score), "twc" (tw_chunk_rr, tw_chunk_rel, tw_chunk_n: the
re-weighted chunk BM25: the file's best chunk's rank and relative score,
log1p of its chunks among the top 200), and the plain controls "pl"
(pl_rr) and "plc" (pl_chunk_*). Metrics are over the dumped candidates
(train-rank.py's).
"""
import argparse
import importlib.util
import json
import os
import sys

import numpy as np

spec = importlib.util.spec_from_file_location("tr", os.path.join(os.path.dirname(os.path.abspath(__file__)), "train-rank.py"))
tr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tr)

TW = ["tw_rr", "tw_rel", "tw_title_rr", "tw_title_rel", "tw_gain", "pl_rr",
      "tw_chunk_rr", "tw_chunk_rel", "tw_chunk_n", "pl_chunk_rr", "pl_chunk_rel", "pl_chunk_n"]
tr.GROUPS["twc"] = ["tw_chunk_rr", "tw_chunk_rel", "tw_chunk_n"]
tr.GROUPS["plc"] = ["pl_chunk_rr", "pl_chunk_rel", "pl_chunk_n"]
tr.GROUPS["tw"] = ["tw_rr", "tw_rel"]
tr.GROUPS["twt"] = ["tw_title_rr", "tw_title_rel"]
tr.GROUPS["twg"] = ["tw_gain"]
tr.GROUPS["pl"] = ["pl_rr"]
SHIPPED = ("first", 0.001, "rank")
DEPTH = 20
BETA = 10.0  # softmax sharpness of the relative re-weighted score (0..1)


CANDIDATE_TERM_FEATURES = ["top20_share", "top100_share", "top_lift", "top1", "top_spread"]



class Adam:
    """Adam's step on th in place (the moments of train-rank.py's fit)."""

    def __init__(self, th, lr):
        self.th, self.lr = th, lr
        self.m1, self.m2 = np.zeros_like(th), np.zeros_like(th)

    def step(self, g, it):
        self.m1 = 0.9 * self.m1 + 0.1 * g
        self.m2 = 0.999 * self.m2 + 0.001 * g * g
        self.th -= self.lr * (self.m1 / (1 - 0.9 ** it)) / (np.sqrt(self.m2 / (1 - 0.999 ** it)) + 1e-8)

def load_terms(path, drop=()):
    """Per task (in dump order): term features (T x F), the sparse
    candidate x term whole-file score matrix (whole-file query terms only),
    and the chunk view: each candidate chunk's file and the sparse chunk x
    term score matrix at the chunk query's weights."""
    out = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            t = d.get("terms") or {}
            names = t.get("names", [])
            X = np.array(t.get("x") or [], dtype=float).reshape(-1, len(names)) if names else np.zeros((0, 0))
            drop = [f for d in drop for f in (CANDIDATE_TERM_FEATURES if d == "candidates" else [d])]
            if drop and names:
                keep = [i for i, n in enumerate(names) if n not in drop]
                X, names = X[:, keep], [names[i] for i in keep]
            fq = t.get("file_q") or [True] * len(X)
            cw = t.get("chunk_w") or [0.0] * len(X)
            rows, cols, vals = [], [], []
            for j, hits in enumerate(t.get("hits") or []):
                if not fq[j]:
                    continue
                for i, v in hits:
                    rows.append(int(i))
                    cols.append(j)
                    vals.append(v)
            local, cfile, cr, cc, cv = {}, [], [], [], []
            for j, hits in enumerate(t.get("chunk_hits") or []):
                for i, c, v in hits or []:
                    k = local.get(int(c))
                    if k is None:
                        k = local[int(c)] = len(cfile)
                        cfile.append(int(i))
                    cr.append(k)
                    cc.append(j)
                    cv.append(v * cw[j])
            out.append({"task": d["task"], "tnames": names, "terms": t.get("terms") or [], "phi": X,
                        "fq": np.array(fq, dtype=bool),
                        "r": np.array(rows, dtype=int), "c": np.array(cols, dtype=int), "v": np.array(vals, dtype=float),
                        "cfile": np.array(cfile, dtype=int), "cr": np.array(cr, dtype=int), "cc": np.array(cc, dtype=int),
                        "cv": np.array(cv, dtype=float)})
    return out


class Batch:
    """Tasks' terms and candidates concatenated, for vectorised fitting."""

    def __init__(self, qs, ts, idx, depth=None, offsets=None, chunks=False):
        """Units are the dumped files (the first depth), or with chunks the
        candidates' chunks (gold: a chunk of a gold file)."""
        if chunks:
            idx = [i for i in idx if len(ts[i]["cfile"]) > 1]
        self.idx = [i for i in idx if len(ts[i]["phi"]) and len(qs[i]["y"]) > 1]
        fo = to = 0
        phis, R, C, V, Y, starts, tq, O, FQ = [], [], [], [], [], [], [], [], []
        for i in self.idx:
            q, t = qs[i], ts[i]
            if chunks:
                n, r, c, v, y = len(t["cfile"]), t["cr"], t["cc"], t["cv"], q["y"][t["cfile"]]
            else:
                n = len(q["y"]) if depth is None else min(depth, len(q["y"]))
                r, c, v, y = t["r"], t["c"], t["v"], q["y"][:n]
            keep = r < n
            starts.append(fo)
            phis.append(t["phi"])
            FQ.append(t["fq"] if not chunks else np.ones(len(t["phi"]), bool))
            R.append(r[keep] + fo)
            C.append(c[keep] + to)
            V.append(v[keep])
            Y.append(y)
            O.append(offsets[i][:n] if offsets is not None else np.zeros(n))
            tq.append(np.full(len(t["phi"]), len(starts) - 1))
            fo += n
            to += len(t["phi"])
        self.phi = np.vstack(phis) if phis else np.zeros((0, 0))
        self.r, self.c, self.v = np.concatenate(R), np.concatenate(C), np.concatenate(V)
        self.y = np.concatenate(Y)
        self.off = np.concatenate(O)
        self.fq = np.concatenate(FQ)
        self.starts = np.array(starts)
        self.nfiles = fo
        self.qof = np.repeat(np.arange(len(starts)), np.diff(np.append(self.starts, fo)))
        self.tq = np.concatenate(tq)
        plain = np.bincount(self.r, weights=self.v, minlength=fo)
        top = np.maximum.reduceat(plain, self.starts)
        self.norm = np.where(top > 0, top, 1.0)[self.qof]  # per file: its task's top plain score
        hasgold = np.add.reduceat(self.y.astype(float), self.starts) > 0
        self.train = hasgold[self.qof]  # files of tasks with a gold candidate


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def fit_rank(b, l2, iters=300, lr=0.05):
    """theta of w_t = 2 sigmoid(theta . z_t): listwise softmax loss of the
    re-weighted relative whole-file score over the dumped candidates."""
    mean, scale = b.phi.mean(0), b.phi.std(0)
    scale[scale < 1e-6] = 1
    Z = np.hstack([(b.phi - mean) / scale, np.ones((len(b.phi), 1))])
    th = np.zeros(Z.shape[1])
    opt = Adam(th, lr)
    nq = max(1, int((np.add.reduceat(b.y.astype(float), b.starts) > 0).sum()))
    for it in range(1, iters + 1):
        sg = sigmoid(Z @ th)
        w = 2 * sg
        s = BETA * np.bincount(b.r, weights=b.v * w[b.c], minlength=b.nfiles) / b.norm
        s = s - np.maximum.reduceat(s, b.starts)[b.qof]
        e = np.exp(s)
        p = e / np.add.reduceat(e, b.starts)[b.qof]
        eg = e * b.y
        sg_ = np.add.reduceat(eg, b.starts)[b.qof]
        pg = np.where(sg_ > 0, eg / np.where(sg_ > 0, sg_, 1), 0)
        gs = np.where(b.train, p - pg, 0) * BETA / b.norm  # d loss / d raw score, per file
        gw = np.bincount(b.c, weights=gs[b.r] * b.v, minlength=len(w))  # per term
        g = Z.T @ (gw * 2 * sg * (1 - sg)) / nq
        g[:-1] += l2 * th[:-1]
        opt.step(g, it)
    return mean, scale, th


def fit_resid(b, l2, iters=300, lr=0.05):
    """theta of w_t = 2 sigmoid(theta . z_t) and a scale g, fitted to the
    listwise softmax loss of the reranked files (b's depth) scored by the
    shipped reranker (b.off) plus g times the re-weighted relative
    whole-file score: the term weights that add most to what the reranker
    already knows."""
    mean, scale = b.phi.mean(0), b.phi.std(0)
    scale[scale < 1e-6] = 1
    Z = np.hstack([(b.phi - mean) / scale, np.ones((len(b.phi), 1))])
    th = np.zeros(Z.shape[1] + 1)  # last: the scale g
    th[-1] = 1.0
    opt = Adam(th, lr)
    nq = max(1, int((np.add.reduceat(b.y.astype(float), b.starts) > 0).sum()))
    for it in range(1, iters + 1):
        sg = sigmoid(Z @ th[:-1])
        w = 2 * sg
        u = np.bincount(b.r, weights=b.v * w[b.c], minlength=b.nfiles) / b.norm
        s = b.off + th[-1] * u
        s = s - np.maximum.reduceat(s, b.starts)[b.qof]
        e = np.exp(s)
        p = e / np.add.reduceat(e, b.starts)[b.qof]
        eg = e * b.y
        sg_ = np.add.reduceat(eg, b.starts)[b.qof]
        pg = np.where(sg_ > 0, eg / np.where(sg_ > 0, sg_, 1), 0)
        gs = np.where(b.train, p - pg, 0)
        g = np.zeros_like(th)
        gw = np.bincount(b.c, weights=(gs * th[-1] / b.norm)[b.r] * b.v, minlength=len(w))
        g[:-1] = Z.T @ (gw * 2 * sg * (1 - sg)) / nq
        g[-1] = (gs * u).sum() / nq
        g[:-2] += l2 * th[:-2]
        opt.step(g, it)
    return mean, scale, th[:-1]


def fit_resid_chunk(qs, ts, idx, off, l2, iters=300, lr=0.05):
    """fit_resid with the best chunk: the reranked files (DEPTH) scored by
    the shipped reranker (off) plus g times their best chunk's re-weighted
    chunk BM25 score over the task's best plain chunk score; the gradient
    goes through each file's best chunk under the current weights."""
    idx = [i for i in idx if len(ts[i]["phi"]) and len(ts[i]["cfile"]) and len(qs[i]["y"]) > 1]
    phis, CR, CC, CV, CF, Y, O, starts, norm = [], [], [], [], [], [], [], [], []
    fo = to = co = 0
    for i in idx:
        q, t = qs[i], ts[i]
        n = min(DEPTH, len(q["y"]))
        keep = t["cfile"][t["cr"]] < n
        plain = np.bincount(t["cr"], weights=t["cv"], minlength=len(t["cfile"]))
        starts.append(fo)
        phis.append(t["phi"])
        CR.append(t["cr"][keep] + co)
        CC.append(t["cc"][keep] + to)
        CV.append(t["cv"][keep])
        CF.append(t["cfile"] + fo)
        Y.append(q["y"][:n])
        O.append(off[i][:n])
        norm.append(np.full(n, plain.max() if plain.max() > 0 else 1.0))
        fo += n
        to += len(t["phi"])
        co += len(t["cfile"])
    phi = np.vstack(phis)
    cr, cc, cv, cf = np.concatenate(CR), np.concatenate(CC), np.concatenate(CV), np.concatenate(CF)
    y, o, nrm, starts = np.concatenate(Y), np.concatenate(O), np.concatenate(norm), np.array(starts)
    qof = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, fo)))
    train = (np.add.reduceat(y.astype(float), starts) > 0)[qof]
    nq = max(1, int(train[starts].sum()))
    mean, scale = phi.mean(0), phi.std(0)
    scale[scale < 1e-6] = 1
    Z = np.hstack([(phi - mean) / scale, np.ones((len(phi), 1))])
    th = np.zeros(Z.shape[1] + 1)
    th[-1] = 1.0
    opt = Adam(th, lr)
    # The chunks with hits of the reranked files, grouped by file.
    has = np.zeros(co, bool)
    has[cr] = True
    perm = np.flatnonzero(has)
    perm = perm[np.argsort(cf[perm], kind="stable")]
    pf = cf[perm]
    seg = np.flatnonzero(np.r_[True, pf[1:] != pf[:-1]])
    segf = pf[seg]
    segof = np.repeat(np.arange(len(seg)), np.diff(np.append(seg, len(perm))))
    for it in range(1, iters + 1):
        sg = sigmoid(Z @ th[:-1])
        w = 2 * sg
        cs = np.bincount(cr, weights=cv * w[cc], minlength=co)
        cp = cs[perm]
        fmax = np.maximum.reduceat(cp, seg)
        isbest = np.zeros(co, bool)
        isbest[perm[cp >= fmax[segof]]] = True
        u = np.zeros(len(y))
        u[segf] = fmax
        u = u / nrm
        s = o + th[-1] * u
        s = s - np.maximum.reduceat(s, starts)[qof]
        e = np.exp(s)
        p = e / np.add.reduceat(e, starts)[qof]
        eg = e * y
        sg_ = np.add.reduceat(eg, starts)[qof]
        pg = np.where(sg_ > 0, eg / np.where(sg_ > 0, sg_, 1), 0)
        gs = np.where(train, p - pg, 0)
        hb = isbest[cr]
        gfile = gs * th[-1] / nrm
        gw = np.bincount(cc[hb], weights=gfile[cf[cr[hb]]] * cv[hb], minlength=len(w))
        g = np.zeros_like(th)
        g[:-1] = Z.T @ (gw * 2 * sg * (1 - sg)) / nq
        g[-1] = (gs * u).sum() / nq
        g[:-2] += l2 * th[:-2]
        opt.step(g, it)
    return mean, scale, th[:-1]


def term_labels(b):
    """1 when the share of the task's gold candidates holding the term is
    above the share of its other top-20 candidates holding it."""
    lab = np.zeros(len(b.phi))
    local = np.arange(b.nfiles) - b.starts[b.qof]
    held = b.v > 0
    gold = b.y[b.r] & held
    other = (~b.y[b.r]) & (local[b.r] < 20) & held
    ng = np.add.reduceat(b.y.astype(float), b.starts)
    no = np.add.reduceat(((~b.y) & (local < 20)).astype(float), b.starts)
    gs = np.bincount(b.c, weights=gold, minlength=len(lab)) / np.maximum(ng[b.tq], 1)
    os_ = np.bincount(b.c, weights=other, minlength=len(lab)) / np.maximum(no[b.tq], 1)
    lab = (gs > os_).astype(float)
    keep = (ng[b.tq] > 0) & b.fq
    return lab, keep


def fit_label(b, l2, iters=300, lr=0.05):
    mean, scale = b.phi.mean(0), b.phi.std(0)
    scale[scale < 1e-6] = 1
    Z = np.hstack([(b.phi - mean) / scale, np.ones((len(b.phi), 1))])
    lab, keep = term_labels(b)
    Z, lab = Z[keep], lab[keep]
    th = np.zeros(Z.shape[1])
    opt = Adam(th, lr)
    for it in range(1, iters + 1):
        p = sigmoid(Z @ th)
        g = Z.T @ (p - lab) / len(lab)
        g[:-1] += l2 * th[:-1]
        opt.step(g, it)
    return mean, scale, th


TERM_L2 = 0.01


def fit_terms(qs, ts, idx, kind):
    if kind in ("resid", "residc"):
        feats = tr.feature_set(SHIPPED[0])
        model = tr.fit(tr.select([qs[i] for i in idx], feats, DEPTH), SHIPPED[1])
        mean, scale, w, clip = model
        off = {i: tr.standardize(tr.columns(qs[i]["X"], qs[i]["names"], feats), mean, scale, clip) @ w for i in idx}
        if kind == "residc":
            return fit_resid_chunk(qs, ts, idx, off, TERM_L2)
        return fit_resid(Batch(qs, ts, idx, depth=DEPTH, offsets=off), TERM_L2)
    if kind == "rankc":
        return fit_rank(Batch(qs, ts, idx, chunks=True), TERM_L2)
    if kind == "rank20":
        return fit_rank(Batch(qs, ts, idx, depth=DEPTH), TERM_L2)
    b = Batch(qs, ts, idx)
    return (fit_rank if kind == "rank" else fit_label)(b, TERM_L2)


def weights(t, model):
    mean, scale, th = model
    if not len(t["phi"]):
        return np.zeros(0)
    Z = np.hstack([(t["phi"] - mean) / scale, np.ones((len(t["phi"]), 1))])
    return 2 * sigmoid(Z @ th)


def rr_of(s):
    """10/(10+rank) of each candidate by s (ties in RRF order), 0 for score 0."""
    order = np.argsort(-s, kind="stable")
    rank = np.empty(len(s))
    rank[order] = np.arange(1, len(s) + 1)
    return np.where(s > 0, 10 / (10 + rank), 0.0)


def tw_features(q, t, w):
    """The tw_* features of a task's candidates under term weights w."""
    n = len(q["y"])
    F = np.zeros((n, len(TW)))
    if not len(w):
        return F
    plain = np.bincount(t["r"], weights=t["v"], minlength=n)
    s = np.bincount(t["r"], weights=t["v"] * w[t["c"]], minlength=n)
    name = t["phi"][:, t["tnames"].index("name_term")] > 0 if "name_term" in t["tnames"] else np.ones(len(w), bool)
    st = np.bincount(t["r"], weights=t["v"] * w[t["c"]] * name[t["c"]], minlength=n)
    F[:, 0] = rr_of(s)
    F[:, 1] = s / s.max() if s.max() > 0 else 0
    F[:, 2] = rr_of(st)
    F[:, 3] = st / st.max() if st.max() > 0 else 0
    F[:, 4] = F[:, 1] - (plain / plain.max() if plain.max() > 0 else 0)
    F[:, 5] = rr_of(plain)
    if len(t["cfile"]):
        F[:, 6:9] = chunk_features(t, w, n)
        F[:, 9:12] = chunk_features(t, np.ones(len(w)), n)
    return F


def chunk_features(t, w, n, top=200):
    """Per candidate: 10/(10+rank) by its best chunk's re-weighted chunk
    BM25 score, that score over the best chunk's, and log1p(its chunks
    among the top 200 candidate chunks)."""
    cs = np.bincount(t["cr"], weights=t["cv"] * w[t["cc"]], minlength=len(t["cfile"]))
    best = np.zeros(n)
    np.maximum.at(best, t["cfile"], cs)
    out = np.zeros((n, 3))
    out[:, 0] = rr_of(best)
    out[:, 1] = best / best.max() if best.max() > 0 else 0
    order = np.argsort(-cs, kind="stable")[:top]
    order = order[cs[order] > 0]
    out[:, 2] = np.log1p(np.bincount(t["cfile"][order], minlength=n))
    return out


def with_tw(q, F):
    q = dict(q)
    q["X"] = np.hstack([q["X"], F])
    q["names"] = list(q["names"]) + TW
    return q


def reps(qs):
    return sorted({q["repo"] for q in qs})


class TermFolds:
    """The term models of one kind: per left-out repository set, cached."""

    def __init__(self, qs, ts, kind):
        self.qs, self.ts, self.kind, self.cache = qs, ts, kind, {}

    def model(self, out):
        key = tuple(sorted(out))
        if key not in self.cache:
            idx = [i for i, q in enumerate(self.qs) if q["repo"] not in out]
            self.cache[key] = fit_terms(self.qs, self.ts, idx, self.kind)
        return self.cache[key]

    def train_feats(self, out):
        """tw features of every training task not in out, each by a model
        fitted without its own repository and out (nested)."""
        res = {}
        for r in reps(self.qs):
            if r in out:
                continue
            m = self.model(set(out) | {r})
            for i, q in enumerate(self.qs):
                if q["repo"] == r:
                    res[i] = tw_features(q, self.ts[i], weights(self.ts[i], m))
        return res


def loro(qs, ts, ng, fs, l2, folds):
    feats = tr.feature_set(fs)
    per = np.zeros((len(qs), 4))
    uses = any(f in TW for f in feats)
    for r in reps(qs):
        te = [i for i, q in enumerate(qs) if q["repo"] == r]
        if uses:
            tf = folds.train_feats({r})
            trn = [with_tw(qs[i], tf[i]) for i in tf]
            m = folds.model({r})
            tst = [with_tw(qs[i], tw_features(qs[i], ts[i], weights(ts[i], m))) for i in te]
        else:
            trn = [q for q in qs if q["repo"] != r]
            tst = [qs[i] for i in te]
        model = tr.fit(tr.select(trn, feats, DEPTH), l2)
        per[te] = tr.rerank_eval(tst, feats, DEPTH, model, [ng[i] for i in te])
    return per


def validate(qs, ts, ng, vq, vts, vng, fs, l2, folds):
    feats = tr.feature_set(fs)
    if any(f in TW for f in feats):
        tf = folds.train_feats(set())
        trn = [with_tw(qs[i], tf[i]) for i in sorted(tf)]
        m = folds.model(set())
        tst = [with_tw(q, tw_features(q, t, weights(t, m))) for q, t in zip(vq, vts)]
    else:
        trn, tst = qs, vq
    model = tr.fit(tr.select(trn, feats, DEPTH), l2)
    return tr.rerank_eval(tst, feats, DEPTH, model, vng), model, feats


def boot(a, b, n=2000, seed=13):
    rng = np.random.default_rng(seed)
    d = np.asarray(a) - np.asarray(b)
    idx = rng.integers(0, len(d), (n, len(d)))
    m = d[idx].mean(1)
    return d.mean(), np.percentile(m, 2.5), np.percentile(m, 97.5)


def order_metrics(q, s):
    """MRR, R@1, R@5, R@10 of ordering a task's candidates by s alone (ties in RRF order)."""
    y, ng = q["y"], q["ng"]
    ranked = y[np.argsort(-s, kind="stable")]
    hits = np.flatnonzero(ranked)
    mrr = 1.0 / (hits[0] + 1) if len(hits) else 0.0
    return mrr, ranked[:1].sum() / ng, ranked[:5].sum() / ng, ranked[:10].sum() / ng


def file_score(q, t, w):
    return np.bincount(t["r"], weights=t["v"] * w[t["c"]], minlength=len(q["y"])) if len(w) else np.zeros(len(q["y"]))


def chunk_score(q, t, w):
    """Each candidate's best chunk score under term weights w."""
    best = np.zeros(len(q["y"]))
    if len(w) and len(t["cfile"]):
        cs = np.bincount(t["cr"], weights=t["cv"] * w[t["cc"]], minlength=len(t["cfile"]))
        np.maximum.at(best, t["cfile"], cs)
    return best


def terms_cmd(qs, ts, vq, vts, kinds):
    """The re-weighted whole-file and best-chunk orders of the dumped
    candidates against the plain ones (term weights 1)."""
    print("| ranking of the dumped candidates | term model | set | MRR | R@1 | R@5 | R@10 | MRR difference [95%] |\n|---|---|---|---|---|---|---|---|")
    sets = [("LORO-18", qs, ts)] + ([("validation", vq, vts)] if vq else [])
    for what, score in (("whole-file BM25", file_score), ("best chunk BM25", chunk_score)):
        plain = {}
        for name, q_, t_ in sets:
            plain[name] = np.array([order_metrics(q, score(q, t, np.ones(len(t["phi"])))) for q, t in zip(q_, t_)])
            print("| %s, plain | | %s | %.3f | %.3f | %.3f | %.3f | |" % ((what, name) + tuple(plain[name].mean(0))))
        for kind in kinds:
            folds = TermFolds(qs, ts, kind)
            for name, q_, t_ in sets:
                if name == "LORO-18":
                    m = np.array([order_metrics(q, score(q, t, weights(t, folds.model({q["repo"]})))) for q, t in zip(q_, t_)])
                else:
                    full = folds.model(set())
                    m = np.array([order_metrics(q, score(q, t, weights(t, full))) for q, t in zip(q_, t_)])
                print("| %s, re-weighted | %s | %s | %.3f | %.3f | %.3f | %.3f | %+.3f [%+.3f, %+.3f] |" % (
                    (what, kind, name) + tuple(m.mean(0)) + boot(m[:, 0], plain[name][:, 0])))
    for kind in kinds:
        m = TermFolds(qs, ts, kind).model(set())
        mean, scale, th = m
        names = ts[0]["tnames"]
        print("term model %s (fitted on all training tasks), weights in standard deviations:" % kind)
        print("  " + ", ".join("%s %+.2f" % (n, x) for n, x in sorted(zip(names + ["bias"], th), key=lambda p: -abs(p[1]))))
        ws = np.concatenate([weights(t, m) for t in ts if len(t["phi"])])
        print("  term weights on the training tasks: mean %.2f, quartiles %.2f %.2f %.2f" % ((ws.mean(),) + tuple(np.percentile(ws, [25, 50, 75]))))


GRID_SETS = ["first+pl", "first+tw", "first+tw_rr", "first+twt", "first+tw+twt", "first+tw+twg", "first+tw~file_bm25_rel", "first+twt~title_rr"]


def parse(s):
    out = []
    for part in s.split(";"):
        fs, l2, kind = part.split(",")
        out.append((fs, float(l2), kind))
    return out


def main():
    global TERM_L2, BETA
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["terms", "grid", "score"])
    ap.add_argument("train")
    ap.add_argument("val", nargs="?")
    ap.add_argument("--settings")
    ap.add_argument("--sets", help="grid: these feature sets (';'-separated) instead of the default grid's")
    ap.add_argument("--kinds", default="rank,label")
    ap.add_argument("--l2", default="0.001,0.01")
    ap.add_argument("--term-l2", type=float, default=0.01, help="L2 of the term model")
    ap.add_argument("--drop-term-features", help="term features left out of the term model (comma-separated; "
                    "'candidates' for the five read from the first stage's top files)")
    ap.add_argument("--beta", type=float, default=10.0, help="softmax sharpness of the rank term model")
    a = ap.parse_args()
    TERM_L2, BETA = a.term_l2, a.beta
    drop = [f for f in (a.drop_term_features or "").split(",") if f]
    qs, ts = tr.load([a.train]), load_terms(a.train, drop)
    ng = tr.ngold_of(qs, tr.gold_lists([a.train]))
    for q, n in zip(qs, ng):
        q["ng"] = n
    vq = vts = vng = None
    if a.val:
        vq, vts = tr.load([a.val]), load_terms(a.val, drop)
        vng = tr.ngold_of(vq, tr.gold_lists([a.val]))
        for q, n in zip(vq, vng):
            q["ng"] = n
    kinds = a.kinds.split(",")
    if a.cmd == "terms":
        terms_cmd(qs, ts, vq, vts, kinds)
        return
    folds = {k: TermFolds(qs, ts, k) for k in kinds}
    base = loro(qs, ts, ng, SHIPPED[0], SHIPPED[1], None)
    fmt = "| %s | %s | %g | %.3f | %.3f | %.3f | %.3f | %.3f | %+.3f [%+.3f, %+.3f] |"
    if a.cmd == "grid":
        print("| features | term model | L2 | LORO MRR | R@1 | R@5 | R@10 | objective | MRR difference [95%] |\n|---|---|---|---|---|---|---|---|---|")
        m = base.mean(0)
        print(fmt % (("first (shipped)", "", SHIPPED[1]) + tuple(m) + (m[0] + m[2] + m[3], 0, 0, 0)), flush=True)
        for kind in kinds:
            for fs in (a.sets.split(";") if a.sets else GRID_SETS):
                for l2 in map(float, a.l2.split(",")):
                    per = loro(qs, ts, ng, fs, l2, folds[kind])
                    m = per.mean(0)
                    print(fmt % ((fs, kind, l2) + tuple(m) + (m[0] + m[2] + m[3],) + boot(per[:, 0], base[:, 0])), flush=True)
        return
    langs = sorted({q["lang"] for q in vq})
    rows, diffs = [], []
    vbase = None
    for fs, l2, kind in [SHIPPED] + parse(a.settings):
        shipped = (fs, l2) == SHIPPED[:2]
        fo = folds.get(kind) or TermFolds(qs, ts, kind)
        per = base if shipped else loro(qs, ts, ng, fs, l2, fo)
        v, model, feats = validate(qs, ts, ng, vq, vts, vng, fs, l2, fo)
        if vbase is None:
            vbase = v
        lm, vm = per.mean(0), v.mean(0)
        bylang = [v[[i for i, q in enumerate(vq) if q["lang"] == g], 0].mean() for g in langs]
        w = ", ".join("%s %+.2f" % (f, x) for f, x in zip(feats, model[2]) if f in TW or "~" in fs)
        label = fs if shipped else "%s, %s" % (fs, kind)
        rows.append("| %s, L2 %g | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %s |" % (
            (label, l2, lm[0], lm[2], lm[3], vm[0], vm[1], vm[2], vm[3], " | ".join("%.3f" % x for x in bylang), w)))
        if not shipped:
            diffs.append("| %s, L2 %g - shipped | %+.3f [%+.3f, %+.3f] | %+.3f [%+.3f, %+.3f] |" % (
                (label, l2) + boot(per[:, 0], base[:, 0]) + boot(v[:, 0], vbase[:, 0])))
        if a.val and os.environ.get("TW_PER_REPO"):
            for r in sorted({q["repo"] for q in vq}):
                ix = [i for i, q in enumerate(vq) if q["repo"] == r]
                print("  %s %s %.3f (shipped %.3f)" % (label, r, v[ix, 0].mean(), vbase[ix, 0].mean()))
    print("| model | LORO-18 MRR | R@5 | R@10 | validation MRR | R@1 | R@5 | R@10 | %s | weights |" % " | ".join(langs))
    print("|---|---|---|---|---|---|---|---|%s---|" % ("---|" * len(langs)))
    print("\n".join(rows))
    print("\n| MRR difference | LORO mean [95% interval] | validation mean [95% interval] |\n|---|---|---|")
    print("\n".join(diffs))


if __name__ == "__main__":
    sys.exit(main())
