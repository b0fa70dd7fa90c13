"""The house's rules, checked with the standard library's ``ast``: no import circles among odcore's and odapp's
modules, no private name (``_x``) imported from another module, a two-line docstring on every package, and the
engine never imports streamlit. The checker itself is shown failing on a deliberate circle and a private import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from odcore.paths import REPO_ROOT

PACKAGES = ("odcore", "odapp")


def module_map(root: Path, packages) -> dict[str, Path]:
    mods = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            rel = f.relative_to(root).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            mods[".".join(parts)] = f
    return mods


def import_graph(root: Path, packages) -> tuple[dict[str, set[str]], list[str]]:
    """Edges module -> module it imports (at any depth of the file, lazy imports included), and the private
    names that cross modules."""
    mods = module_map(root, packages)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    private: list[str] = []
    for m, f in mods.items():
        is_pkg = f.name == "__init__.py"
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = m.split(".")
                    base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    if full in mods:
                        edges[m].add(full)
                    elif target in mods:
                        edges[m].add(target)
                        if alias.name.startswith("_") and not alias.name.startswith("__") and target != m:
                            private.append(f"{m} imports {alias.name} from {target}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods:
                        edges[m].add(alias.name)
    # a module importing from its own package's __init__ (a re-export) is not a circle
    for m in edges:
        edges[m] = {t for t in edges[m] if not (m.startswith(t + ".") and mods[t].name == "__init__.py")}
    return edges, private


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
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


def test_no_import_circles_and_no_private_imports():
    edges, private = import_graph(REPO_ROOT, PACKAGES)
    assert circles(edges) == []
    assert private == []


def test_the_checker_finds_a_deliberate_circle_and_private_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A package."""\n')
    (pkg / "a.py").write_text("from pkg.b import helper\n\n\ndef f():\n    return helper()\n")
    (pkg / "b.py").write_text("def helper():\n    from pkg.a import f\n    return f\n")
    (pkg / "c.py").write_text("from pkg.b import _secret\n")
    (pkg / "d.py").write_text("from .a import f\n")
    edges, private = import_graph(tmp_path, ["pkg"])
    assert circles(edges) == [["pkg.a", "pkg.b"]]
    assert private == ["pkg.c imports _secret from pkg.b"]
    assert edges["pkg.d"] == {"pkg.a"}


@pytest.mark.parametrize("init", sorted((REPO_ROOT / "odcore").rglob("__init__.py")), ids=str)
def test_every_package_says_what_it_holds(init):
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc, f"{init} needs a docstring saying what the package holds"
    assert len(doc.split()) >= 8, f"{init}'s docstring is too short to say what the package holds"


def test_the_engine_never_imports_streamlit():
    for f in (REPO_ROOT / "odcore").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "streamlit" or n.startswith("streamlit.") for n in names), f
