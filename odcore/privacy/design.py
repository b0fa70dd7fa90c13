"""The release designer: from a goal in policy words to settings (m, noise scale, threshold) and what they keep.

A goal is one of (:class:`GoalKind`):

``week``
    "ε per person per week <= X, with δ <= D": the tight ε of one week's release (the m-fold composition of Laplace
    with parameter ε/m, :func:`odcore.privacy.accounting.user_level_budget`) is <= X and its δ, partition selection
    included, is <= D.
``total``
    "over W weeks, ε per person <= X (δ <= D)": the same for the (W·m)-fold composition (the upper end of the
    guaranteed bracket, the figure ``budget --mode user_level`` reports).
``attack``
    "an attacker who knows k of a person's trips is right at most p of the time" (equal priors, one week): the
    best attacker against the bounded release (who also knows which min(k, m) pairs were kept) has success
    ½ + ½·TV with TV <= TV(min(k, m)-fold Laplace(ε/m)) + δ_ps (the chance a pair only the person makes is
    published); that bound must be <= p, and δ <= D as above.

Neighbouring relation throughout: add or remove one person's whole contribution (see
:func:`odcore.privacy.accounting.user_level_budget`). δ is split in two equal halves: D/2 for the Laplace part (the
``delta`` passed to the budget) and D/2 for partition selection, which fixes the threshold
(:func:`odcore.privacy.accounting.default_user_threshold`; over W weeks for the ``total`` goal).

Search: for each candidate m, the largest ε (i.e. the smallest noise scale m/ε) meeting the goal (bisection; every
figure is monotone in ε). On the loaded week each candidate is released (seeded bounding and noise) and the one that
publishes the most user-trips wins — a choice that **uses the data** and is not covered by the guarantee; the
data-independent default m = :data:`DEFAULT_MAX_PAIRS` is always reported beside it. The reported budget is exactly
``user_level_budget`` on the chosen settings, i.e. what ``python -m odcore budget --mode user_level --epsilon ε
--max-pairs m --threshold τ --weeks W --delta D/2`` prints (tested).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np
import pandas as pd

from odcore.errors import ParameterError, check_int, check_positive
from odcore.privacy import pld
from odcore.privacy.accounting import (
    TIGHT_K_MAX,
    USER_GRID_POINTS,
    default_user_threshold,
    partition_selection_delta,
    tight_epsilon,
    user_level_budget,
)
from odcore.privacy.release import (
    Mode,
    PreparedPairs,
    ReleaseConfig,
    prepare_pairs,
    release_probability,
    release_with_report,
)
from odcore.privacy.utility import noise_dominated, release_utility

__all__ = [
    "CANDIDATE_MAX_PAIRS",
    "DEFAULT_MAX_PAIRS",
    "Design",
    "Goal",
    "GoalKind",
    "WeekIndex",
    "design",
    "design_report",
    "frontier",
    "goal_epsilon",
    "google_point",
    "person_risk",
]

DEFAULT_MAX_PAIRS = 10
"""Data-independent contribution bound (the dashboard's default, fixed before looking at any data)."""

CANDIDATE_MAX_PAIRS = (1, 2, 3, 5, 8, 10, 15, 20, 30, 40, 50)
"""Values of m the designer tries when it tunes m on the data."""

GOOGLE_EPSILON, GOOGLE_THRESHOLD = 0.66, 100   # Bassolas et al.'s per-metric setting


class GoalKind(StrEnum):
    """What the goal bounds."""

    WEEK = "week"
    TOTAL = "total"
    ATTACK = "attack"


@dataclass(frozen=True)
class Goal:
    """A goal in the words policy staff use (see the module docstring).

    Parameters
    ----------
    kind:
        :class:`GoalKind` or its value.
    epsilon:
        X, the largest ε per person (per week for ``week``, over ``weeks`` for ``total``); unused for ``attack``.
    delta:
        D, the largest δ (partition selection included), in (0, 1).
    weeks:
        W, the number of weekly releases the ``total`` budget covers (also reported for the others).
    known_trips, success:
        k and p of the ``attack`` goal (k >= 1 trips known, p in (0.5, 1)).
    """

    kind: GoalKind = GoalKind.WEEK
    epsilon: float | None = 1.0
    delta: float = 1e-6
    weeks: int = 52
    known_trips: int | None = None
    success: float | None = None

    def __post_init__(self) -> None:
        try:
            kind = GoalKind(self.kind)
        except ValueError:
            raise ParameterError(f"goal must be one of {', '.join(g.value for g in GoalKind)}, "
                                 f"got goal={self.kind!r}.") from None
        object.__setattr__(self, "kind", kind)
        d = float(self.delta) if isinstance(self.delta, (int, float)) else math.nan
        if not 0 < d < 1:
            raise ParameterError(f"target delta must be in (0, 1), got delta={self.delta!r}.")
        object.__setattr__(self, "delta", d)
        object.__setattr__(self, "weeks", check_int("weeks", self.weeks, minimum=1))
        if kind is GoalKind.ATTACK:
            if self.known_trips is None or self.success is None:
                raise ParameterError("goal attack needs known_trips (k >= 1) and success (p in (0.5, 1)), got "
                                     f"known_trips={self.known_trips!r}, success={self.success!r}.")
            object.__setattr__(self, "known_trips", check_int("known_trips", self.known_trips, minimum=1))
            p = float(self.success)
            if not 0.5 < p < 1:
                raise ParameterError(f"success must be in (0.5, 1) (0.5 is a coin flip), got success={self.success!r}.")
            object.__setattr__(self, "success", p)
            object.__setattr__(self, "epsilon", None)
        else:
            if self.epsilon is None:
                raise ParameterError(f"goal {kind.value} needs a target epsilon > 0, got epsilon=None.")
            object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))

    @property
    def pld_delta(self) -> float:
        """The half of D given to the Laplace part (the ``--delta`` of ``budget``)."""
        return self.delta / 2

    @property
    def partition_delta(self) -> float:
        """Partition-selection δ allowed: −expm1(−D/2), so that its cost η = −log(1 − δ_ps) is exactly D/2."""
        return -math.expm1(-self.delta / 2)

    def words(self) -> str:
        """The goal as a sentence."""
        if self.kind is GoalKind.WEEK:
            return f"ε per person and week ≤ {self.epsilon:g} (δ ≤ {self.delta:.0e})"
        if self.kind is GoalKind.TOTAL:
            return f"ε per person over {self.weeks} weeks ≤ {self.epsilon:g} (δ ≤ {self.delta:.0e})"
        return (f"an attacker who knows {self.known_trips} of a person's trips in a week is right at most "
                f"{100 * self.success:.3g} % of the time (δ ≤ {self.delta:.0e})")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kind"] = self.kind.value
        d["words"] = self.words()
        return d


# ---------------------------------------------------------------------------------------------------------------
# Privacy side: the largest ε that meets the goal, for one m
# ---------------------------------------------------------------------------------------------------------------

def threshold_for(goal: Goal, epsilon: float, max_pairs: int) -> int:
    """Threshold of a design: smallest whole τ with partition-selection δ <= D/2 (over W weeks for ``total``)."""
    weeks = goal.weeks if goal.kind is GoalKind.TOTAL else 1
    return default_user_threshold(epsilon, max_pairs, goal.partition_delta, weeks)


# The privacy side depends on numbers only (not on the data or the seed): remembered, so that a new seed, week or
# dataset re-runs only the releases.
@lru_cache(maxsize=4096)
def _tight(delta: float, k: int, epsilon: float) -> float:
    return float(tight_epsilon(delta, k, epsilon))


@lru_cache(maxsize=256)
def _budget(epsilon: float, max_pairs: int, threshold: float, weeks: int, delta: float) -> dict:
    return user_level_budget(epsilon, max_pairs, threshold, weeks, delta)


@lru_cache(maxsize=4096)
def achieved(goal: Goal, epsilon: float, max_pairs: int, *, coarse: bool = False) -> float:
    """The goal's figure at release ε and m: ε per week, ε over W weeks (upper end of the bracket, on the same loss
    grid as :func:`odcore.privacy.accounting.user_level_budget` unless ``coarse``), or the attack success bound."""
    e1 = epsilon / max_pairs
    if goal.kind is GoalKind.WEEK:
        return float(_tight(goal.pld_delta, max_pairs, e1))
    if goal.kind is GoalKind.TOTAL:
        k = max_pairs * goal.weeks
        if k <= TIGHT_K_MAX and not coarse:
            return float(_tight(goal.pld_delta, k, e1))
        h = min(1e-3, 2.0 * goal.weeks * epsilon / (2**14 if coarse else USER_GRID_POINTS))
        return min(pld.composed_epsilon_bounds(goal.pld_delta, max_pairs, e1, goal.weeks, interval=h)[1],
                   goal.weeks * epsilon)
    k = min(goal.known_trips, max_pairs)
    tv = float(pld.hockey_stick_delta(0.0, k, e1))
    ps = partition_selection_delta(epsilon, threshold_for(goal, epsilon, max_pairs), max_pairs, 1)
    return min(0.5 + 0.5 * (tv + ps), 1.0)


@lru_cache(maxsize=1024)
def goal_epsilon(goal: Goal, max_pairs: int, *, final: bool = True) -> float:
    """Largest release ε (noise scale m/ε) for which the goal holds at this m, by bisection (to 0.2 %).

    The search uses a coarse loss grid for the many-week bracket (a valid but looser upper bound); with ``final``
    the result is checked on the budget's own grid (the figure ``budget`` reports) and stepped down if needed.
    """
    m = check_int("max_pairs", max_pairs, minimum=1)
    target = goal.success if goal.kind is GoalKind.ATTACK else goal.epsilon

    def ok(e: float) -> bool:
        return achieved(goal, e, m, coarse=True) <= target

    # a start that meets the goal: tight <= basic, which is ε per week and W·ε over W weeks
    if goal.kind is GoalKind.ATTACK:
        lo = 1e-4
    else:
        lo = goal.epsilon if goal.kind is GoalKind.WEEK else goal.epsilon / goal.weeks
    if not ok(lo):
        raise ParameterError(f"goal {goal.words()!r} cannot be met at max_pairs={m} (even ε = {lo:g}).")
    hi = target if goal.kind is not GoalKind.ATTACK else 1.0
    hi = max(hi, lo * 2)
    while ok(hi) and hi < 50 * m:          # tight <= basic, so the answer is >= X; grow until it fails
        lo, hi = hi, hi * 2
    while hi / lo > 1.002:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    e = lo
    if not final:
        return e
    # final check with the budget's own grid (the figure reported); step down if the finer grid disagrees
    for _ in range(20):
        if achieved(goal, e, m) <= target:
            return e
        e *= 0.995
    raise ParameterError(f"goal {goal.words()!r}: the search at max_pairs={m} did not converge.")


# ---------------------------------------------------------------------------------------------------------------
# Utility side: what a design keeps on the loaded week
# ---------------------------------------------------------------------------------------------------------------

def release_keeps(week_pairs, epsilon: float, threshold: float, max_pairs: int | None,
                  rng=None) -> dict:
    """Run the release on one week's pairs (seeded) and say what it keeps.

    Returns ``pairs_published``, ``trips_published`` (user-trips, before bounding, on published pairs), their
    fractions, ``mean_relative_error`` (published pairs, against the true count before bounding) and
    ``noise_dominated_published``: published pairs whose true count is under τ/2 (mostly noise).
    """
    mode = Mode.PER_METRIC if max_pairs is None else Mode.USER_LEVEL
    cfg = ReleaseConfig(epsilon=epsilon, threshold=threshold, mode=mode, max_pairs=max_pairs)
    table = release_with_report(week_pairs, cfg, rng=rng).table
    u = release_utility(table)
    return {"pairs_total": u["pairs_total"], "pairs_published": u["pairs_published"],
            "pairs_published_frac": u["pairs_published_frac"], "trips_total": u["trips_total"],
            "trips_published": u["trips_published"], "trips_published_frac": u["trips_published_frac"],
            "mean_relative_error": u["mean_relative_error"],
            "noise_dominated_published": noise_dominated(table, threshold)}


@dataclass(frozen=True)
class Design:
    """One design: settings, budget (from :func:`odcore.privacy.accounting.user_level_budget`) and what it keeps."""

    goal: Goal
    max_pairs: int
    epsilon: float
    threshold: int
    budget: dict
    keeps: dict
    tuned_on_data: bool
    goal_value: float

    def to_dict(self) -> dict:
        b = self.budget
        return {
            "goal": self.goal.to_dict(),
            "goal_met": bool(self.goal_value <= (self.goal.success if self.goal.kind is GoalKind.ATTACK
                                                 else self.goal.epsilon)) and self._delta_ok(),
            "goal_value": self.goal_value,
            "max_pairs": self.max_pairs,
            "epsilon": self.epsilon,
            "noise_scale": self.max_pairs / self.epsilon,
            "threshold": self.threshold,
            "delta": self.goal.pld_delta,
            "weeks": self.goal.weeks,
            "epsilon_user_week": b["epsilon_user_week_tight"],
            "delta_user_week": b["delta_user_week_tight"],
            "epsilon_user_total": b["epsilon_user_total_tight"],
            "epsilon_user_total_lower": b["epsilon_user_total_tight_lower"],
            "delta_user_total": b["delta_user_total_tight"],
            "delta_partition_week": b["delta_partition_week"],
            "tuned_on_data": self.tuned_on_data,
            **self.keeps,
            "budget_command": (f"python -m odcore budget --mode user_level --epsilon {self.epsilon!r} --max-pairs "
                               f"{self.max_pairs} --threshold {self.threshold} --weeks {self.goal.weeks} --delta "
                               f"{self.goal.delta!r}"),   # budget gives half of it to the noise, as here
        }

    def _delta_ok(self) -> bool:
        key = "delta_user_total_tight" if self.goal.kind is GoalKind.TOTAL else "delta_user_week_tight"
        return self.budget[key] <= self.goal.delta * (1 + 1e-9)


def _design_at(goal: Goal, m: int, week_pairs, rng, tuned: bool) -> Design:
    e = goal_epsilon(goal, m)
    tau = threshold_for(goal, e, m)
    b = dict(_budget(e, m, tau, goal.weeks, goal.pld_delta))
    keeps = release_keeps(week_pairs, e, tau, m, rng=rng)
    value = {GoalKind.WEEK: b["epsilon_user_week_tight"], GoalKind.TOTAL: b["epsilon_user_total_tight"]}.get(
        goal.kind)
    return Design(goal, m, e, tau, b, keeps, tuned, achieved(goal, e, m) if value is None else float(value))


class WeekIndex:
    """One week's unique (user, pair) rows indexed once, independent of any seed: the week prepared for the seeded
    releases (:func:`odcore.privacy.release.prepare_pairs`: deduplicated, in canonical (pair, user) order, counted), each
    row's pair and user codes, the raw counts and the user groups' layout. A new seed then only ranks the rows
    (:class:`_Ranked`).

    ``week_pairs``: DataFrame[week, user, origin, destination] of one week, or the same already prepared.
    """

    def __init__(self, week_pairs: pd.DataFrame | PreparedPairs) -> None:
        prep = week_pairs if isinstance(week_pairs, PreparedPairs) else prepare_pairs(week_pairs)
        self.prepared = prep
        raw, self.pid = prep.counts[3], prep.counts[4]      # per pair: distinct users; per row: its pair
        uid = prep.pairs.u
        # small unsigned codes: numpy's stable sort of <= 16-bit integers is a radix sort
        self.uid = uid.astype(np.uint16 if len(uid) == 0 or uid.max() < 2**16 else np.int64)
        sizes = np.bincount(uid) if len(uid) else np.zeros(0, dtype=np.int64)
        # position in the user-sorted order -> position of its user's first row there
        self.first = np.repeat(np.r_[0, np.cumsum(sizes)[:-1]], sizes) if len(uid) else np.zeros(0, np.int64)
        self.n_pairs = len(raw)
        self.raw = raw.astype(float)

    def __len__(self) -> int:
        return len(self.pid)


def _index(week_pairs: pd.DataFrame | WeekIndex) -> WeekIndex:
    return week_pairs if isinstance(week_pairs, WeekIndex) else WeekIndex(week_pairs)


class _Ranked:
    """One week's unique (user, pair) rows with a uniformly random rank within each user: keeping the rows of
    rank < m is a uniformly random subset of min(m, n) pairs per person (the rule of
    :func:`odcore.privacy.release.bound_contributions`), nested across m, so every m is counted with one sort.

    The rank orders each user's rows as one uniformly random permutation (``rng.permutation``) of all rows, in the
    canonical (pair, user) order of :func:`odcore.privacy.release.prepare_pairs` (so it does not depend on the input's row
    order), orders them: the rows in that permutation, then a stable radix sort of their user codes (no sort of
    random keys)."""

    def __init__(self, week: WeekIndex | pd.DataFrame, rng) -> None:
        week = _index(week)
        rng = np.random.default_rng(rng)
        n = len(week)
        shuffled = rng.permutation(n)
        order = shuffled[np.argsort(week.uid[shuffled], kind="stable")]
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - week.first
        self.week, self.rank, self.pid, self.n_pairs, self.raw = week, rank, week.pid, week.n_pairs, week.raw
        # rows by rank (stable radix sort of small ranks): the rows of rank < m are a prefix
        by_rank = np.argsort(np.minimum(rank, 2**16 - 1).astype(np.uint16), kind="stable")
        self._pid_by_rank = self.pid[by_rank]
        self._rank_sorted = rank[by_rank]
        self._counts: dict[int, np.ndarray] = {}
        self._hist: dict[int | None, tuple[np.ndarray, np.ndarray]] = {}

    def counts(self, m: int | None) -> np.ndarray:
        """Distinct users per pair after keeping each user's rows of rank < m (None: no bounding)."""
        if m is None:
            return self.raw
        if m not in self._counts:        # from the largest m counted below it: only the rows in between
            below = [k for k in self._counts if k < m]
            k0 = max(below) if below else 0
            base = self._counts[k0] if below else np.zeros(self.n_pairs)
            lo, hi = np.searchsorted(self._rank_sorted, [k0, m])
            self._counts[m] = base + np.bincount(self._pid_by_rank[lo:hi], minlength=self.n_pairs)
        return self._counts[m]

    def _histogram(self, m: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Per true count c = 0, 1, ...: how many pairs have it, and their raw user-trips."""
        if m not in self._hist:
            c = self.counts(m).astype(np.int64)
            self._hist[m] = (np.bincount(c).astype(float), np.bincount(c, weights=self.raw))
        return self._hist[m]

    def expected(self, m: int | None, epsilon: float, threshold: float) -> tuple[float, float]:
        """(expected share of user-trips published, expected pairs published), exact given the bounding:
        ``Σ raw·P(true + Lap(m/ε) >= τ) / Σ raw`` and ``Σ P(...)`` over pairs with true count > 0, summed per
        distinct true count (counts repeat a lot: one probability per value)."""
        n_at, raw_at = self._histogram(m)
        p = release_probability(np.arange(1, len(n_at)), epsilon, threshold, 1 if m is None else m)
        total = self.raw.sum()
        return (float((raw_at[1:] * p).sum() / total) if total else math.nan), float((n_at[1:] * p).sum())


def design(goal: Goal, week_pairs: pd.DataFrame | WeekIndex, *, max_pairs: int | None = None,
           candidates=CANDIDATE_MAX_PAIRS, rng=None, _ranked: _Ranked | None = None
           ) -> tuple[Design, Design, pd.DataFrame]:
    """Design a release that meets ``goal`` on one week of unique (user, pair) rows.

    Parameters
    ----------
    goal:
        :class:`Goal`.
    week_pairs:
        DataFrame[week, user, origin, destination] of the week the utility is measured on, or its
        :class:`WeekIndex` (built once per week: a new seed then skips that work).
    max_pairs:
        Fix m (no tuning on the data); None tunes m over ``candidates``: for each, the largest ε meeting the goal
        (coarse search) and the expected share of user-trips published (exact given one seeded bounding); the m
        with the largest share wins (ties: the smaller m).
    rng:
        Seed of the bounding and noise (an int or None).

    Returns
    -------
    (chosen, default, candidates)
        The chosen :class:`Design` and the data-independent one (m = :data:`DEFAULT_MAX_PAIRS`, or the fixed m),
        each with its exact budget and a seeded release on the week; and a DataFrame of the candidates tried
        (max_pairs, epsilon, threshold, trips_published_frac, pairs_published_expected).
    """
    if max_pairs is not None:
        prep = week_pairs.prepared if isinstance(week_pairs, WeekIndex) else week_pairs
        d = _design_at(goal, check_int("max_pairs", max_pairs, minimum=1), prep, rng, False)
        return d, d, pd.DataFrame([{"max_pairs": d.max_pairs, "epsilon": d.epsilon, "threshold": d.threshold,
                                    "trips_published_frac": d.keeps["trips_published_frac"],
                                    "pairs_published_expected": float("nan")}])
    ms = sorted({check_int("candidate max_pairs", c, minimum=1) for c in candidates} | {DEFAULT_MAX_PAIRS})
    ranked = _ranked or _Ranked(week_pairs, rng)
    prep = ranked.week.prepared            # validated and counted once for the two seeded releases below
    rows = []
    for m in ms:
        e = goal_epsilon(goal, m, final=False)
        tau = threshold_for(goal, e, m)
        frac, n_pub = ranked.expected(m, e, tau)
        rows.append({"max_pairs": m, "epsilon": e, "threshold": tau, "trips_published_frac": frac,
                     "pairs_published_expected": n_pub})
    table = pd.DataFrame(rows)
    best_m = int(table.sort_values(["trips_published_frac", "max_pairs"], ascending=[False, True],
                                   kind="stable").iloc[0]["max_pairs"])
    best = _design_at(goal, best_m, prep, rng, True)
    default = best if best_m == DEFAULT_MAX_PAIRS else _design_at(goal, DEFAULT_MAX_PAIRS, prep, rng, False)
    if default is best:
        default = Design(**{**best.__dict__, "tuned_on_data": False})
    return best, default, table


# ---------------------------------------------------------------------------------------------------------------
# Frontier: utility against per-person ε for several m, and Google's per-metric point
# ---------------------------------------------------------------------------------------------------------------

def frontier(week_pairs: pd.DataFrame | WeekIndex, *, max_pairs=(1, 5, 10, 20, 50), epsilons=None, delta: float = 1e-6,
             rng=None, _ranked: _Ranked | None = None) -> pd.DataFrame:
    """Expected share of user-trips published against ε per person and week, for several m.

    For each m the week's pairs are bounded once (seeded) and, for each release ε, the threshold is the smallest
    whole τ with one-week partition-selection δ <= D/2 and the x value is the tight ε per person and week at δ = D/2
    (so every point is an (ε, D) guarantee per person and week). The y value is exact given one seeded bounding
    (nested across m): ``Σ raw·P(true + Lap(m/ε) >= τ) / Σ raw`` (:func:`odcore.privacy.release.release_probability`).

    Returns
    -------
    DataFrame[max_pairs, epsilon, threshold, epsilon_user_week, trips_published_frac, pairs_published_expected]
    """
    eps_grid = np.geomspace(0.1, 20.0, 12) if epsilons is None else np.asarray(epsilons, dtype=float)
    goal = Goal(GoalKind.WEEK, epsilon=1.0, delta=delta, weeks=1)
    ranked = _ranked or _Ranked(week_pairs, rng)
    rows = []
    for m in max_pairs:
        m = check_int("max_pairs", m, minimum=1)
        for e in eps_grid:
            tau = threshold_for(goal, float(e), m)
            frac, n_pub = ranked.expected(m, float(e), tau)
            rows.append({"max_pairs": m, "epsilon": float(e), "threshold": tau,
                         "epsilon_user_week": float(_tight(goal.pld_delta, m, float(e) / m)),
                         "trips_published_frac": frac, "pairs_published_expected": n_pub})
    return pd.DataFrame(rows)


def google_point(week_pairs: pd.DataFrame | WeekIndex, user_trips: np.ndarray, *, delta: float = 1e-6,
                 _ranked: _Ranked | None = None) -> dict:
    """Google's per-metric setting (ε 0.66, τ 100) on the same axes: expected share of user-trips published, and
    the per-person ε per week (tight, δ = D/2) of a typical (median unique trips) and the busiest person."""
    raw = (_ranked.week if _ranked else _index(week_pairs)).raw   # raw counts do not depend on any seed
    p = release_probability(raw, GOOGLE_EPSILON, GOOGLE_THRESHOLD)
    trips = np.asarray(user_trips, dtype=int)
    n_typ = int(max(1, round(float(np.median(trips))))) if trips.size else 1
    n_max = int(max(1, trips.max())) if trips.size else 1
    eps = {n: float(_tight(delta / 2, n, GOOGLE_EPSILON)) if n <= 400 else n * GOOGLE_EPSILON
           for n in {n_typ, n_max}}
    return {"epsilon": GOOGLE_EPSILON, "threshold": GOOGLE_THRESHOLD, "typical_trips": n_typ, "max_trips": n_max,
            "epsilon_user_week_typical": eps[n_typ], "epsilon_user_week_max": eps[n_max],
            "trips_published_frac": float((raw * p).sum() / raw.sum()) if raw.sum() else math.nan}


# ---------------------------------------------------------------------------------------------------------------
# The whole report (CLI ``design --json``, the designer page, the guarantee sheet)
# ---------------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=1024)
def person_risk(epsilon: float, max_pairs: int, threshold: float, trips: int) -> float:
    """Upper bound on the best attacker's success (equal priors, one week) for a person with ``trips`` unique trips
    who is fully known to the attacker (:func:`odcore.privacy.attack.bounded_success_curve` with the threshold)."""
    from odcore.privacy.attack import bounded_success_curve

    n = check_int("trips", trips, minimum=0)
    return float(bounded_success_curve(epsilon, max_pairs, n, threshold)[n])


def design_report(goal: Goal, week_pairs: pd.DataFrame | WeekIndex, user_trips, *, week: int = 0,
                  max_pairs: int | None = None, rng=None, with_frontier: bool = False) -> dict:
    """Everything the designer says, as a JSON-able dict.

    Top-level keys are the chosen design's (:meth:`Design.to_dict`: ``max_pairs``, ``noise_scale``,
    ``threshold``, ``epsilon_user_week``, ``delta_user_week``, ``epsilon_user_total``, ``delta_user_total``,
    ``weeks``, ``pairs_published``, ``trips_published``, ``mean_relative_error``, ``noise_dominated_published``,
    ``goal``, ...), plus ``week``, ``typical_trips`` / ``busy_trips`` (median and maximum unique trips per person in
    the week) and the attack bound for each (``attack_success_typical`` / ``attack_success_busy``), ``default``
    (the data-independent design, same keys), ``candidates`` (m tried), ``google`` (:func:`google_point`),
    ``tuning_note`` and, with ``with_frontier``, ``frontier`` (:func:`frontier` rows).
    """
    week_pairs = _index(week_pairs)
    ranked = _Ranked(week_pairs, rng)             # one ranking for design and frontier
    best, default, cands = design(goal, week_pairs, max_pairs=max_pairs, rng=rng, _ranked=ranked)
    trips = np.asarray(user_trips, dtype=int)
    n_typ = round(float(np.median(trips))) if trips.size else 0
    n_busy = int(trips.max()) if trips.size else 0

    def with_risk(d: Design) -> dict:
        out = d.to_dict()
        out["attack_success_typical"] = person_risk(d.epsilon, d.max_pairs, d.threshold, n_typ)
        out["attack_success_busy"] = person_risk(d.epsilon, d.max_pairs, d.threshold, n_busy)
        return out

    rep = {**with_risk(best), "week": int(week), "typical_trips": n_typ, "busy_trips": n_busy,
           "default": with_risk(default), "candidates": cands.to_dict(orient="records"),
           "google": google_point(week_pairs, trips, delta=goal.delta, _ranked=ranked)}
    if best.tuned_on_data:
        rep["tuning_note"] = (f"max_pairs = {best.max_pairs} was chosen among {len(cands)} values because it "
                              f"publishes the most user-trips on this week's data: that choice itself uses the data "
                              f"and is not covered by the guarantee. The data-independent default max_pairs = "
                              f"{DEFAULT_MAX_PAIRS} is given under 'default'; fix max_pairs to avoid tuning.")
    else:
        rep["tuning_note"] = f"max_pairs = {best.max_pairs} was fixed before looking at the data."
    if with_frontier:
        rep["frontier"] = frontier(week_pairs, delta=goal.delta, rng=rng, _ranked=ranked).to_dict(orient="records")
    return rep
