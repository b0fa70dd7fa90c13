"""``python -m odcore info``: versions and where the engine looks for data."""

from __future__ import annotations

import argparse
import os

from odcore import __version__
from odcore.cli import print_json
from odcore.paths import SAMPLE_DATA_DIR


def run(args: argparse.Namespace) -> int:
    info = {
        "version": __version__,
        "cores": os.cpu_count(),
        "sample_data": sorted(p.name for p in SAMPLE_DATA_DIR.glob("*") if p.is_file()),
    }
    if args.json:
        print_json(info)
    else:
        for k, v in info.items():
            print(f"{k}: {v}")
    return 0
