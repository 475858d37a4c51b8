#!/usr/bin/env python3
"""Tune codectx's fusion weights with leave-one-repository-out validation.

Two steps, stdlib only:

  scripts/tune-weights.py grid > grid.json
      writes a grid of eval configurations (multipliers of the built-in
      per-trigger weights, query.Request.Scale) for `codectx eval --configs`.

  codectx eval --configs grid.json --tasks T.jsonl --git-dir ... --json A.json
  (once per task set)

  scripts/tune-weights.py cv A.json [B.json ...]
      pools the tasks of the reports and, for each repository, picks the
      configuration with the best MRR on the other repositories' tasks and
      scores it on this repository's. The mean over all tasks is the
      held-out MRR of tuning; beside it are the built-in weights (the
      configuration whose multipliers are all 1) and the best configuration
      in-sample (which is optimistic by construction).
"""
import itertools
import json
import sys

# Each knob scales the rankings named by it; values are multipliers.
KNOBS = {
    "symbol": (["symbol"], [0.25, 0.5, 1, 2]),
    "graph": (["graph", "graph-index"], [0.25, 0.5, 1, 2]),
    "history": (["history"], [0, 1, 2, 4]),
    "bm25-file": (["bm25-file"], [0.5, 1, 2]),
    "bm25-path": (["bm25-path"], [0.5, 1, 2]),
}


def name_of(values):
    return " ".join("%s=%g" % (k, v) for k, v in zip(KNOBS, values))


def grid():
    out = []
    for values in itertools.product(*(vs for _, vs in KNOBS.values())):
        scale = {}
        for (lists, _), v in zip(KNOBS.values(), values):
            for l in lists:
                if v != 1:
                    scale[l] = v
        out.append({"name": name_of(values), "route": True, "scale": scale})
    json.dump(out, sys.stdout, indent=1)
    print()


def load(paths):
    """Returns {config: {task: result}} pooled over the reports."""
    pooled = {}
    for p in paths:
        with open(p) as f:
            rep = json.load(f)
        for cfg, results in rep["tasks"].items():
            if cfg.startswith("baseline"):
                continue
            d = pooled.setdefault(cfg, {})
            for r in results:
                d[r["task"]] = r
    return pooled


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def distance(cfg):
    """How far a configuration is from the built-in weights (ties prefer near)."""
    d = 0.0
    for part in cfg.split():
        _, v = part.split("=")
        d += abs(float(v) - 1)
    return d


def cv(paths):
    pooled = load(paths)
    default = name_of([1] * len(KNOBS))
    if default not in pooled:
        sys.exit("tune-weights: no configuration with all multipliers 1 in the reports")
    tasks = pooled[default]
    repos = sorted({r["repo"] for r in tasks.values()})
    cfgs = sorted(pooled, key=lambda c: (distance(c), c))
    held = {}  # task -> result under its fold's choice
    print("| held-out repository | tasks | chosen on the others | MRR built-in | MRR chosen |")
    print("|---|---|---|---|---|")
    for repo in repos:
        train = [t for t, r in tasks.items() if r["repo"] != repo]
        test = [t for t, r in tasks.items() if r["repo"] == repo]
        best = max(cfgs, key=lambda c: mean([pooled[c][t]["mrr"] for t in train]))
        for t in test:
            held[t] = pooled[best][t]
        print("| %s | %d | %s | %.3f | %.3f |" % (
            repo, len(test), best,
            mean([tasks[t]["mrr"] for t in test]),
            mean([held[t]["mrr"] for t in test])))
    allt = sorted(tasks)
    best_in = max(cfgs, key=lambda c: mean([pooled[c][t]["mrr"] for t in allt]))
    print()
    print("| weights | MRR | R@1 | R@5 |")
    print("|---|---|---|---|")
    for label, res in (
        ("built-in", [tasks[t] for t in allt]),
        ("tuned, held-out (leave one repository out)", [held[t] for t in allt]),
        ("best in-sample: " + best_in, [pooled[best_in][t] for t in allt]),
    ):
        print("| %s | %.3f | %.3f | %.3f |" % (
            label, mean([r["mrr"] for r in res]), mean([r["r1"] for r in res]),
            mean([r["r5"] for r in res])))
    langs = sorted({r["language"] for r in tasks.values()})
    print()
    print("| language | built-in | held-out tuned |")
    print("|---|---|---|")
    for l in langs:
        ts = [t for t in allt if tasks[t]["language"] == l]
        print("| %s | %.3f | %.3f |" % (l, mean([tasks[t]["mrr"] for t in ts]), mean([held[t]["mrr"] for t in ts])))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "grid":
        grid()
    elif len(sys.argv) >= 3 and sys.argv[1] == "cv":
        cv(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
