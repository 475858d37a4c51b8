#!/usr/bin/env python3
"""The scope of a pull request's title as a ranking feature (issue 13,
seventh round), computed offline and appended to `codectx eval --features`
dumps, so that scripts/train-rank.py can fit it (`first+scope_path`).

Many titles name the part of the code they change before a colon, in the
conventional-commit form `type(scope): ...` ("fix(redis): ...",
"feat(binding): ...") or as a bare `scope: ...` ("websocket: ...",
"mock: ..."; a change type such as "fix:" or "chore:" is not a scope).
Per candidate file:

  scope_path  1 if a scope, lower-cased with "-", "_" and "." dropped,
              is the file's stem or one of its directory names; 0.5 if it
              is part of one ("cloudflare" in cloudflare-kv-binding.ts);
              0 otherwise, and 0 for every file when the title has none
  has_scope   1 when the title has a scope (constant within a query: only
              useful in a product)

  scripts/scope-features.py --tasks TASKS.jsonl DUMP.jsonl OUT.jsonl
  scripts/scope-features.py --selftest
"""
import argparse
import json
import posixpath
import re
import sys

TYPES = {"fix", "fixes", "fixed", "feat", "feature", "features", "chore", "docs", "doc", "refactor", "perf", "test", "tests",
         "build", "ci", "style", "revert", "breaking", "bug", "bugfix", "hotfix", "improvement", "deps", "release", "wip",
         "note", "update", "add", "remove", "security", "types", "typo", "example", "examples", "misc", "cleanup", "merge"}


def norm(s):
    return re.sub(r"[-_.\s]", "", s.lower())


def scopes(title):
    """The scope words of a title: ["redis"] for "fix(redis): ...",
    ["websocket"] for "websocket: ...", [] for "fix: ..." or none."""
    m = re.match(r"^\W*\w+\(([^)]+)\)!?:", title)
    if m:
        raw = m.group(1)
    else:
        m = re.match(r"^\W*([\w./-]+):\s", title)
        if not m or m.group(1).lower() in TYPES:
            return []
        raw = m.group(1)
    out = []
    for part in re.split(r"[,/\s]+", raw):
        n = norm(part)
        if len(n) >= 2 and n not in TYPES:
            out.append(n)
    return out


def scope_path(path, sc):
    if not sc:
        return 0.0
    parts = path.split("/")
    stem = parts[-1].split(".")[0]
    comps = [norm(stem)] + [norm(p) for p in parts[:-1]]
    comps = [c for c in comps if c]
    best = 0.0
    for s in sc:
        if s in comps:
            return 1.0
        if any(s in c or (len(c) >= 3 and c in s) for c in comps):
            best = 0.5
    return best


def selftest():
    assert scopes("fix(redis): fix reference") == ["redis"]
    assert scopes("⚡ perf(ctx): restore") == ["ctx"]
    assert scopes("websocket: Add warning") == ["websocket"]
    assert scopes("fix: something") == []
    assert scopes("refactor(cloudflare-kv, cloudflare-r2): move") == ["cloudflarekv", "cloudflarer2"]
    assert scopes("Add a pad option") == []
    assert scope_path("src/drivers/redis.ts", ["redis"]) == 1.0
    assert scope_path("src/drivers/cloudflare-kv-binding.ts", ["cloudflare"]) == 0.5
    assert scope_path("binding/form_mapping.go", ["binding"]) == 1.0
    assert scope_path("context.go", ["binding"]) == 0.0
    assert scope_path("src/pluggy/_callers.py", ["callers"]) == 1.0
    print("ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks")
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("dump", nargs="?")
    ap.add_argument("out", nargs="?")
    a = ap.parse_args()
    if a.selftest:
        selftest()
        return
    titles = {}
    for line in open(a.tasks):
        t = json.loads(line)
        titles[t["id"]] = t["query"].split("\n")[0]
    n = withs = 0
    with open(a.dump) as f, open(a.out, "w") as w:
        for line in f:
            d = json.loads(line)
            sc = scopes(titles[d["task"]])
            n += 1
            withs += bool(sc)
            d["names"] = d["names"] + ["scope_path", "has_scope"]
            for c in d["files"]:
                c["x"] = c["x"] + [scope_path(c["path"], sc), 1.0 if sc else 0.0]
            w.write(json.dumps(d) + "\n")
    print("%d tasks, %d with a scope" % (n, withs), file=sys.stderr)


if __name__ == "__main__":
    main()
