#!/usr/bin/env python3
"""The include graph of the project's folders, from the compiler's dependency files.

Reads `ninja -t deps` of a build tree (every object's source and the headers the compiler opened
for it), takes each repository file's own `#include` lines, resolves them to the headers the
compiler actually used, and folds the files into folders: a header under
FOLDER/include/studio/NAME/... belongs to FOLDER (or to FOLDER's subfolder of the same name when
there is one: trainer/include/studio/trainer/model/decoder.h belongs to trainer/model).

It fails (exit 1), naming the files and the #include lines, when
  - two folders include each other, directly or around a longer loop;
  - a file includes one from a folder above its own (trainer/model/x.cpp including a header of
    trainer/, whose files use trainer/model);
  - headers include one another in a loop;
  - with --readme, the README's architecture table misses a folder that holds sources, or names
    one that does not exist.
Only files under the folders given with --check are judged; the graph spans the whole tree.

  scripts/include_graph.py --build build --check config trainer ui
  scripts/include_graph.py --build build --dot > folders.dot    # the folder graph, for Graphviz
"""
import argparse
import collections
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SOURCE_SUFFIXES = ('.cpp', '.cc', '.cu', '.h', '.hpp', '.cuh')


def dependency_files(build, root):
    """{object: [repository files the compiler read for it]} from ninja's deps log."""
    out = subprocess.run(['ninja', '-C', build, '-t', 'deps'], check=True, capture_output=True,
                         text=True).stdout
    deps = collections.defaultdict(list)
    current = None
    build_abs = os.path.realpath(build) + os.sep
    for line in out.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(' '):
            current = line.split(':', 1)[0]
        elif current is not None:
            path = os.path.realpath(os.path.join(build, line.strip()))
            if path.startswith(root + os.sep) and not path.startswith(build_abs):
                deps[current].append(os.path.relpath(path, root))
    return deps


def owning_folder(path, root):
    """The folder a file belongs to: headers under include/studio/... go back to their library."""
    marker = '/include/studio/'
    if marker not in path:
        return os.path.dirname(path)
    base, rest = path.split(marker, 1)
    parts = rest.split('/')[1:-1]  # drop the library name and the file name
    folder = base
    for part in parts:
        if os.path.isdir(os.path.join(root, folder, part)):
            folder = os.path.join(folder, part)
        else:
            break
    return folder


def resolve(include, from_file, known):
    """The repository file an #include names: beside the including file first, else the one
    header the compiler read whose path ends with the name."""
    beside = os.path.normpath(os.path.join(os.path.dirname(from_file), include))
    if beside in known:
        return beside
    hits = known.get_suffix(include)
    return hits[0] if len(hits) == 1 else None


class Known(set):
    def __init__(self, files):
        super().__init__(files)
        self.by_name = collections.defaultdict(list)
        for f in files:
            self.by_name[os.path.basename(f)].append(f)

    def get_suffix(self, include):
        return [f for f in self.by_name.get(os.path.basename(include), [])
                if f == include or f.endswith('/' + include)]


def strongly_connected(nodes, edges):
    """Tarjan's components with more than one node (or a node with an edge to itself)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(100000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


LIBRARY_ROOTS = ('base', 'model_facts', 'config', 'runs', 'data', 'kernels', 'trainer', 'remote', 'ui', 'app')
TABLE_ROW = re.compile(r'^\|\s*`([^`]+)/`\s*\|')


def readme_problems(readme, root):
    """Folders with sources that the README's architecture table lacks, and rows naming none."""
    rows, in_section = {}, False
    with open(readme, encoding='utf-8') as fh:
        for n, line in enumerate(fh, 1):
            if line.startswith('## '):
                in_section = line.strip() == '## Architecture'
            elif in_section:
                m = TABLE_ROW.match(line)
                if m:
                    rows[m.group(1)] = n
    problems = [f'{readme}:{n}: the architecture table names {d}/, which is not in the tree'
                for d, n in sorted(rows.items()) if not os.path.isdir(os.path.join(root, d))]
    for top in LIBRARY_ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d != 'include']
            rel = os.path.relpath(dirpath, root)
            if any(f.endswith(SOURCE_SUFFIXES) for f in filenames) and rel not in rows:
                problems.append(f'{readme}: the architecture table has no row for {rel}/, which holds sources')
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build', help='a configured and built ninja tree')
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    ap.add_argument('--check', nargs='*', default=['base', 'model_facts', 'config', 'runs', 'trainer', 'ui'],
                    help='folders whose files are judged')
    ap.add_argument('--dot', action='store_true', help='print the folder graph as Graphviz and exit')
    ap.add_argument('--readme', help="also check this README's architecture table against the tree")
    args = ap.parse_args()
    root = os.path.realpath(args.root)

    deps = dependency_files(args.build, root)
    files = Known({f for fs in deps.values() for f in fs if f.endswith(SOURCE_SUFFIXES)})
    if not files:
        print(f'include_graph: no dependency information in {args.build} (build it first)', file=sys.stderr)
        return 2

    # file -> [(line number, included file)]
    file_edges = collections.defaultdict(list)
    for f in sorted(files):
        try:
            with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if m:
                        target = resolve(m.group(1), f, files)
                        if target is not None and target != f:
                            file_edges[f].append((n, target))
        except FileNotFoundError:
            continue

    folder_of = {f: owning_folder(f, root) for f in files}
    folder_edges = collections.defaultdict(set)
    witness = {}
    for f, targets in file_edges.items():
        for n, t in targets:
            a, b = folder_of[f], folder_of[t]
            if a != b:
                folder_edges[a].add(b)
                witness.setdefault((a, b), f'{f}:{n} includes {t}')

    if args.dot:
        print('digraph folders {')
        for a in sorted(folder_edges):
            for b in sorted(folder_edges[a]):
                print(f'  "{a}" -> "{b}";')
        print('}')
        return 0

    judged = tuple(c.rstrip('/') for c in args.check)

    def is_judged(path):
        return any(path == c or path.startswith(c + '/') for c in judged)

    problems = []
    # A file including one from a folder above its own.
    for f, targets in sorted(file_edges.items()):
        if not is_judged(f):
            continue
        here = folder_of[f]
        for n, t in targets:
            there = folder_of[t]
            if there != here and (here + '/').startswith(there + '/'):
                problems.append(f'{f}:{n}: includes {t}, from {there}/, a folder above {here}/')
    # Loops of folders.
    nodes = set(folder_edges) | {b for bs in folder_edges.values() for b in bs}
    for comp in strongly_connected(nodes, folder_edges):
        if not any(is_judged(c) for c in comp):
            continue
        lines = [witness[(a, b)] for a in comp for b in sorted(folder_edges[a]) if b in comp]
        problems.append('folders include one another: ' + ', '.join(comp) + '\n    ' + '\n    '.join(lines))
    # Loops of headers.
    header_edges = {f: {t for _, t in ts} for f, ts in file_edges.items()}
    for comp in strongly_connected(set(files), header_edges):
        if not any(is_judged(c) for c in comp):
            continue
        lines = [f'{a}:{n} includes {t}' for a in comp for n, t in file_edges[a] if t in comp]
        problems.append('headers include one another: ' + ', '.join(comp) + '\n    ' + '\n    '.join(lines))

    if args.readme:
        problems += readme_problems(args.readme, root)

    for p in problems:
        print(p)
    n_folders = len({folder_of[f] for f in files if is_judged(f)})
    print(f'include_graph: {len(files)} files, {len(nodes)} folders ({n_folders} judged: '
          f'{", ".join(judged)}), {len(problems)} problem(s)')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
