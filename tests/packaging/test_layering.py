"""The floors follow the data: a GPS fix is read (data), placed (space), counted with bounded contributions (od),
released with noise, threshold and accounting (privacy, and the Knock Knock attacks beside it), reported (report)
and shown (the command line, the dashboard's code, its pages). A module imports only from its own package or from a
lower floor, and every import sits at the top of its module, except the optional heavy packages (pyspark, duckdb,
kaleido), which load only when their engine or export runs. A module that loads another by name with ``importlib``
(the command line's table of commands, the zone kinds) names it in a string constant; such a name is checked like an
import, so a table cannot reach a higher floor either.

The order is written once, in :data:`FLOORS`; the checker is plain ``ast`` over the source files, and it is shown
to catch an upward import, an upward module name in a table and a function-level import on small sources of its
own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from odcore.paths import REPO_ROOT

FLOORS: tuple[tuple[str, ...], ...] = (
    ("odcore", "odcore.constants", "odcore.errors", "odcore.paths"),   # names, errors and paths every floor uses
    ("odcore.data",),
    ("odcore.space",),
    ("odcore.od",),
    ("odcore.privacy", "odcore.knock"),
    ("odcore.recover",),   # trajectory recovery: the aggregates, the defences and the attacks of the floor below
    ("odcore.report",),
    ("odcore.cli", "odapp"),
    ("odcore.__main__", "app", "pages", "odserve"),   # the entry points: ``python -m odcore``, ``streamlit run app.py``,
    # ``python -m odserve`` (the class launcher)
)
"""Lowest first. A module may import a package on a lower floor, or its own package; never a higher floor, nor a
neighbour on its own floor (the command line and the dashboard's code share nothing but the engine)."""

OPTIONAL_HEAVY = frozenset({"pyspark", "duckdb", "kaleido", "choreographer", "pipeline_dp"})
"""Packages imported inside the function that needs them: an engine or an export a person may never run (Spark,
DuckDB, kaleido and its browser finder ``choreographer``; PipelineDP, installed for the tests' comparison only)."""

LIGHT_START: tuple[str, ...] = ()
"""Modules whose imports may also sit in the function that needs them: none."""

PROJECT_NAME = re.compile(r"^(odcore|odapp|pages)(\.[A-Za-z_]\w*)+$")
"""A string constant of this form (not a docstring) names a project module, loaded by ``importlib`` from a table."""

SOURCES = ("odcore", "odapp", "odserve", "pages", "app.py")


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def home(module: str) -> tuple[int, str] | None:
    """(floor, package) of a dotted module name: the longest prefix listed in :data:`FLOORS`; None for outside code."""
    best = None
    for level, names in enumerate(FLOORS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best[1])):
                best = (level, name)
    return best


def named_modules(tree: ast.AST):
    """Yield (module name, line) for every string constant of ``tree`` that names a project module (the entries of
    an ``importlib`` dispatch table); docstrings are prose and are left out."""
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose \
                and PROJECT_NAME.match(node.value):
            yield node.value, node.lineno


def imports_of(source: str, module: str, is_package: bool):
    """Yield (imported module, line, inside a function) for every import statement of ``source``, and for every
    module named in a string constant (:func:`named_modules`; never counted as inside a function)."""
    tree = ast.parse(source)
    for name, line in named_modules(tree):
        yield name, line, False
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        up, in_function = parents.get(node), False
        while up is not None:
            in_function |= isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            up = parents.get(up)
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                targets = [".".join(base + ([node.module] if node.module else []))]
            else:
                targets = [node.module]
        else:
            targets = [a.name for a in node.names]
        for t in targets:
            yield t, node.lineno, in_function


def problems(files: dict[str, tuple[str, bool]]) -> tuple[list[str], list[str]]:
    """(upward or sideways imports, function-level imports) of ``files`` = {module: (source, is_package)}."""
    upward, local = [], []
    for module, (source, is_package) in sorted(files.items()):
        mine = home(module)
        for target, line, in_function in imports_of(source, module, is_package):
            light = any(module == m or module.startswith(m + ".") for m in LIGHT_START)
            if in_function and target.split(".")[0] not in OPTIONAL_HEAVY and not light:
                local.append(f"{module}:{line} imports {target} inside a function")
            theirs = home(target)
            if mine is None or theirs is None or theirs[1] == mine[1]:
                continue
            if theirs[0] > mine[0] or (theirs[0] == mine[0] and mine[0] > 0):
                upward.append(f"{module}:{line} (floor {mine[0]}, {mine[1]}) imports {target} "
                              f"(floor {theirs[0]}, {theirs[1]})")
    return upward, local


def project_files(root: Path = REPO_ROOT) -> dict[str, tuple[str, bool]]:
    files = {}
    for name in SOURCES:
        path = root / name
        for f in ([path] if path.is_file() else sorted(path.rglob("*.py"))):
            files[module_name(f, root)] = (f.read_text(encoding="utf-8"), f.name == "__init__.py")
    return files


@pytest.fixture(scope="module")
def found():
    files = project_files()
    assert {"odcore.od.pairs", "odcore.privacy.release", "odapp.data.cache", "app"} <= set(files)
    return problems(files)


def test_every_floor_imports_only_lower_floors(found):
    upward, _ = found
    assert not upward, "\n".join(upward)


def test_imports_sit_at_the_top_of_their_modules(found):
    _, local = found
    assert not local, "\n".join(local)


def test_every_module_named_in_a_table_exists():
    files = project_files()
    named = [(module, name, line) for module, (source, _) in files.items()
             for name, line in named_modules(ast.parse(source))]
    assert {n for _, n, _ in named} >= {"odcore.cli.curve", "odcore.space.hexagons", "odcore.space.polygons"}
    missing = [f"{module}:{line} names {name}" for module, name, line in named
               if name not in files and name.rpartition(".")[0] not in files]   # a module, or a name in one
    assert not missing, "\n".join(missing)


def test_every_package_has_a_floor():
    for name in SOURCES:
        path = REPO_ROOT / name
        for f in [path] if path.is_file() else path.rglob("*.py"):
            assert home(module_name(f, REPO_ROOT)) is not None, f


def test_the_checker_sees_an_upward_a_sideways_a_function_level_import_and_an_upward_table_entry():
    files = {
        "odcore.od.trips": ("from odcore.privacy.release import release\n", False),            # up
        "odcore.od.engines": ("from .. import pairs\nfrom ...privacy import rdp\n", True),       # own, up
        "odcore.privacy.attack": ("import numpy\nfrom odcore.od import pairs\n", False),         # down: fine
        "odcore.knock.game": ("from odcore.privacy import attack\n", False),                    # sideways
        "odapp.data.cache": ("from odcore.cli.release import run\n", False),                         # sideways
        "odcore.report.sheet": ("def f():\n    import duckdb\n    from odcore.od import trips\n", False),
        "pages.x": ("import odapp.data.cache\nimport odcore\n", False),                              # down: fine
        "odcore.space.zones": ('"""See odcore.report.maps."""\nKINDS = {"h3": ("odcore.space.hexagons", "H"),\n'
                               '         "map": ("odcore.report.maps", "M")}\n', False),     # a table: up
        "odcore.cli.parser": ('COMMANDS = {"x": ("odcore.cli.x", "run"), "y": ("odcore.od.trips", "run")}\n',
                              False),                                                          # table: own, down
    }
    upward, local = problems(files)
    assert [u.split(":")[0] for u in upward] == ["odapp.data.cache", "odcore.knock.game", "odcore.od.engines",
                                                  "odcore.od.trips", "odcore.space.zones"]
    assert upward[-1].startswith("odcore.space.zones:3 (floor 2, odcore.space) imports odcore.report.maps")
    assert local == ["odcore.report.sheet:3 imports odcore.od inside a function"]
