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
"""
import argparse, subprocess, re, json, sys
EXTS = {'python': ['.py'], 'go': ['.go'], 'javascript': ['.js', '.mjs', '.cjs'],
        'typescript': ['.ts', '.tsx'], 'java': ['.java'], 'rust': ['.rs']}
ap = argparse.ArgumentParser()
ap.add_argument('--per-repo', type=int, default=9)
ap.add_argument('--out', required=True)
ap.add_argument('--exclude', action='append', default=[], help='task files whose PRs (merge commits) are not mined again')
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
out=[]
for repo,(lang,exts,gd,rev) in repos.items():
    log=git(gd,'log','--first-parent','--format=%H%x00%P%x00%s%x00%b%x1e',rev)
    cands=[]; skipped=0
    for rec in log.split('\x1e'):
        rec=rec.strip('\n')
        if not rec: continue
        h,parents,subj,body=rec.split('\x00')
        ps=parents.split()
        if not ps: continue
        m=re.match(r'Merge pull request #(\d+)',subj)
        if m:
            bl=[l for l in body.strip().splitlines() if l.strip()]
            if not bl: continue
            title=bl[0]; rest='\n'.join(bl[1:])
        elif re.search(r'\(#\d+\)\s*$',subj):
            title=subj; rest=body
        else: continue
        if trivial.search(title) or h in seen_merges: continue
        base=ps[0]
        diff=git(gd,'diff','--name-status',base,h,must=False)
        if diff is None:
            skipped+=1
            continue
        gold=[]; ok=True
        for line in diff.splitlines():
            st,*paths=line.split('\t')
            p=paths[-1]
            if not any(p.endswith(e) for e in exts) or excluded(p,lang): continue
            if st!='M': continue
            gold.append(p)
        if not (1<=len(gold)<=6): continue
        if comment_only(gd,base,h,gold,lang): continue
        q=clean(title+'\n'+rest, lang)
        if len(re.findall(r'[A-Za-z]{2,}',q))<6: continue
        cands.append({'id':repo.replace('/','__')+'-'+h[:8],'repo':repo,'base_commit':base,'merge_commit':h,'query':q,'gold_files':gold,'language':lang})
    # evenly spaced 9 among candidates (newest first list)
    n=len(cands); k=min(args.per_repo,n)
    pick=[cands[int(i*n/k)] for i in range(k)] if k else []
    print(repo,n,'candidates,',len(pick),'picked',('(%d PRs skipped: commits missing)'%skipped if skipped else ''),file=sys.stderr)
    out+=pick
with open(args.out,'w') as f:
    for t in out: f.write(json.dumps(t)+'\n')
