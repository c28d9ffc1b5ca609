#!/usr/bin/env python3
"""Prints every import loop between the files of a Rust crate; exits 1 if there is one.

Usage: python3 scripts/check-import-cycles.py CRATE/src [CRATE/src ...]

The graph has one node per module file (`lib.rs`/`main.rs`, `a.rs`, `a/mod.rs`,
`a/b.rs`, ... reached from the crate root through `mod x;` declarations) and an edge
A -> B when A names something in B:

- a `use` path (`use crate::a::b::{C, d}`, `use super::x`, `use self::child::Y`, or, in
  2018 style, `use child::Y` for a child module of A), or
- a path written inline anywhere in A's code (`crate::lock::LockShared::new`,
  `super::helper()`, `child::f()`).

A path is resolved to the deepest module file that exists: `crate::a::b::C` goes to
`a/b.rs` (or `a/b/mod.rs`); when `b` is an inline module or an item of `a.rs`, to
`a.rs`. A name a module file re-exports (`pub use x::Y;`, also `pub use x::*` when x
defines Y) is followed to the file that defines it, so importing `crate::Y` through
the crate root's re-export is an edge to Y's own file, not to `lib.rs`.

Not edges:
- `mod x;` itself (a parent declaring its child is not an import);
- re-exports (`pub use`, `pub(crate) use`, ...), unless the file itself uses the
  re-exported name in its own code: a facade is not a dependency;
- comments (intra-doc links included) and string literals;
- test code: items under `#[cfg(test)]` (an inline `mod tests { ... }`), and the files of
  `#[cfg(test)] mod x;` declarations and every file named `tests.rs`, which are left out.

Prints each strongly connected component of more than one file, with the lines that make
its edges, and nothing when there is none. Python 3 standard library only.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ROOT_FILES = ("lib.rs", "main.rs")


def strip_code(text: str) -> str:
    """`text` with comments, string and char literals blanked (newlines kept, so line
    numbers stay right)."""
    out = []
    i, n = 0, len(text)

    def blank(chunk: str) -> str:
        return "".join("\n" if c == "\n" else " " for c in chunk)

    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(blank(text[i:end]))
            i = end
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (c in "rb") and re.match(r"(?:br|r)#*\"", text[i:i + 300]) and not re.match(r"[A-Za-z0-9_]", text[i - 1] if i else " "):
            m = re.match(r"(?:br|r)(#*)\"", text[i:])
            hashes = m.group(1)
            close = '"' + hashes
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append(blank(text[i:j]))
            i = j
        elif c == '"' or (c == "b" and nxt == '"' and not re.match(r"[A-Za-z0-9_]", text[i - 1] if i else " ")):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(blank(text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a): keep lifetimes.
            m = re.match(r"'(?:\\(?:u\{[0-9A-Fa-f]+\}|x[0-9A-Fa-f]{2}|.)|[^\\'\n])'", text[i:i + 16])
            if m:
                out.append(blank(m.group(0)))
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text: str, open_at: int) -> int:
    """Index just past the `}` that closes the `{` at `open_at` (text already stripped)."""
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


CFG_TEST = re.compile(r"#\[\s*cfg\s*\(\s*(?:all\s*\(\s*)?test\b[^\]]*\]")
ATTRIBUTE = re.compile(r"\s*#\[[^\]]*\]")
MOD_DECL = re.compile(rf"^\s*(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+({IDENT})\s*;")


def drop_test_items(text: str) -> tuple[str, set[str]]:
    """`text` with every `#[cfg(test)]` item blanked; the names of `#[cfg(test)] mod x;`
    declarations (whose files are test code) beside it."""
    test_mods: set[str] = set()
    while True:
        m = CFG_TEST.search(text)
        if not m:
            return text, test_mods
        j = m.end()
        while (a := ATTRIBUTE.match(text, j)) is not None:
            j = a.end()
        semi, brace = text.find(";", j), text.find("{", j)
        if brace >= 0 and (semi < 0 or brace < semi):
            end = matching_brace(text, brace)
        else:
            end = len(text) if semi < 0 else semi + 1
            decl = MOD_DECL.match(text[j:end])
            if decl:
                test_mods.add(decl.group(1))
        text = text[: m.start()] + "".join("\n" if c == "\n" else " " for c in text[m.start():end]) + text[end:]


USE_ITEM = re.compile(r"(?<![A-Za-z0-9_])(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]+);")


def expand_use_tree(tree: str) -> list[tuple[list[str], str | None]]:
    """The leaf paths of a use tree, each with the name it binds (None for a glob).
    `crate::a::{b, c::D as E, self}` -> ([crate,a,b], b), ([crate,a,c,D], E), ([crate,a], a)."""
    tree = re.sub(r"\s+", " ", tree.strip())
    if tree.startswith("::"):
        tree = tree[2:]

    def split_top(s: str) -> list[str]:
        parts, depth, cur = [], 0, []
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append("".join(cur))
                cur = []
            else:
                cur.append(ch)
        parts.append("".join(cur))
        return [p.strip() for p in parts if p.strip()]

    def walk(prefix: list[str], s: str) -> list[tuple[list[str], str | None]]:
        s = s.strip()
        brace = s.find("{")
        if brace >= 0:
            head = [seg.strip() for seg in s[:brace].split("::") if seg.strip()]
            inner = s[brace + 1 : s.rfind("}")]
            result = []
            for part in split_top(inner):
                result.extend(walk(prefix + head, part))
            return result
        alias = None
        m = re.match(rf"(.*?)\s+as\s+({IDENT})$", s)
        if m:
            s, alias = m.group(1), m.group(2)
        segs = [seg.strip() for seg in s.split("::") if seg.strip()]
        if segs and segs[-1] == "*":
            return [(prefix + segs[:-1], None)]
        if segs and segs[-1] == "self":
            path = prefix + segs[:-1]
            return [(path, alias or (path[-1] if path else None))]
        path = prefix + segs
        return [(path, alias or (path[-1] if path else None))]

    return walk([], tree)


@dataclass
class Use:
    path: list[str]
    name: str | None  # the bound name; None for a glob
    public: bool
    line: int


@dataclass
class ModFile:
    path: str  # relative to the src dir
    module: tuple[str, ...]
    code: str  # stripped, test items blanked
    children: set[str] = field(default_factory=set)
    uses: list[Use] = field(default_factory=list)
    inline: list[tuple[list[str], int]] = field(default_factory=list)  # (path, line)


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def load_crate(src: str) -> dict[tuple[str, ...], ModFile]:
    """Every module file reached from the crate root by non-test `mod x;` declarations."""
    root = next((f for f in ROOT_FILES if os.path.isfile(os.path.join(src, f))), None)
    if root is None:
        sys.exit(f"{src}: no lib.rs or main.rs")
    modules: dict[tuple[str, ...], ModFile] = {}
    pending = [(root, ())]
    while pending:
        rel, module = pending.pop()
        with open(os.path.join(src, rel), encoding="utf-8") as f:
            code, test_mods = drop_test_items(strip_code(f.read()))
        mod_file = ModFile(rel, module, code)
        modules[module] = mod_file
        here = os.path.dirname(rel)
        base = os.path.basename(rel)
        child_dir = here if base in ROOT_FILES + ("mod.rs",) else os.path.join(here, base[:-3])
        for line in code.splitlines():
            decl = MOD_DECL.match(line)
            if not decl or decl.group(1) in test_mods:
                continue
            name = decl.group(1)
            for candidate in (os.path.join(child_dir, f"{name}.rs"), os.path.join(child_dir, name, "mod.rs")):
                if os.path.isfile(os.path.join(src, candidate)) and os.path.basename(candidate) != "tests.rs":
                    mod_file.children.add(name)
                    pending.append((os.path.normpath(candidate), module + (name,)))
                    break
    for mod_file in modules.values():
        parse_paths(mod_file)
    return modules


def parse_paths(mod_file: ModFile) -> None:
    code = mod_file.code
    rest = list(code)
    for m in USE_ITEM.finditer(code):
        line = line_of(code, m.start())
        for path, name in expand_use_tree(m.group(2)):
            mod_file.uses.append(Use(path, name, m.group(1) is not None, line))
        rest[m.start() : m.end()] = " " * (m.end() - m.start())
    body = "".join(rest)
    heads = ["crate", "super", "self"] + sorted(mod_file.children)
    inline = re.compile(rf"(?<![A-Za-z0-9_:])(?:{'|'.join(map(re.escape, heads))})(?:\s*::\s*{IDENT})+")
    for m in inline.finditer(body):
        segs = [s.strip() for s in m.group(0).split("::")]
        mod_file.inline.append((segs, line_of(body, m.start())))
    mod_file.body = body  # type: ignore[attr-defined]


def defines(mod_file: ModFile, name: str) -> bool:
    pattern = rf"\b(?:struct|enum|fn|trait|type|const|static|union|mod)\s+{re.escape(name)}\b|macro_rules!\s*{re.escape(name)}\b"
    return re.search(pattern, mod_file.code) is not None


def resolve(modules, current: tuple[str, ...], segs: list[str], depth: int = 0) -> tuple[str, ...] | None:
    """The deepest module a path names, following re-exports; None for a path out of
    the crate (std, another crate)."""
    if depth > 16 or not segs:
        return None
    first = segs[0]
    if first == "crate":
        base, rest = (), segs[1:]
    elif first in ("super", "self"):
        base, i = current, 0
        while i < len(segs) and segs[i] in ("super", "self"):
            if segs[i] == "super":
                base = base[:-1]
            i += 1
        rest = segs[i:]
    elif current + (first,) in modules:
        base, rest = current, segs
    else:
        return None
    module = base
    for k, seg in enumerate(rest):
        if module + (seg,) in modules:
            module = module + (seg,)
            continue
        # `seg` is an item of `module` or a name it re-exports.
        target = reexport(modules, module, seg, depth)
        if target is None:
            return module
        return walk_on(modules, target, rest[k + 1 :])
    return module


def walk_on(modules, module: tuple[str, ...], rest: list[str]) -> tuple[str, ...]:
    for seg in rest:
        if module + (seg,) not in modules:
            break
        module = module + (seg,)
    return module


def reexport(modules, module: tuple[str, ...], name: str, depth: int) -> tuple[str, ...] | None:
    mod_file = modules.get(module)
    if mod_file is None or defines(mod_file, name):
        return None
    for use in mod_file.uses:
        if use.public and use.name == name:
            return resolve(modules, module, use.path, depth + 1)
    for use in mod_file.uses:
        if use.public and use.name is None:
            source = resolve(modules, module, use.path, depth + 1)
            if source is not None and source in modules and (
                source + (name,) in modules or defines(modules[source], name) or reexport(modules, source, name, depth + 1)
            ):
                return resolve(modules, module, use.path + [name], depth + 1)
    return None


def edges_of(modules) -> dict[str, dict[str, list[str]]]:
    """file -> file -> the reasons (line: path)."""
    edges: dict[str, dict[str, list[str]]] = {m.path: {} for m in modules.values()}
    for mod_file in modules.values():
        paths: list[tuple[list[str], int]] = []
        for use in mod_file.uses:
            if use.public:
                # A re-export is an import only when this file uses the name itself.
                if use.name is None or not re.search(rf"\b{re.escape(use.name)}\b", mod_file.body):  # type: ignore[attr-defined]
                    continue
            paths.append((use.path, use.line))
        paths.extend(mod_file.inline)
        for segs, line in paths:
            target = resolve(modules, mod_file.module, segs)
            if target is None or target not in modules:
                continue
            to = modules[target].path
            if to != mod_file.path:
                edges[mod_file.path].setdefault(to, []).append(f"{line}: {'::'.join(segs)}")
    return edges


def components(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__.strip())
        return 2
    loops = 0
    for src in argv[1:]:
        modules = load_crate(src)
        edges = edges_of(modules)
        for component in sorted(components(edges)):
            if len(component) < 2:
                continue
            loops += 1
            print(f"{src}: import loop of {len(component)} files: {', '.join(component)}")
            members = set(component)
            for a in component:
                for b, reasons in sorted(edges[a].items()):
                    if b in members:
                        print(f"  {a} -> {b}  ({'; '.join(reasons)})")
    return 1 if loops else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
