"""Command line: ``python -m odcore SUBCOMMAND ...``.

Each module in :data:`SUBCOMMAND_MODULES` exposes ``register(subparsers)``, which adds its
subcommands with ``set_defaults(func=...)``; ``func(args)`` returns an exit code. Domain errors
(:class:`odcore.errors.ODCoreError`) are printed as one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence

from odcore import __version__
from odcore.errors import ODCoreError

# One line per family of subcommands (each module owns its own parser code).
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "odcore.cli.info",
    "odcore.cli.data",
    "odcore.cli.release",
    "odcore.cli.knock",
    "odcore.cli.attack",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m odcore",
        description="OD Privacy Lab engine: weekly origin-destination releases, their differential-privacy "
                    "budget and membership attacks on them.",
    )
    parser.add_argument("--version", action="version", version=f"odcore {__version__}")
    sub = parser.add_subparsers(title="subcommands", metavar="SUBCOMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except ODCoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


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
