"""Mine retrieval tasks from merged pull requests, in the format of
codectx eval (one JSON object per line: id, repo, base_commit, merge_commit,
query, gold_files, language).

A simplified, stdlib-only version of the dev set's miner, for a second,
independent check of retrieval changes on other repositories:

  python3 scripts/mine-tasks.py --per-repo 9 --out tasks.jsonl \
      owner/name=LANG=GIT_DIR ...

LANG is python, go, javascript, typescript, java or rust. It walks the
first-parent history for PR merges ("Merge pull request #N", or a squash
subject ending in "(#N)"), takes the first parent as the base, keeps
modified (M) non-test source files of the language as gold (1 to 6), strips
code, URLs, issue numbers, mentions, hashes, file names and trailers from
the query, drops trivial titles and queries of fewer than 6 words, and picks
evenly spaced tasks over the candidates.
"""
import argparse, subprocess, re, json, sys
EXTS = {'python': ['.py'], 'go': ['.go'], 'javascript': ['.js', '.mjs', '.cjs'],
        'typescript': ['.ts', '.tsx'], 'java': ['.java'], 'rust': ['.rs']}
ap = argparse.ArgumentParser()
ap.add_argument('--per-repo', type=int, default=9)
ap.add_argument('--out', required=True)
ap.add_argument('repos', nargs='+', help='owner/name=LANG=GIT_DIR')
args = ap.parse_args()
repos = {}
for spec in args.repos:
    name, lang, gd = spec.split('=', 2)
    repos[name] = (lang, EXTS[lang], gd)
def git(gd, *a):
    return subprocess.run(['git','--git-dir',gd]+list(a),capture_output=True,text=True).stdout
def excluded(p, lang):
    l=p.lower(); parts=l.split('/')
    if any(x.startswith('test') or x in ('__tests__','benches','fuzz','examples','example','docs','doc','bin','node_modules','dist','build','vendor','.github','scripts') for x in parts[:-1]): return True
    b=parts[-1]
    if re.search(r'(\.test\.|\.spec\.|_test\.go$|^test_|_test\.py$|^conftest|tests\.rs$|_test\.rs$|\.d\.ts$|build\.rs$|config\.)', b): return True
    return False
trivial=re.compile(r'\b(typo|bump|lint|release|changelog|readme|docs?|version|prettier|eslint|clippy|rustfmt|format|ci|deps?|dependabot)\b', re.I)
def clean(q):
    q=re.sub(r'```.*?```','',q,flags=re.S)
    q=re.sub(r'`[^`]*`','',q)
    q=re.sub(r'https?://\S+','',q)
    q=re.sub(r'\(?#\d+\)?','',q)
    q=re.sub(r'@\w+','',q)
    q=re.sub(r'\b[0-9a-f]{7,40}\b','',q)
    q=re.sub(r'\S+\.(rs|py|go|js|ts|mjs|cjs|tsx|md)\b','',q)
    lines=[l for l in q.splitlines() if not re.match(r'\s*(signed-off-by|co-authored-by|reviewed-by|- \[.?\])',l,re.I)]
    return re.sub(r'[ \t]+',' ','\n'.join(lines)).strip()
out=[]
for repo,(lang,exts,gd) in repos.items():
    log=git(gd,'log','--first-parent','--format=%H%x00%P%x00%s%x00%b%x1e','HEAD')
    cands=[]
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
        if trivial.search(title): continue
        base=ps[0]
        diff=git(gd,'diff','--name-status',base,h)
        gold=[]; ok=True
        for line in diff.splitlines():
            st,*paths=line.split('\t')
            p=paths[-1]
            if not any(p.endswith(e) for e in exts) or excluded(p,lang): continue
            if st!='M': continue
            gold.append(p)
        if not (1<=len(gold)<=6): continue
        q=clean(title+'\n'+rest)
        if len(re.findall(r'[A-Za-z]{2,}',q))<6: continue
        cands.append({'id':repo.replace('/','__')+'-'+h[:8],'repo':repo,'base_commit':base,'merge_commit':h,'query':q,'gold_files':gold,'language':lang})
    # evenly spaced 9 among candidates (newest first list)
    n=len(cands); k=min(args.per_repo,n)
    pick=[cands[int(i*n/k)] for i in range(k)] if k else []
    print(repo,n,'candidates,',len(pick),'picked',file=sys.stderr)
    out+=pick
with open(args.out,'w') as f:
    for t in out: f.write(json.dumps(t)+'\n')
