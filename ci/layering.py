#!/usr/bin/env python3
"""layering.py: the folder map of DESIGN.md, checked on the sources and on a build.

    python3 ci/layering.py SOURCE_DIR [BUILD_DIR]

On the sources (runtime/, backends/, harness/, suites/, reports/):
  - an include of another folder's header names that folder's face header,
    never a private one, and never by a relative path ("../x/y.h");
  - it follows an allowed dependency (the same list harness/CMakeLists.txt
    links, and DESIGN.md states);
  - no loop of includes between files;
  - runtime/ names no backend.
On BUILD_DIR's object files: no loop of calls between files (an edge a -> b
when a uses a symbol b defines).
Prints each violation; exits 1 when there is one, 0 otherwise.
"""
import collections
import glob
import os
import re
import subprocess
import sys

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else '.')
BUILD = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None

# folder -> (face headers, folders it may include from). "runtime" is
# runtime/include/gt (the public headers); runtime/src is private to it.
H = 'harness/'
RULES = {
    'runtime': ({'*gt/'}, set()),
    'runtime/src': (set(), {'runtime'}),
    'backends/reference': (set(), {'runtime'}),
    'backends/cpu': ({'cpu_blas.h', 'cpu_limits.h'}, {'runtime'}),
    'backends/opencl': (set(), {'runtime'}),
    'backends/cuda': (set(), {'runtime'}),
    H + 'base': ({'base.h'}, {'runtime'}),
    H + 'net': ({'net.h'}, {'runtime', H + 'base'}),
    H + 'opcheck': ({'opcheck.h'}, {'runtime'}),
    'suites': ({'suite.h'}, {'runtime', H + 'base', H + 'net'}),
    H + 'matrix': ({'matrix.h'}, {'runtime', H + 'base', H + 'net', 'suites'}),
    H + 'store': ({'store.h'}, {'runtime', H + 'base', H + 'matrix'}),
    'reports': ({'report.h'}, {'runtime', H + 'store', H + 'base'}),
    H + 'compare': ({'compare.h'}, {'runtime', H + 'opcheck', 'reports', H + 'base'}),
    H + 'serve': ({'serve.h'}, {'runtime', H + 'base'}),
    H + 'bench': ({'bench.h'}, {'runtime', H + 'base', 'backends/cpu'}),
    H + 'run': ({'run.h'}, {'runtime', H + 'matrix', H + 'store', 'suites', H + 'net',
                            H + 'compare', H + 'base'}),
    H + 'cli': ({'commands.h'}, {'runtime', H + 'base', H + 'net', H + 'opcheck', 'suites',
                                 H + 'matrix', H + 'store', 'reports', H + 'compare', H + 'serve',
                                 H + 'bench', H + 'run'}),
}
# The faces reach each other through these (a face including a face).
BACKEND_NAMES = ('reference', 'cpu', 'opencl', 'cuda')

problems = []


def folder_of(rel):
    d = os.path.dirname(rel)
    if d == 'runtime/include/gt':
        return 'runtime'
    return d


files = {}  # rel path -> folder
for pat in ('runtime/src/*.[ch]', 'runtime/include/gt/*.h', 'backends/*/*.[ch]',
            'backends/*/*.cu', 'harness/*/*.[ch]', 'suites/*.[ch]', 'reports/*.[ch]'):
    for p in glob.glob(os.path.join(SRC, pat)):
        rel = os.path.relpath(p, SRC)
        if folder_of(rel) in RULES:
            files[rel] = folder_of(rel)
by_name = collections.defaultdict(list)
for rel in files:
    by_name[os.path.basename(rel)].append(rel)

INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
inc_graph = collections.defaultdict(set)
for rel, fd in sorted(files.items()):
    text = open(os.path.join(SRC, rel), encoding='utf-8', errors='replace').read()
    for name in INC.findall(text):
        if name.startswith('gt/'):
            target = 'runtime/include/' + name
        elif '/' in name:
            problems.append(f'{rel}: includes "{name}" by a path; name a face header on the '
                            'include path instead')
            continue
        else:
            same = os.path.join(os.path.dirname(rel), name)
            if same in files:
                target = same
            elif len(by_name.get(name, [])) == 1:
                target = by_name[name][0]
            else:
                continue  # generated (kernels.h) or a system-style header
        if target not in files:
            continue
        tf = files[target]
        inc_graph[rel].add(target)
        if tf == fd:
            continue
        faces, _ = RULES[tf]
        if tf != 'runtime' and os.path.basename(target) not in faces:
            problems.append(f'{rel}: includes {target}, private to {tf} (its face: '
                            f'{", ".join(sorted(faces)) or "none"})')
        if tf not in RULES[fd][1]:
            problems.append(f'{rel}: includes {target}: {fd} may not use {tf}')


def loops(graph, nodes):
    """Strongly connected components of more than one node (iterative Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


for comp in loops(inc_graph, files):
    problems.append('include loop: ' + ' <-> '.join(comp))

for rel, fd in files.items():
    if fd not in ('runtime', 'runtime/src'):
        continue
    text = open(os.path.join(SRC, rel), encoding='utf-8', errors='replace').read()
    code = re.sub(r'/\*.*?\*/|//[^\n]*', '', text, flags=re.S)
    for b in BACKEND_NAMES:
        if re.search(r'"%s"|gt_backend_%s_|gt_%s_' % (b, b, b), code):
            problems.append(f'{rel}: names the {b} backend; the registry reads the generated '
                            'table (backends/CMakeLists.txt)')

n_objs = 0
if BUILD:
    defs, uses = collections.defaultdict(set), {}
    for o in glob.glob(os.path.join(BUILD, '**', '*.o'), recursive=True):
        if '.dir/' not in o or '/tests/' in o or 'CMakeFiles/CheckCUDA' in o or 'CompilerId' in o:
            continue
        key = os.path.relpath(o, BUILD)
        try:
            nm = subprocess.run(['nm', '-P', o], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            print(f'layering: nm {o}: {e}', file=sys.stderr)
            sys.exit(2)
        u = set()
        for line in nm.splitlines():
            f = line.split()
            if len(f) < 2:
                continue
            if f[1] in 'TDBRV':
                defs[f[0]].add(key)
            elif f[1] == 'U':
                u.add(f[0])
        uses[key] = u
    n_objs = len(uses)
    call_graph = collections.defaultdict(set)
    for a, u in uses.items():
        for s in u:
            for b in defs.get(s, ()):
                if b != a:
                    call_graph[a].add(b)
    for comp in loops(call_graph, uses):
        problems.append('call loop between object files: ' + ' <-> '.join(comp))

for p in problems:
    print('layering:', p)
edges = sum(len(v) for v in inc_graph.values())
print(f'layering: {len(files)} files, {edges} include edges'
      + (f', {n_objs} object files' if BUILD else '') + f': {len(problems)} problems')
sys.exit(1 if problems else 0)
