"""Command line: ``python -m odcore SUBCOMMAND ...``.

The parser (:mod:`odcore.cli.parser`) holds every command's name, arguments and the module that runs it
(:data:`odcore.cli.parser.COMMANDS`); :func:`main` imports that module only when its command runs, so ``--help`` and
argument parsing load no numpy, and each command module imports its engine at its top. Domain errors
(:class:`odcore.errors.ODCoreError`) are printed as one line on stderr with exit code 2, never a traceback.
Numeric parameters (ε, δ, τ, cell area, k, resolution, Monte Carlo size, seed, weeks, ...) are checked once, here,
against :data:`odcore.data.params.PARAMETERS` (the same rule the engine's configs use), whether they come from a flag
or from ``--config``.

Every subcommand accepts ``--config FILE.json``: a JSON object whose keys are the command's flag names in
snake_case (``--max-pairs`` -> ``max_pairs``), as the dashboard exports them. Precedence: explicit flags > config
file > defaults. The informative key ``dataset`` (and keys a command lists in ``set_defaults(_config_ignored=...)``)
are accepted and ignored with a note on stderr; any other unknown key is an error. ``args._explicit`` holds the
options given on the command line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from odcore.cli.parser import COMMANDS, build_parser
from odcore.data.params import check_params
from odcore.errors import ODCoreError, ParameterError

_UNSET = object()
_NOT_SETTINGS = frozenset({"help", "config", "json"})
ALWAYS_IGNORED = frozenset({"dataset"})  # informative key of the dashboard's exports


def _apply_config(args: argparse.Namespace, argv: list[str]) -> argparse.Namespace:
    """Re-parse the subcommand's arguments on top of ``--config`` values (explicit flags still win)."""
    p: argparse.ArgumentParser = args._parser
    sub_argv = argv[argv.index(args._command) + 1:]
    dests = {a.dest for a in p._actions if a.dest not in _NOT_SETTINGS and a.dest != argparse.SUPPRESS}
    probe = p.parse_args(sub_argv, namespace=argparse.Namespace(**dict.fromkeys(dests, _UNSET)))
    explicit = {d for d in dests if getattr(probe, d) is not _UNSET}
    values: dict = {}
    if args.config:
        path = Path(args.config)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ParameterError(f"--config file not found: {path}.") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ParameterError(f"--config {path}: not a readable JSON file ({exc}).") from None
        if not isinstance(raw, dict):
            raise ParameterError(f"--config {path}: expected a JSON object of settings, got {type(raw).__name__}.")
        ignored = ALWAYS_IGNORED | frozenset(getattr(args, "_config_ignored", ()))
        unknown = []
        for key, value in raw.items():
            k = str(key).replace("-", "_")
            if k in dests:
                values[k] = value
            elif k in ignored:
                print(f"note: config key {key!r} is not used by this command (ignored)", file=sys.stderr)
            else:
                unknown.append(key)
        if unknown:
            raise ParameterError(f"--config {path}: unknown key(s) {unknown}; expected keys among "
                                 f"{sorted(dests)} (flag names in snake_case).")
    ns = p.parse_args(sub_argv, namespace=argparse.Namespace(**values))
    ns._explicit = frozenset(explicit)
    ns._from_config = frozenset(values) - explicit
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "_command"):
        parser.print_help()
        return 0
    try:
        args = _apply_config(args, argv)
        _check_parameters(args)
        module, function = COMMANDS[args._command]
        return int(getattr(importlib.import_module(module), function)(args) or 0)
    except ODCoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _check_parameters(args: argparse.Namespace) -> None:
    """Every known parameter (flag or ``--config`` value) against the one rule of :data:`odcore.data.params.PARAMETERS`,
    before any work and before any output is written."""
    typed = {a.dest for a in args._parser._actions if a.type in (int, float)}
    numeric_list = re.compile(r"^\s*[-+0-9.eE]+(\s*,\s*[-+0-9.eE]+)*\s*$")
    # numeric flags, and untyped ones holding numbers (comma lists such as --epsilon 0.1,1,10); not word choices
    values = {k: v for k, v in vars(args).items() if not k.startswith("_")
              and (k in typed or (isinstance(v, (int, float)) and not isinstance(v, bool))
                   or (isinstance(v, str) and numeric_list.match(v)))}
    for k, v in check_params(values).items():
        if k not in typed and isinstance(values[k], str):
            continue   # an untyped list flag (--epsilon 1 or 0.1,1) stays text for its command to split; it was checked
        setattr(args, k, v)


def print_json(obj: object) -> None:
    """Print ``obj`` as JSON on stdout (numpy scalars and arrays converted, without importing numpy)."""
    print(json.dumps(obj, indent=2, default=_json_default, allow_nan=False))


def _json_default(o: object):
    if type(o).__module__ == "numpy" and hasattr(o, "tolist"):   # numpy scalars and arrays: Python numbers, lists
        return o.tolist()
    if hasattr(o, "isoformat"):
        return o.isoformat()
    raise TypeError(f"cannot serialise {type(o).__name__} to JSON")
