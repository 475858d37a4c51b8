"""Mine retrieval tasks from merged pull requests, in the format of
codectx eval (one JSON object per line: id, repo, base_commit, merge_commit,
query, gold_files, language).

A simplified, stdlib-only version of the dev set's miner, for a second,
independent check of retrieval changes on other repositories:

  python3 scripts/mine-tasks.py --per-repo 9 --out tasks.jsonl \
      [--exclude CORPUS.jsonl ...] owner/name=LANG=GIT_DIR[=REV] ...

  python3 scripts/mine-tasks.py --per-repo 40 --out mined.jsonl \
      --exclude CORPUS.jsonl --list bench/mined.json --mirrors DIR
      mines the repositories and revisions of a committed list (see
      docs/benchmarks.md, "Fourth round"); DIR/OWNER+NAME/repo is each
      one's git directory.

LANG is python, go, javascript, typescript, java or rust; REV (default
HEAD) is the commit whose history is mined, so a run can be repeated. It walks the
first-parent history for PR merges ("Merge pull request #N", or a squash
subject ending in "(#N)"), takes the first parent as the base, keeps
modified (M) non-test source files of the language as gold (1 to 6), strips
code, URLs, issue numbers, mentions, hashes, file names and trailers from
the query, drops trivial titles and queries of fewer than 6 words, and picks
evenly spaced tasks over the candidates.

As the corpus's miner does, it also strips HTML comments (PR templates),
Java package paths and dependabot link lists from the query, counts
FooTest.java, FooIT.java, *.test-d.ts and package-info.java as not source,
and skips changes whose gold files differ only in comments and whitespace.
--exclude drops the PRs of the given task files (by merge commit), so
tasks mined in addition never repeat the corpus's.

--before TASKS.jsonl mines, for each repository given, only the history
strictly older than its tasks in TASKS: the walk starts at the first
parent of the earliest (by commit date) base commit of the repository's
tasks there (REV is then not given), and those tasks' PRs are excluded.
That is a repository's own past as a deployment would see it at the
first snapshot, for tasks that adapt a ranker to one repository
(scripts/adapt-rank.py). --pick newest takes the newest N candidates
instead of N evenly spaced ones. --before TASKS.jsonl --each takes
instead, for each task of TASKS, the newest N candidates strictly older
than that task's own base commit (first parent on); each mined task
lists in "before" the tasks it was mined for.
"""
import argparse, subprocess, re, json, sys
EXTS = {'python': ['.py'], 'go': ['.go'], 'javascript': ['.js', '.mjs', '.cjs'],
        'typescript': ['.ts', '.tsx'], 'java': ['.java'], 'rust': ['.rs']}
ap = argparse.ArgumentParser()
ap.add_argument('--per-repo', type=int, default=9)
ap.add_argument('--out', required=True)
ap.add_argument('--exclude', action='append', default=[], help='task files whose PRs (merge commits) are not mined again')
ap.add_argument('--before', help='task file: mine each repository only before the earliest base commit of its tasks there')
ap.add_argument('--each', action='store_true', help='with --before: the newest N candidates before each task\'s own base commit')
ap.add_argument('--pick', choices=['spread', 'newest'], default='spread', help='evenly spaced candidates (default) or the newest')
ap.add_argument('--list', help='JSON list of {repo, language, rev} to mine (with --mirrors)')
ap.add_argument('--mirrors', help='directory of OWNER+NAME/repo git directories, for --list')
ap.add_argument('repos', nargs='*', help='owner/name=LANG=GIT_DIR[=REV]')
args = ap.parse_args()
repos = {}
for spec in args.repos:
    name, lang, gd, *rev = spec.split('=', 3)
    repos[name] = (lang, EXTS[lang], gd, rev[0] if rev else 'HEAD')
if args.list:
    if not args.mirrors:
        sys.exit('mine-tasks.py: --list needs --mirrors')
    with open(args.list) as f:
        for r in json.load(f)['repos']:
            repos[r['repo']] = (r['language'], EXTS[r['language']], '%s/%s/repo' % (args.mirrors, r['repo'].replace('/', '+')), r['rev'])
if not repos:
    sys.exit('mine-tasks.py: no repositories given')
seen_merges = set()
for p in args.exclude:
    with open(p) as f:
        for line in f:
            if line.strip():
                seen_merges.add(json.loads(line)['merge_commit'])
before = {}
before_tasks = {}
if args.before:
    with open(args.before) as f:
        for line in f:
            if line.strip():
                t = json.loads(line)
                before.setdefault(t['repo'], []).append(t['base_commit'])
                before_tasks.setdefault(t['repo'], []).append((t['id'], t['base_commit']))
                seen_merges.add(t['merge_commit'])
def git(gd, *a, must=True):
    """git's output; None when it fails and must is False (a commit missing
    from a partial mirror skips that PR), else the run stops."""
    r = subprocess.run(['git','--git-dir',gd]+list(a),capture_output=True,text=True)
    if r.returncode != 0:
        if not must:
            return None
        sys.exit('mine-tasks.py: git %s: %s' % (' '.join(a[:2]), r.stderr.strip()))
    return r.stdout
def excluded(p, lang):
    l=p.lower(); parts=l.split('/')
    if any(x.startswith('test') or x in ('__tests__','benches','fuzz','examples','example','docs','doc','bin','node_modules','dist','build','vendor','.github','scripts') for x in parts[:-1]): return True
    b=parts[-1]
    if re.search(r'(\.test\.|\.spec\.|\.test-d\.ts$|_test\.go$|^test_|_test\.py$|^conftest|tests\.rs$|_test\.rs$|\.d\.ts$|build\.rs$|config\.)', b): return True
    if lang == 'java' and (re.search(r'(Tests?|IT)\.java$', p.split('/')[-1]) or b == 'package-info.java'): return True
    return False
COMMENT = {'python': ('#',), 'go': ('//', '/*', '*'), 'javascript': ('//', '/*', '*'), 'typescript': ('//', '/*', '*'),
           'java': ('//', '/*', '*'), 'rust': ('//', '/*', '*')}
def comment_only(gd, base, h, gold, lang):
    """The gold files' changes touch only comments and whitespace (a Python
    docstring line counts as code: telling it apart needs a parser)."""
    diff = git(gd, 'diff', '-U0', '-w', base, h, '--', *gold, must=False)
    if diff is None:
        return True
    for line in diff.splitlines():
        if line.startswith(('+++', '---')) or not line.startswith(('+', '-')):
            continue
        t = line[1:].strip()
        if t and not t.startswith(COMMENT[lang]):
            return False
    return True
trivial=re.compile(r'\b(typo|bump|lint|release|changelog|readme|docs?|version|prettier|eslint|clippy|rustfmt|format|ci|deps?|dependabot)\b', re.I)
def clean(q, lang):
    q=re.sub(r'<!--.*?-->','',q,flags=re.S)
    q=re.sub(r'(?m)^\s*[-*] \[(Release notes|Changelog|Commits)\]\(.*$','',q)
    q=re.sub(r'```.*?```','',q,flags=re.S)
    q=re.sub(r'`[^`]*`','',q)
    q=re.sub(r'https?://\S+','',q)
    q=re.sub(r'\(?#\d+\)?','',q)
    q=re.sub(r'@\w+','',q)
    q=re.sub(r'\b[0-9a-f]{7,40}\b','',q)
    q=re.sub(r'\S+\.(rs|py|go|js|ts|mjs|cjs|tsx|md|java)\b','',q)
    if lang == 'java':
        q=re.sub(r'\b[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*){2,}(\.[A-Z]\w*)*\b','',q)
    lines=[l for l in q.splitlines() if not re.match(r'\s*(signed-off-by|co-authored-by|reviewed-by|- \[.?\])',l,re.I)]
    return re.sub(r'[ \t]+',' ','\n'.join(lines)).strip()
def start(gd, bases):
    """The first parent of the earliest (by commit date) of bases: history
    strictly older than every task of the repository."""
    dated = sorted((int(git(gd, 'log', '-1', '--format=%ct', b).strip()), b) for b in bases)
    parents = git(gd, 'log', '-1', '--format=%P', dated[0][1]).split()
    return parents[0] if parents else None
LOGFMT='--format=%H%x00%P%x00%s%x00%b%x1e'
memo={}
def candidate(repo, lang, exts, gd, rec):
    """The task of one first-parent log record (a PR merge), or None;
    'skip' when its commits are missing from the mirror."""
    h,parents,subj,body=rec.split('\x00')
    if h in memo: return memo[h]
    memo[h]=task=_candidate(repo, lang, exts, gd, h, parents, subj, body)
    return task
def _candidate(repo, lang, exts, gd, h, parents, subj, body):
    ps=parents.split()
    if not ps: return None
    m=re.match(r'Merge pull request #(\d+)',subj)
    if m:
        bl=[l for l in body.strip().splitlines() if l.strip()]
        if not bl: return None
        title=bl[0]; rest='\n'.join(bl[1:])
    elif re.search(r'\(#\d+\)\s*$',subj):
        title=subj; rest=body
    else: return None
    if trivial.search(title) or h in seen_merges: return None
    base=ps[0]
    diff=git(gd,'diff','--name-status',base,h,must=False)
    if diff is None:
        return 'skip'
    gold=[]
    for line in diff.splitlines():
        st,*paths=line.split('\t')
        p=paths[-1]
        if not any(p.endswith(e) for e in exts) or excluded(p,lang): continue
        if st!='M': continue
        gold.append(p)
    if not (1<=len(gold)<=6): return None
    if comment_only(gd,base,h,gold,lang): return None
    q=clean(title+'\n'+rest, lang)
    if len(re.findall(r'[A-Za-z]{2,}',q))<6: return None
    return {'id':repo.replace('/','__')+'-'+h[:8],'repo':repo,'base_commit':base,'merge_commit':h,'query':q,'gold_files':gold,'language':lang}
def records(gd, rev):
    for rec in git(gd,'log','--first-parent',LOGFMT,rev).split('\x1e'):
        rec=rec.strip('\n')
        if rec: yield rec
out=[]
for repo,(lang,exts,gd,rev) in repos.items():
    if args.before and args.each:
        # The newest N candidates strictly before each task's own base
        # commit; a mined task lists the tasks it is among the newest N
        # for ("before"), the union is written newest first.
        if repo not in before_tasks:
            sys.exit('mine-tasks.py: %s has no task in %s' % (repo, args.before))
        union={}
        for tid, b in before_tasks[repo]:
            parents = git(gd, 'log', '-1', '--format=%P', b).split()
            if not parents: continue
            got=0
            for rec in records(gd, parents[0]):
                t=candidate(repo, lang, exts, gd, rec)
                if not t or t == 'skip': continue
                union.setdefault(t['merge_commit'], dict(t, before=[]))['before'].append(tid)
                got+=1
                if got>=args.per_repo: break
        pick=sorted(union.values(), key=lambda t: -int(git(gd,'log','-1','--format=%ct',t['merge_commit']).strip()))
        print(repo,len(pick),'picked for',len(before_tasks[repo]),'tasks',file=sys.stderr)
        out+=pick
        continue
    if args.before:
        if repo not in before:
            sys.exit('mine-tasks.py: %s has no task in %s' % (repo, args.before))
        rev = start(gd, before[repo])
        if rev is None:
            print(repo, 'no history before its first task', file=sys.stderr)
            continue
    cands=[]; skipped=0
    for rec in records(gd, rev):
        t=candidate(repo, lang, exts, gd, rec)
        if t == 'skip': skipped+=1
        elif t: cands.append(t)
    # evenly spaced (or the newest) among candidates (newest first list)
    n=len(cands); k=min(args.per_repo,n)
    if args.pick == 'newest':
        pick=cands[:k]
    else:
        pick=[cands[int(i*n/k)] for i in range(k)] if k else []
    print(repo,n,'candidates,',len(pick),'picked',('(%d PRs skipped: commits missing)'%skipped if skipped else ''),file=sys.stderr)
    out+=pick
with open(args.out,'w') as f:
    for t in out: f.write(json.dumps(t)+'\n')
