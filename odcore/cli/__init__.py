"""Command line: ``python -m odcore SUBCOMMAND ...``.

Each module in :data:`SUBCOMMAND_MODULES` exposes ``register(subparsers)``, which adds its
subcommands with ``set_defaults(func=...)``; ``func(args)`` returns an exit code. Domain errors
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
import sys
from collections.abc import Sequence
from pathlib import Path

from odcore import __version__
from odcore.errors import ODCoreError, ParameterError

# One line per family of subcommands (each module owns its own parser code).
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "odcore.cli.info",
    "odcore.cli.data",
    "odcore.cli.release",
    "odcore.cli.knock",
    "odcore.cli.recover",
    "odcore.cli.attack",
    "odcore.cli.audit",
    "odcore.cli.zones",
    "odcore.cli.design",
    "odcore.cli.figures",
    "odcore.cli.facts",
    "odcore.cli.report",
)


def prog_name() -> str:
    """``odlab`` when run as the installed console command, else ``python -m odcore``."""
    return "odlab" if Path(sys.argv[0]).name == "odlab" else "python -m odcore"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog_name(),
        description="OD Privacy Lab engine: weekly origin-destination releases, their differential-privacy "
                    "budget and membership attacks on them.",
    )
    parser.add_argument("--version", action="version", version=f"odcore {__version__}")
    sub = parser.add_subparsers(title="subcommands", metavar="SUBCOMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for command, p in sub.choices.items():
        if not any("--config" in a.option_strings for a in p._actions):
            p.add_argument("--config", default=None, metavar="FILE.json",
                           help="JSON object of settings; keys = flag names in snake_case (explicit flags win)")
        p.set_defaults(_parser=p, _command=command)
    return parser


_UNSET = object()
_NOT_SETTINGS = frozenset({"help", "config", "json", "func"})
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
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        args = _apply_config(args, argv)
        _check_parameters(args)
        return int(args.func(args) or 0)
    except ODCoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _check_parameters(args: argparse.Namespace) -> None:
    """Every known parameter (flag or ``--config`` value) against the one rule of :data:`odcore.data.params.PARAMETERS`,
    before any work and before any output is written."""
    import re

    from odcore.data.params import check_params

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
    """Print ``obj`` as JSON on stdout (numpy scalars and arrays converted)."""
    print(json.dumps(obj, indent=2, default=_json_default, allow_nan=False))


def _json_default(o: object):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "isoformat"):
        return o.isoformat()
    raise TypeError(f"cannot serialise {type(o).__name__} to JSON")
