#!/usr/bin/env python3
"""Import cycles between the module files of Rust crates.

An edge a -> b means a file of module `a` names module `b` through `crate::`, `super::`,
`self::` or one of its own child modules (`use child::X`, `child::f()`). Items of inline
modules count as their file's. Test code (`#[cfg(test)]` modules, inline or in files) is
left out unless `--tests`: tests sit above everything they test.

The children of each module should form a ladder, each using only the ones below it. So by
default an edge between a module and its own ancestor (a `mod.rs` re-exporting its `ports`,
which names the parent's types through `super::`) is not an import between neighbours and is
left out, and any other edge is lifted to the two siblings under the modules' common
ancestor (`refresh::ports -> telemetry` counts as `refresh -> telemetry`). `--strict` keeps
every edge as it is. A set of modules that reach each other is a cycle.

    python3 tools/module_cycles.py [--strict] [--tests] [--edges] [CRATE_DIR...]
    (every member of the workspace when no crate is named; exit 1 if any crate has a cycle)
"""

import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MOD_DECL = re.compile(
    rf"((?:#\[[^\]]*\]\s*)*)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;", re.M
)
INLINE_MOD = re.compile(rf"\bmod\s+({IDENT})\s*\{{")
CFG_TEST = re.compile(r"#\[cfg\(test\)\]\s*$")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;')
USE = re.compile(r"\buse\s+([^;]+);", re.S)
PATH = re.compile(rf"(?<![A-Za-z0-9_:])((?:{IDENT}::)+{IDENT})")


def strip_comments_and_strings(text):
    """The code with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)

    def blank(j):
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        return j

    while i < n:
        ch, rest = text[i], text[i : i + 2]
        if rest == "//":
            j = text.find("\n", i)
            i = blank(n if j < 0 else j)
        elif rest == "/*":
            depth, j = 1, i + 2
            while j < n and depth:
                depth += text.startswith("/*", j) - text.startswith("*/", j)
                j += 2 if text[j : j + 2] in ("/*", "*/") else 1
            i = blank(j)
        elif (raw := re.match(r'b?r(#*)"', text[i:])) and not re.match(r"\w", text[i - 1 : i]):
            end = text.find('"' + raw.group(1), i + raw.end())
            i = blank(n if end < 0 else end + 1 + len(raw.group(1)))
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = blank(j + 1)
        elif ch == "'" and (char := re.match(r"'(?:\\.[^']*|[^\\'])'", text[i:])):
            i = blank(i + char.end())
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def child_file(parent_file, is_mod_root, name):
    base = parent_file.parent if is_mod_root else parent_file.with_suffix("")
    for candidate in (base / f"{name}.rs", base / name / "mod.rs"):
        if candidate.exists():
            return candidate
    return None


def module_tree(root_file, tests):
    """{module path tuple: file} for every file-backed module under one crate root."""
    modules = {(): root_file}
    stack = [((), root_file, True)]
    while stack:
        path, file, is_mod_root = stack.pop()
        text = strip_comments_and_strings(file.read_text())
        attr_paths = {name: file.parent / rel for rel, name in PATH_ATTR.findall(text)}
        for attrs, name in MOD_DECL.findall(text):
            if not tests and "#[cfg(test)]" in attrs:
                continue
            child = attr_paths.get(name) or child_file(file, is_mod_root, name)
            if child is None:
                continue
            modules[path + (name,)] = child
            stack.append((path + (name,), child, child.name == "mod.rs"))
    return modules


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    depth, start, parts = 0, None, []
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"as\w+$", "", tree)]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    start = 0
    for i, ch in enumerate(inner):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [p for part in parts if part for p in expand_use(prefix + part)]


def inline_modules(text):
    """Per line: how many inline `mod x {` blocks enclose it, and whether one is `cfg(test)`."""
    at_line, opened, depth, pending, previous = [], [], 0, [], ""
    for line in text.split("\n"):
        at_line.append((len(opened), any(test for _, test in opened)))
        for _ in INLINE_MOD.finditer(line):
            pending.append(bool(CFG_TEST.search(previous)) or "#[cfg(test)]" in line)
        for ch in line:
            if ch == "{":
                depth += 1
                if pending:
                    opened.append((depth, pending.pop(0)))
            elif ch == "}":
                if opened and opened[-1][0] == depth:
                    opened.pop()
                depth -= 1
        if line.strip():
            previous = line
    return at_line


def resolve(segments, here, children, modules):
    """The file-backed module a path names, or None for external crates and std."""
    head = segments[0]
    if head == "crate":
        base, rest = (), segments[1:]
    elif head in ("super", "self"):
        base, rest = list(here), list(segments)
        while rest and rest[0] in ("super", "self"):
            if rest.pop(0) == "super":
                base = base[:-1] if base else base
        base = tuple(base)
    elif head in children:
        base, rest = here, segments
    else:
        return None
    target = tuple(base)
    for seg in rest:
        if target + (seg,) in modules:
            target = target + (seg,)
        else:
            break
    return target


def edges_of(modules, tests):
    edges = {}
    for here, file in modules.items():
        text = strip_comments_and_strings(file.read_text())
        children = {p[-1] for p in modules if p[:-1] == here and len(p) == len(here) + 1}
        inline = inline_modules(text)
        paths = []
        for m in USE.finditer(text):
            line = text.count("\n", 0, m.start())
            paths += [(p, line) for p in expand_use(m.group(1))]
        for m in PATH.finditer(USE.sub(lambda u: "\n" * u.group(0).count("\n"), text)):
            paths.append((m.group(1), text.count("\n", 0, m.start())))
        for path, line in paths:
            segments = [s for s in path.split("::") if s]
            depth, in_test = inline[line]
            if not segments or (in_test and not tests):
                continue
            # `super::` inside an inline module first climbs out of it, to its file's module.
            if segments[0] == "super":
                climb = min(depth, sum(1 for s in segments if s == "super"))
                segments = ["self"] + segments[climb:] if climb else segments
            target = resolve(segments, here, children, modules)
            if target is not None and target != here:
                edges.setdefault((here, target), (file, line + 1, path))
    return edges


def cycles(nodes, edges):
    """Strongly connected components with more than one module (Tarjan)."""
    succ = {n: [] for n in nodes}
    for a, b in edges:
        succ[a].append(b)
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    sys.setrecursionlimit(10000)
    for n in nodes:
        if n not in index:
            visit(n)
    return out


def roots(crate):
    src = crate / "src"
    found = [f for f in (src / "lib.rs", src / "main.rs") if f.exists()]
    bins = src / "bin"
    if bins.is_dir():
        found += sorted(bins.glob("*.rs")) + sorted(bins.glob("*/main.rs"))
    return found


def ladder_edges(edges):
    """Edges between siblings: ancestor edges dropped, the rest lifted below the common ancestor."""
    lifted = {}
    for (a, b), witness in edges.items():
        common = 0
        while common < min(len(a), len(b)) and a[common] == b[common]:
            common += 1
        if common == len(a) or common == len(b):
            continue
        lifted.setdefault((a[: common + 1], b[: common + 1]), witness)
    return lifted


def name(module):
    return "::".join(module) or "crate"


def workspace_members():
    root = Path(__file__).resolve().parent.parent
    listed = re.search(r"^members\s*=\s*\[([^\]]*)\]", (root / "Cargo.toml").read_text(), re.M)
    members = re.findall(r'"([^"]+)"', listed.group(1))
    found = sorted(path for member in members for path in root.glob(member))
    return [path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
            for path in found if (path / "Cargo.toml").exists()]


def main(argv):
    show_edges, strict, tests = "--edges" in argv, "--strict" in argv, "--tests" in argv
    crates = [Path(a) for a in argv if not a.startswith("--")] or workspace_members()
    failed = False
    for crate in crates:
        for root in roots(crate):
            modules = module_tree(root, tests)
            edges = edges_of(modules, tests)
            if not strict:
                edges = ladder_edges(edges)
            found = cycles(list(modules), edges)
            label = root.relative_to(crate)
            print(f"{crate} ({label}): {len(modules)} modules, {len(edges)} edges, {len(found)} cycles")
            for comp in found:
                failed = True
                members = set(comp)
                print("  cycle: " + ", ".join(name(m) for m in comp))
                for (a, b), (file, line, path) in sorted(edges.items()):
                    if a in members and b in members:
                        print(f"    {name(a)} -> {name(b)}  ({file}:{line} {path})")
            if show_edges:
                for (a, b), (file, line, path) in sorted(edges.items()):
                    print(f"  {name(a)} -> {name(b)}  ({file}:{line} {path})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
