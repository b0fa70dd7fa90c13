"""Release + utility for one week with 1 million OD pairs: wall time and peak memory.

Baseline (same run): the least any per-metric release must do — ``groupby(week, origin, destination).size()``,
one Laplace draw per pair and a ``>=`` comparison — so the ratio shows what validation, canonical ordering (seed
reproducibility independent of row order), duplicate accounting, exact release probabilities and (user-level)
contribution bounding cost on top.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks import best_of, peak_mib


def _week(n_pairs: int, mean_users: float = 3.0, users: int = 100_000, seed: int = 0) -> pd.DataFrame:
    """One week, ``n_pairs`` distinct OD pairs on a 1000 x 1000 cell grid, ~mean_users distinct users per pair."""
    rng = np.random.default_rng(seed)
    counts = rng.geometric(1.0 / mean_users, n_pairs)
    pid = np.repeat(np.arange(n_pairs, dtype=np.int64), counts)
    user = rng.integers(0, users, len(pid))
    df = pd.DataFrame({"week": np.zeros(len(pid), np.int64), "user": user, "origin": pid // 1000,
                       "destination": pid % 1000})
    return df.drop_duplicates(ignore_index=True)


def _baseline(pairs: pd.DataFrame, eps: float, tau: float, seed: int) -> pd.DataFrame:
    c = pairs.groupby(["week", "origin", "destination"]).size().reset_index(name="count")
    noisy = c["count"].to_numpy() + np.random.default_rng(seed).laplace(0.0, 1.0 / eps, len(c))
    c["released"] = noisy >= tau
    return c


def run(quick: bool) -> list[dict]:
    from odcore.privacy.release import ReleaseConfig, release
    from odcore.privacy.utility import release_utility

    n_pairs = 100_000 if quick else 1_000_000
    repeat = 1 if quick else 2
    pairs = _week(n_pairs)
    n_rows = len(pairs)
    per_metric = ReleaseConfig(epsilon=0.66, threshold=5)
    user_level = ReleaseConfig(epsilon=0.66, threshold=5, mode="user_level", max_pairs=10)
    label = f"{n_pairs:,} OD pairs, {n_rows:,} user-pairs, 1 week"

    t_base, _ = best_of(lambda: _baseline(pairs, 0.66, 5, 0), repeat)
    t_pm, table = best_of(lambda: release(pairs, per_metric, rng=0), repeat)
    t_ul, _ = best_of(lambda: release(pairs, user_level, rng=0), repeat)
    t_ut, util = best_of(lambda: release_utility(table), repeat)
    m_base = peak_mib(lambda: _baseline(pairs, 0.66, 5, 0))
    m_pm = peak_mib(lambda: release(pairs, per_metric, rng=0))
    m_ul = peak_mib(lambda: release(pairs, user_level, rng=0))
    input_mib = pairs.memory_usage(deep=True).sum() / 2**20
    assert util["pairs_total"] == n_pairs

    rows = [
        {"case": f"baseline groupby+laplace ({label})", "metric": "wall", "value": t_base, "unit": "s",
         "baseline": None, "ratio": None, "note": f"best of {repeat}"},
        {"case": f"release per_metric ({label})", "metric": "wall", "value": t_pm, "unit": "s",
         "baseline": "baseline groupby+laplace", "ratio": t_pm / t_base, "note": f"best of {repeat}"},
        {"case": f"release user_level max_pairs=10 ({label})", "metric": "wall", "value": t_ul, "unit": "s",
         "baseline": "baseline groupby+laplace", "ratio": t_ul / t_base,
         "note": "incl. random bounding of each user to 10 pairs"},
        {"case": f"release_utility ({label})", "metric": "wall", "value": t_ut, "unit": "s", "baseline": None,
         "ratio": None, "note": f"published {util['pairs_published']:,} pairs"},
        {"case": f"baseline groupby+laplace ({label})", "metric": "peak traced memory", "value": m_base,
         "unit": "MiB", "baseline": None, "ratio": None, "note": f"input table {input_mib:.0f} MiB"},
        {"case": f"release per_metric ({label})", "metric": "peak traced memory", "value": m_pm, "unit": "MiB",
         "baseline": "baseline groupby+laplace", "ratio": m_pm / m_base, "note": "tracemalloc peak"},
        {"case": f"release user_level max_pairs=10 ({label})", "metric": "peak traced memory", "value": m_ul,
         "unit": "MiB", "baseline": "baseline groupby+laplace", "ratio": m_ul / m_base, "note": "tracemalloc peak"},
    ]
    return rows
