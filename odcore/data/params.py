"""The one rule per parameter name (:data:`PARAMETERS`) and its checks, used by every subcommand (flags and
``--config`` values) and by the engine's configs. Standard library only, so ``python -m odcore`` checks its flags
without importing numpy or pandas; :mod:`odcore.data.validate` re-exports these names.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from odcore.errors import ParameterError

__all__ = ["MAX_MONTE_CARLO_DRAWS", "PARAMETERS", "Rule", "check_monte_carlo_work", "check_param", "check_params"]


# ----------------------------------------------------------------------------------------------------------------
# Parameters
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """Accepted values of one parameter: a number (``integer`` or not) in [``lo``, ``hi``] (``lo_open``: > lo)."""

    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False
    why: str = ""

    def _num(self, v: float) -> str:
        return f"{int(v):,}" if self.integer or (v == int(v) and abs(v) >= 1e4) else f"{v:g}"

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        lo = ("> " if self.lo_open else ">= ") + self._num(self.lo)
        hi = ("< " if self.hi_open else "<= ") + self._num(self.hi)
        return f"{kind} {lo} and {hi}" + (f" ({self.why})" if self.why else "")


PARAMETERS: dict[str, Rule] = {
    # 1e-6: the noise scale 1/epsilon is then a million people (nothing can pass a threshold), and smaller values
    # (denormal floats such as 5e-324) underflow to 0 in the accounting; 50: e^epsilon must stay a finite float
    "epsilon": Rule(1e-6, 50, why="below 1e-6 the noise swamps any count, above 50 there is no privacy"),
    "delta": Rule(0, 1, lo_open=True, hi_open=True),
    "threshold": Rule(1, 10_000, why="a count of distinct users"),
    "cell_km2": Rule(0.01, 10_000, why="grid cell area in km²"),
    "k_max": Rule(0, 2000, integer=True),
    "trips": Rule(1, 10_000, integer=True, why="unique trips of one user in one week"),
    "weeks": Rule(1, 520, integer=True, why="ten years of weekly releases"),
    "week": Rule(0, 520, integer=True),
    "resolution": Rule(2, 1024, integer=True, why="memory grows with resolution x threshold"),
    "monte_carlo": Rule(1, 1_000_000, integer=True, why="repetitions per k; 10^6 at k_max 70 takes minutes"),
    "seed": Rule(0, 2**63 - 1, integer=True, why="numpy seeds are non-negative"),
    "max_pairs": Rule(1, 10_000, integer=True),
    "users": Rule(1, 100_000_000, integer=True, why="synth writes big cities in chunks to a folder"),
    "chunk_users": Rule(1, 5_000_000, integer=True, why="memory of one chunk: ~1.5 KB per user-week"),
    "extent_km": Rule(0.5, 500),
    "time_offset": Rule(-1e9, 1e9, why="seconds (about 31 years either way)"),
    "prior": Rule(0, 1, lo_open=True, hi_open=True),
    "total_interval": Rule(0, 1),
    # Knock Knock (python -m odcore knock / knock-defences, odcore.knock.experiment's configs)
    "m": Rule(1, 10_000, integer=True, why="users per group: each released aggregate sums m users"),
    "alpha": Rule(0, 1, lo_open=True, why="fraction of the users the adversary knows"),
    "targets": Rule(1, 10_000, integer=True, why="target users, each a full game"),
    "n_train": Rule(1, 100_000, integer=True, why="groups; memory grows with groups x ROIs x slots"),
    "n_test": Rule(1, 100_000, integer=True, why="groups; memory grows with groups x ROIs x slots"),
    "beta": Rule(1, 100_000, integer=True, why="groups; memory grows with groups x ROIs x slots"),
    "n_groups": Rule(1, 100_000, integer=True, why="groups; memory grows with groups x ROIs x slots"),
    "period_slots": Rule(1, 52_704, integer=True, why="time slots of one released period: a year of 10-minute slots"),
    "inference_period": Rule(0, 10_000, integer=True),
    "observation_stride": Rule(1, 10_000, integer=True),
    "kappa": Rule(1, 52_704, integer=True, why="Fourier coefficients kept, at most one per slot"),
    "slot_minutes": Rule(1, 10_080, integer=True, why="at most one week"),
    "grid_side": Rule(1, 1000, integer=True, why="rows or columns of the location grid"),
    "n_jobs": Rule(1, 64, integer=True, why="parallel jobs of the random forest"),
    "workers": Rule(1, 64, integer=True, why="processes playing targets in parallel"),
}
"""One rule per parameter name, used by every subcommand (flags and ``--config`` values) and the engine's configs."""

_ALIASES = {"monte_carlo": "monte_carlo", "reps": "monte_carlo", "tau": "threshold", "groups": "n_groups"}


def check_param(name: str, value: Any, *, flag: str | None = None) -> float | int:
    """Return ``value`` as a float (or int) when :data:`PARAMETERS` accepts it, else raise :class:`ParameterError`.

    >>> check_param("epsilon", 0.66)
    0.66
    >>> check_param("seed", -1)
    Traceback (most recent call last):
    ...
    odcore.errors.ParameterError: seed must be an integer >= 0 and <= 9,223,372,036,854,775,807 (numpy seeds are non-negative), got seed=-1.
    """
    rule = PARAMETERS[_ALIASES.get(name, name)]
    label = flag or name
    msg = f"{label} must be {rule.describe()}, got {name}={value!r}."
    if isinstance(value, bool):
        raise ParameterError(msg)
    if rule.integer and isinstance(value, numbers.Integral):
        v: float | int = int(value)
    else:
        try:
            v = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ParameterError(msg) from None
        if not math.isfinite(v) or (rule.integer and v != int(v)):
            raise ParameterError(msg)
        if rule.integer:
            v = int(v)
    too_low = v <= rule.lo if rule.lo_open else v < rule.lo
    too_high = v >= rule.hi if rule.hi_open else v > rule.hi
    if too_low or too_high:
        raise ParameterError(msg)
    return v


MAX_MONTE_CARLO_DRAWS = 2.5e9
"""Laplace draws of one Monte Carlo run (reps x (1 + 2 + ... + k_max)): 10^6 reps at k_max = 70, a few minutes."""


def check_monte_carlo_work(reps: int, k_max: int) -> None:
    """Bound the time of :func:`odcore.privacy.attack.simulate_attack` over k = 0..k_max (memory is chunked)."""
    reps = int(check_param("monte_carlo", reps, flag="monte_carlo (--monte-carlo)"))
    k_max = int(check_param("k_max", k_max, flag="k_max (--k-max)"))
    draws = reps * k_max * (k_max + 1) / 2
    if draws > MAX_MONTE_CARLO_DRAWS:
        most = int(MAX_MONTE_CARLO_DRAWS // max(k_max * (k_max + 1) / 2, 1))
        raise ParameterError(f"--monte-carlo {reps:,} with --k-max {k_max} needs {draws:.3g} noise draws (limit "
                             f"{MAX_MONTE_CARLO_DRAWS:.3g}, minutes of work); use --monte-carlo <= {most:,} or a "
                             "smaller --k-max.")


def check_params(values: dict[str, Any], *, flags: bool = True) -> dict[str, Any]:
    """Check every known parameter of ``values`` (``None`` = not given); return the checked values.

    With ``flags`` the messages name command-line flags (``--monte-carlo``) rather than Python names.
    """
    out = dict(values)
    for k, v in values.items():
        if v is None or _ALIASES.get(k, k) not in PARAMETERS:
            continue
        flag = f"{k} (--{k.replace('_', '-')})" if flags else None
        if isinstance(v, str) and "," in v:   # comma-separated lists (e.g. knock mre --epsilon 0.1,1,10)
            for part in v.split(","):
                if part.strip():
                    check_param(k, part.strip(), flag=flag)
            continue
        out[k] = check_param(k, v, flag=flag)
    return out
