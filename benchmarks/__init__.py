"""Speed and memory benchmarks, run on demand: ``python -m benchmarks [--quick] [-k NAME]``."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any


def best_of(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Best wall time in seconds over ``repeat`` calls of ``fn`` and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_mib(fn: Callable[[], Any]) -> float:
    """Peak memory traced by ``tracemalloc`` (numpy and pandas buffers included) while ``fn`` runs, in MiB."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20
