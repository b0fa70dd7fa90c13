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

Risk goals (:data:`RISK_GOALS`, :mod:`odcore.privacy.risk`): ``tpr`` (the attacker's TPR at FPR α <= r),
``advantage`` (TPR − FPR <= r) and ``posterior`` (belief from prior π <= r), for the attacker who knows k of the
person's trips or the one who knows the whole week, from the exact trade-off curve of the release.

Search: for each candidate m, the largest ε (i.e. the smallest noise scale m/ε) meeting the goal (bisection; every
figure is monotone in ε). Utility: for each candidate, the expected share of pairs and user-trips published and the
expected relative error of published counts, split into contribution bounding and noise
(:func:`odcore.privacy.utility.expected_error`, exact given one seeded bounding). **m is data-independent by default**
(:data:`DEFAULT_MAX_PAIRS`); with ``tune`` it is chosen on the week's data among the *useful* candidates (expected
error <= :data:`USEFUL_ERROR`, at least one pair published) as the one publishing the most user-trips — a choice that
**uses the data**, is not covered by the guarantee, and is said so. The verdict (:func:`verdict`) says whether the
chosen release is useful and, if not, what would change it (:func:`what_would_change`). The reported budget is exactly
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
from odcore.numbers import expected_count_text, percent_text
from odcore.od.pairs import PreparedPairs, prepare_pairs
from odcore.privacy import pld, pld_weeks
from odcore.privacy.accounting import (
    TIGHT_K_MAX,
    USER_GRID_POINTS,
    default_user_threshold,
    partition_selection_delta,
    tight_epsilon,
    user_level_budget,
)
from odcore.privacy.attack import bounded_success_curve
from odcore.privacy.release import (
    Mode,
    ReleaseConfig,
    release_probability,
    release_with_report,
)
from odcore.privacy.risk import Attacker, attacker_words, largest_pair_epsilon, risk_measures, typical_trips
from odcore.privacy.utility import (
    expected_error,
    expected_errors,
    noise_dominated,
    published_error,
    release_utility,
)

__all__ = [
    "CANDIDATE_MAX_PAIRS",
    "DEFAULT_MAX_PAIRS",
    "USEFUL_ERROR",
    "Design",
    "Goal",
    "GoalKind",
    "WeekIndex",
    "design",
    "design_report",
    "frontier",
    "goal_epsilon",
    "google_point",
    "is_useful",
    "person_risk",
    "verdict",
    "verdict_rows",
    "what_would_change",
]

DEFAULT_MAX_PAIRS = 10
"""Data-independent contribution bound (the dashboard's default, fixed before looking at any data)."""

USEFUL_ERROR = 0.10
"""A release is called useful when its published counts are expected to be off by at most 10 % on average
(relative error against the real count, contribution bounding and noise together) and at least one pair is
expected to be published."""

CANDIDATE_MAX_PAIRS = (1, 2, 3, 5, 8, 10, 15, 20, 30, 40, 50)
"""Values of m the designer tries when it tunes m on the data."""

GOOGLE_EPSILON, GOOGLE_THRESHOLD = 0.66, 100   # Bassolas et al.'s per-metric setting


class GoalKind(StrEnum):
    """What the goal bounds."""

    WEEK = "week"
    TOTAL = "total"
    ATTACK = "attack"
    TPR = "tpr"
    ADVANTAGE = "advantage"
    POSTERIOR = "posterior"


RISK_GOALS = frozenset({GoalKind.TPR, GoalKind.ADVANTAGE, GoalKind.POSTERIOR})
"""Goals on the attacker's trade-off curve (:mod:`odcore.privacy.risk`), bounded for the attacker ``Goal.attacker``."""


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
        k and p of the ``attack`` goal (k >= 1 trips known, p in (0.5, 1)); k also for the risk goals' ``known``
        attacker.
    risk:
        The bound of a risk goal: the largest TPR at ``fpr`` (``tpr``), the largest advantage TPR − FPR
        (``advantage``) or the largest posterior from ``prior`` (``posterior``), in (0, 1).
    fpr, prior:
        The false-positive rate the TPR is read at, and the attacker's prior (both in (0, 1); reported for every
        goal).
    attacker:
        ``known`` (knows ``known_trips`` of the person's trips) or ``full`` (knows the person's whole week), see
        :class:`odcore.privacy.risk.Attacker`; for the risk goals.
    """

    kind: GoalKind = GoalKind.WEEK
    epsilon: float | None = 1.0
    delta: float = 1e-6
    weeks: int = 52
    known_trips: int | None = None
    success: float | None = None
    risk: float | None = None
    fpr: float = 0.01
    prior: float = 0.5
    attacker: str = "known"

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
        elif kind in RISK_GOALS:
            self._check_risk(kind)
        else:
            if self.epsilon is None:
                raise ParameterError(f"goal {kind.value} needs a target epsilon > 0, got epsilon=None.")
            object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))

    def _check_risk(self, kind: GoalKind) -> None:
        try:
            att = Attacker(self.attacker)
        except ValueError:
            raise ParameterError(f"attacker must be one of {', '.join(a.value for a in Attacker)}, "
                                 f"got attacker={self.attacker!r}.") from None
        object.__setattr__(self, "attacker", att.value)
        for name in ("fpr", "prior"):
            v = getattr(self, name)
            x = float(v) if isinstance(v, (int, float)) else math.nan
            if not 0 < x < 1:
                raise ParameterError(f"{name} must be in (0, 1), got {name}={v!r}.")
            object.__setattr__(self, name, x)
        r = float(self.risk) if isinstance(self.risk, (int, float)) else math.nan
        floor = {GoalKind.TPR: self.fpr, GoalKind.ADVANTAGE: 0.0, GoalKind.POSTERIOR: self.prior}[kind]
        name = {GoalKind.TPR: "tpr", GoalKind.ADVANTAGE: "advantage", GoalKind.POSTERIOR: "posterior"}[kind]
        if not floor < r < 1:
            raise ParameterError(f"goal {kind.value} needs a bound in ({floor:g}, 1) (at or under {floor:g} is "
                                 f"what guessing gives), got {name}={self.risk!r}.")
        object.__setattr__(self, "risk", r)
        if att.value == "known":
            if self.known_trips is None:
                raise ParameterError(f"goal {kind.value} with attacker=known needs known_trips (k >= 1), got "
                                     "known_trips=None.")
            object.__setattr__(self, "known_trips", check_int("known_trips", self.known_trips, minimum=1))
        object.__setattr__(self, "epsilon", None)

    @property
    def target(self) -> float:
        """The number the goal's figure must not exceed."""
        if self.kind is GoalKind.ATTACK:
            return self.success
        return self.risk if self.kind in RISK_GOALS else self.epsilon

    @property
    def attacker_words(self) -> str:
        """The attacker the goal bounds, in words."""
        if self.kind in RISK_GOALS:
            return attacker_words(self.attacker, self.known_trips)
        if self.kind is GoalKind.ATTACK:
            return attacker_words("known", self.known_trips)
        return ("any attacker, whatever they know (the guarantee (ε, δ) per person bounds every attacker; the "
                "risk measures below read it for two attackers)")

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
        if self.kind is GoalKind.ATTACK:
            return (f"an attacker who knows {self.known_trips} of a person's trips in a week is right at most "
                    f"{100 * self.success:.3g} % of the time (δ ≤ {self.delta:.0e})")
        who = (f"who knows {self.known_trips} of a person's trips" if self.attacker == "known"
               else "who knows all of a person's trips")
        if self.kind is GoalKind.TPR:
            return (f"an attacker {who} in a week finds at most {100 * self.risk:.3g} % of the people in the data "
                    f"while wrongly accusing {100 * self.fpr:.3g} % of the others (TPR ≤ {self.risk:g} at FPR "
                    f"{self.fpr:g}; δ ≤ {self.delta:.0e})")
        if self.kind is GoalKind.ADVANTAGE:
            return (f"an attacker {who} in a week has advantage TPR − FPR ≤ {self.risk:g} (δ ≤ {self.delta:.0e})")
        return (f"an attacker {who} in a week, {100 * self.prior:.3g} % sure beforehand that the person is in the "
                f"data, is at most {100 * self.risk:.3g} % sure afterwards (δ ≤ {self.delta:.0e})")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kind"] = self.kind.value
        d["words"] = self.words()
        d["attacker_words"] = self.attacker_words
        return d


# ---------------------------------------------------------------------------------------------------------------
# Privacy side: the largest ε that meets the goal, for one m
# ---------------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=8192)
def threshold_for(goal: Goal, epsilon: float, max_pairs: int) -> int:
    """Threshold of a design: smallest whole τ with partition-selection δ <= D/2 (over W weeks for ``total``).
    Remembered: it depends on numbers only, and the searches and the frontier ask the same ones for every week,
    grid and seed."""
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
        return min(pld_weeks.composed_epsilon_bounds(goal.pld_delta, max_pairs, e1, goal.weeks, interval=h)[1],
                   goal.weeks * epsilon)
    if goal.kind in RISK_GOALS:
        return _risk_value(goal, epsilon, max_pairs)
    k = min(goal.known_trips, max_pairs)
    tv = float(pld.hockey_stick_delta(0.0, k, e1))
    ps = partition_selection_delta(epsilon, threshold_for(goal, epsilon, max_pairs), max_pairs, 1)
    return min(0.5 + 0.5 * (tv + ps), 1.0)


def _risk_value(goal: Goal, epsilon: float, max_pairs: int) -> float:
    """The risk goal's figure (TPR at FPR, advantage or posterior) of the release at ε, m and its threshold."""
    r = risk_measures(epsilon, max_pairs, threshold_for(goal, epsilon, max_pairs),
                      known_trips=goal.known_trips if goal.attacker == "known" else None, fpr=goal.fpr,
                      prior=goal.prior)[goal.attacker]
    return float({GoalKind.TPR: r["tpr"], GoalKind.ADVANTAGE: r["advantage"], GoalKind.POSTERIOR: r["posterior"]}
                 [goal.kind])


@lru_cache(maxsize=1024)
def goal_epsilon(goal: Goal, max_pairs: int, *, final: bool = True) -> float:
    """Largest release ε (noise scale m/ε) for which the goal holds at this m, by bisection (to 0.2 %).

    The search uses a coarse loss grid for the many-week bracket (a valid but looser upper bound); with ``final``
    the result is checked on the budget's own grid (the figure ``budget`` reports) and stepped down if needed.
    """
    m = check_int("max_pairs", max_pairs, minimum=1)
    target = goal.target
    by_risk = goal.kind is GoalKind.ATTACK or goal.kind in RISK_GOALS
    if goal.kind in RISK_GOALS:
        # the measure depends on ε/m and the pairs seen only (δ_ps taken at its cap D/2): one search per j
        j = m if goal.attacker == "full" else min(goal.known_trips, m)
        e = m * largest_pair_epsilon(goal.kind.value, j, target, fpr=goal.fpr, prior=goal.prior,
                                     delta_cap=goal.partition_delta)
        for _ in range(20):
            if achieved(goal, e, m) <= target:
                return e
            e *= 0.999
        raise ParameterError(f"goal {goal.words()!r}: the search at max_pairs={m} did not converge.")

    def ok(e: float) -> bool:
        return achieved(goal, e, m, coarse=True) <= target

    # a start that meets the goal: tight <= basic, which is ε per week and W·ε over W weeks
    if by_risk:
        lo = 1e-4
    else:
        lo = goal.epsilon if goal.kind is GoalKind.WEEK else goal.epsilon / goal.weeks
    if not ok(lo):
        raise ParameterError(f"goal {goal.words()!r} cannot be met at max_pairs={m} (even ε = {lo:g}).")
    hi = target if not by_risk else 1.0
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
            "goal_met": bool(self.goal_value <= self.goal.target) and self._delta_ok(),
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


def _design_at(goal: Goal, m: int, week_pairs, rng, tuned: bool, ranked: _Ranked | None = None) -> Design:
    e = goal_epsilon(goal, m)
    tau = threshold_for(goal, e, m)
    b = dict(_budget(e, m, tau, goal.weeks, goal.pld_delta))
    keeps = release_keeps(week_pairs, e, tau, m, rng=rng)
    if ranked is not None:
        u = ranked.expected_error(m, e, tau)
        keeps.update({k: u[k] for k in ("pairs_published_expected", "trips_published_expected", "relative_error",
                                         "relative_error_bounding", "relative_error_noise",
                                         "mostly_noise_expected")})
        keeps["pairs_published_frac_expected"] = u["pairs_published_frac"]
        keeps["trips_published_frac_expected"] = u["trips_published_frac"]
    value = {GoalKind.WEEK: b["epsilon_user_week_tight"], GoalKind.TOTAL: b["epsilon_user_total_tight"]}.get(
        goal.kind)
    return Design(goal, m, e, tau, b, keeps, tuned, achieved(goal, e, m) if value is None else float(value))


class WeekIndex:
    """One week's unique (user, pair) rows indexed once, independent of any seed: the week prepared for the seeded
    releases (:func:`odcore.od.pairs.prepare_pairs`: deduplicated, in canonical (pair, user) order, counted), each
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
        # the distinct raw counts (sorted) and each pair's place among them: a few hundred values, so every m's
        # (raw, bounded) histogram is one bincount (:meth:`_Ranked.groups`)
        self.raw_values, self.raw_code = np.unique(raw.astype(np.int64), return_inverse=True)

    def __len__(self) -> int:
        return len(self.pid)


def _index(week_pairs: pd.DataFrame | WeekIndex) -> WeekIndex:
    return week_pairs if isinstance(week_pairs, WeekIndex) else WeekIndex(week_pairs)


class _Ranked:
    """One week's unique (user, pair) rows with a uniformly random rank within each user: keeping the rows of
    rank < m is a uniformly random subset of min(m, n) pairs per person (the law of the keyed-hash rule of
    :func:`odcore.od.pairs.bound_contributions`, not its rows), nested across m, so every m is counted with
    one sort.

    The rank orders each user's rows as one uniformly random permutation (``rng.permutation``) of all rows, in the
    canonical (pair, user) order of :func:`odcore.od.pairs.prepare_pairs` (so it does not depend on the input's row
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
        self._hist: dict = {}

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

    def groups(self, m: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct (raw, bounded) count pairs of the week's pairs with a bounded count > 0, and how many pairs
        have each: ``(raw, true, weight)`` (a week's ~10^5 pairs fall in a few thousand groups)."""
        key = ("groups", m)
        if key not in self._hist:
            c = self.counts(m).astype(np.int64)
            keep = c > 0
            base = int(c.max(initial=0)) + 1
            values = self.week.raw_values
            if len(values) * base <= 2**24:   # (raw, bounded) as one code in (raw's place, bounded) order
                n = np.bincount(self.week.raw_code[keep] * base + c[keep], minlength=len(values) * base)
                u = np.flatnonzero(n)
                self._hist[key] = (values[u // base].astype(float), (u % base).astype(float), n[u].astype(float))
            else:                             # the same groups, sorted the same way, by a sort
                code = self.raw.astype(np.int64)[keep] * base + c[keep]
                u, w = np.unique(code, return_counts=True)
                self._hist[key] = ((u // base).astype(float), (u % base).astype(float), w.astype(float))
        return self._hist[key]

    def expected_error(self, m: int | None, epsilon: float, threshold: float, *, scale: float = 1.0) -> dict:
        """:func:`odcore.privacy.utility.expected_error` of the release at (m, ε, τ) given this bounding, with every
        count multiplied by ``scale`` (``scale`` > 1: as many more people travelling the same way)."""
        raw, true, w = self.groups(m)
        return expected_error(raw * scale, true * scale, epsilon, threshold, 1 if m is None else m, weights=w,
                              n_pairs=self.n_pairs, trips_total=float(self.raw.sum()) * scale)

    def expected_errors(self, m: int | None, epsilons, thresholds) -> dict[str, np.ndarray]:
        """:meth:`expected_error` at many (ε, τ) of one m in one pass
        (:func:`odcore.privacy.utility.expected_errors`: the same floats), each key an array over the settings."""
        raw, true, w = self.groups(m)
        return expected_errors(raw, true, epsilons, thresholds, 1 if m is None else m, weights=w,
                               n_pairs=self.n_pairs, trips_total=float(self.raw.sum()))

    def first_useful(self, m: int | None, values, setting, level: float, chunk: int = 64) -> float | None:
        """The first of ``values`` at which the release is useful (:func:`is_useful`), or None: ``setting(v)`` gives
        ``(epsilon, threshold, scale)``, as for :meth:`expected_error`. Settings are tried ``chunk`` at a time, in
        one pass of :func:`odcore.privacy.utility.published_error` each (the same numbers as
        :meth:`expected_error`'s, so the same answer); the searches seldom stop early, so by default all at once."""
        raw, true, w = self.groups(m)
        values = list(values)
        for c0 in range(0, len(values), chunk):
            part = values[c0:c0 + chunk]
            eps, tau, sc = (np.array(c, dtype=float) for c in zip(*(setting(v) for v in part), strict=True))
            n_pub, err = published_error(raw, true, eps, tau, 1 if m is None else m, weights=w, scales=sc)
            for v, n, e in zip(part, n_pub, err, strict=True):
                if is_useful({"pairs_published_expected": float(n), "relative_error": float(e)}, level):
                    return float(v)
        return None

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


def _candidate_row(goal: Goal, m: int, ranked: _Ranked, level: float) -> dict:
    e = goal_epsilon(goal, m, final=False)
    tau = threshold_for(goal, e, m)
    frac, n_pub = ranked.expected(m, e, tau)
    u = ranked.expected_error(m, e, tau)
    return {"max_pairs": m, "epsilon": e, "threshold": tau, "trips_published_frac": frac,
            "pairs_published_expected": n_pub, "relative_error": u["relative_error"],
            "relative_error_bounding": u["relative_error_bounding"], "relative_error_noise": u["relative_error_noise"],
            "mostly_noise_expected": u["mostly_noise_expected"], "useful": is_useful(u, level)}


def is_useful(utility: dict, level: float = USEFUL_ERROR) -> bool:
    """A release is useful when it is expected to publish at least one pair and its expected relative error on
    published counts is at most ``level`` (:func:`odcore.privacy.utility.expected_error`)."""
    err = utility.get("relative_error", math.nan)
    return bool(utility.get("pairs_published_expected", 0.0) >= 1.0 and math.isfinite(err) and err <= level)


def design(goal: Goal, week_pairs: pd.DataFrame | WeekIndex, *, max_pairs: int | None = None, tune: bool = False,
           candidates=CANDIDATE_MAX_PAIRS, rng=None, level: float = USEFUL_ERROR, _ranked: _Ranked | None = None
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
        Fix m. None: the data-independent :data:`DEFAULT_MAX_PAIRS`, unless ``tune``.
    tune:
        Choose m on the data: among the candidates whose expected relative error is at most ``level`` (and that
        publish at least one pair in expectation), the one publishing the most user-trips (ties: the smaller m).
        A release that is mostly noise or mostly cut cannot win. If no candidate is useful, m stays the
        data-independent default. That choice uses the data and is not covered by the guarantee.
    rng:
        Seed of the bounding and noise (an int or None).
    level:
        The largest expected relative error of a useful release (:data:`USEFUL_ERROR`).

    Returns
    -------
    (chosen, default, candidates)
        The chosen :class:`Design` and the data-independent one (m = :data:`DEFAULT_MAX_PAIRS`, or the fixed m),
        each with its exact budget and a seeded release on the week; and a DataFrame of every candidate m, with
        its expected utility (:func:`odcore.privacy.utility.expected_error`, exact given one seeded bounding):
        max_pairs, epsilon, threshold, trips_published_frac, pairs_published_expected, relative_error,
        relative_error_bounding, relative_error_noise, mostly_noise_expected, useful.
    """
    ms = sorted({check_int("candidate max_pairs", c, minimum=1) for c in candidates} | {DEFAULT_MAX_PAIRS})
    fixed = None if max_pairs is None else check_int("max_pairs", max_pairs, minimum=1)
    if fixed is not None:
        ms = sorted(set(ms) | {fixed})
    ranked = _ranked or _Ranked(week_pairs, rng)
    prep = ranked.week.prepared            # validated and counted once for the seeded releases below
    table = pd.DataFrame([_candidate_row(goal, m, ranked, level) for m in ms])
    tuned = False
    if fixed is not None:
        best_m = fixed
    elif tune and table["useful"].any():
        ok = table[table["useful"]]
        best_m = int(ok.sort_values(["trips_published_frac", "max_pairs"], ascending=[False, True],
                                    kind="stable").iloc[0]["max_pairs"])
        tuned = True
    else:
        best_m = DEFAULT_MAX_PAIRS
    best = _design_at(goal, best_m, prep, rng, tuned, ranked)
    base_m = fixed if fixed is not None else DEFAULT_MAX_PAIRS
    default = best if best_m == base_m else _design_at(goal, base_m, prep, rng, False, ranked)
    if default is best and best.tuned_on_data:
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
    DataFrame[max_pairs, epsilon, threshold, epsilon_user_week, trips_published_frac, pairs_published_expected,
    relative_error, relative_error_bounding, relative_error_noise, useful] (the error figures and ``useful`` as in
    :func:`odcore.privacy.utility.expected_error` and :func:`is_useful`)
    """
    eps_grid = np.geomspace(0.1, 20.0, 12) if epsilons is None else np.asarray(epsilons, dtype=float)
    goal = Goal(GoalKind.WEEK, epsilon=1.0, delta=delta, weeks=1)
    ranked = _ranked or _Ranked(week_pairs, rng)
    rows = []
    for m in max_pairs:
        m = check_int("max_pairs", m, minimum=1)
        taus = [threshold_for(goal, float(e), m) for e in eps_grid]
        ue = ranked.expected_errors(m, [float(e) for e in eps_grid], [float(t) for t in taus])   # one pass per m
        for i, (e, tau) in enumerate(zip(eps_grid, taus, strict=True)):
            frac, n_pub = ranked.expected(m, float(e), tau)
            u = {k: float(v[i]) for k, v in ue.items()}
            rows.append({"max_pairs": m, "epsilon": float(e), "threshold": tau,
                         "epsilon_user_week": float(_tight(goal.pld_delta, m, float(e) / m)),
                         "trips_published_frac": frac, "pairs_published_expected": n_pub,
                         "relative_error": u["relative_error"], "relative_error_bounding": u["relative_error_bounding"],
                         "relative_error_noise": u["relative_error_noise"], "useful": is_useful(u)})
    return pd.DataFrame(rows)


def google_point(week_pairs: pd.DataFrame | WeekIndex, user_trips: np.ndarray, *, delta: float = 1e-6,
                 _ranked: _Ranked | None = None) -> dict:
    """Google's per-metric setting (ε 0.66, τ 100) on the same axes: expected share of user-trips published, and
    the per-person ε per week (tight, δ = D/2) of a typical (median unique trips) and the busiest person."""
    week = _ranked.week if _ranked else _index(week_pairs)   # raw counts do not depend on any seed
    raw = week.raw
    # one probability per distinct count (the same float per pair as computing it pair by pair)
    p = release_probability(week.raw_values.astype(float), GOOGLE_EPSILON, GOOGLE_THRESHOLD)[week.raw_code]
    trips = np.asarray(user_trips, dtype=int)
    n_typ = max(1, typical_trips(trips))
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
    n = check_int("trips", trips, minimum=0)
    return float(bounded_success_curve(epsilon, max_pairs, n, threshold)[n])


def what_would_change(goal: Goal, chosen: dict, table: pd.DataFrame, ranked: _Ranked, n_people: int,
                      level: float = USEFUL_ERROR) -> list[dict]:
    """What would make the release useful, with numbers: more pairs per person (when bounding is the cause), a
    weaker goal (the ε per person and week at which the error falls under ``level``), more people (or larger
    zones / merged weeks, which raise every count the same way), tuning m on the data.

    Each item: ``what`` (``max_pairs`` / ``epsilon`` / ``people`` / ``tune``), ``value``, ``max_pairs`` and
    ``words``. Searches: release ε up to 100 times the goal's (threshold refitted), counts up to 1000 times.
    """
    out = []
    m0 = int(chosen["max_pairs"])
    if chosen["relative_error_bounding"] > level / 2:
        fix = table[table["relative_error_bounding"] <= level / 2]
        if len(fix):
            r = fix.iloc[0]
            out.append({"what": "max_pairs", "value": int(r["max_pairs"]), "max_pairs": int(r["max_pairs"]),
                        "words": f"Contribution bounding leaves out {100 * chosen['relative_error_bounding']:.0f} % "
                                 f"of the people on a published pair (max pairs {m0}); max pairs "
                                 f"{int(r['max_pairs'])} would leave out {100 * r['relative_error_bounding']:.1f} % "
                                 "(read from this week's data)."})
    best_eps = None
    not_useful = table[~table["useful"].astype(bool)]     # useful candidates are named by the tuning item below
    for _, r in not_useful.iterrows():
        m = int(r["max_pairs"])
        e = ranked.first_useful(m, r["epsilon"] * np.geomspace(1.0, 100.0, 41),
                                lambda e, m=m: (e, threshold_for(goal, e, m), 1.0), level)
        if e is not None:
            ew = float(_tight(goal.pld_delta, m, e / m))
            if best_eps is None or ew < best_eps[0]:
                best_eps = (ew, m)
    if best_eps is not None:
        out.append({"what": "epsilon", "value": best_eps[0], "max_pairs": best_eps[1],
                    "words": f"A weaker goal: at ε ≈ {best_eps[0]:.2g} per person and week (δ ≤ {goal.delta:.0e}) "
                             f"with max pairs {best_eps[1]} the error falls under {100 * level:.0f} %"
                             + (" — an ε above 10 protects little." if best_eps[0] > 10 else ".")})
    best_ppl = None
    for _, r in not_useful.iterrows():
        m = int(r["max_pairs"])
        sc = ranked.first_useful(m, np.geomspace(1.0, 1000.0, 61),
                                 lambda x, e=float(r["epsilon"]), t=float(r["threshold"]): (e, t, x), level)
        if sc is not None and (best_ppl is None or sc < best_ppl[0] or (sc == best_ppl[0] and m == m0)):
            best_ppl = (sc, m)
    if best_ppl is not None:
        people = math.ceil(best_ppl[0] * n_people)
        out.append({"what": "people", "value": people, "max_pairs": best_ppl[1],
                    "words": f"More people: about {people:,} people travelling like these ({best_ppl[0]:.2g} times "
                             f"the {n_people:,} of this week) with max pairs {best_ppl[1]} at this goal. Larger zones "
                             "or several weeks merged into one release raise every count in the same way."})
    if not chosen.get("tuned_on_data") and table["useful"].any():
        r = table[table["useful"]].sort_values(["trips_published_frac", "max_pairs"], ascending=[False, True]).iloc[0]
        out.append({"what": "tune", "value": int(r["max_pairs"]), "max_pairs": int(r["max_pairs"]),
                    "words": f"Tuning max pairs on this week's data would choose {int(r['max_pairs'])} (error "
                             f"{100 * r['relative_error']:.1f} %, {100 * r['trips_published_frac']:.1f} % of user-trips "
                             "published); that choice uses the data and is not covered by the guarantee."})
    return out


def verdict(rep: dict, level: float = USEFUL_ERROR) -> dict:
    """The designer's verdict on a report (:func:`design_report`): ``useful``, ``status`` (``useful``,
    ``not_useful``, ``not_met``), ``headline`` and ``why`` in words."""
    err, eb, en = rep["relative_error"], rep["relative_error_bounding"], rep["relative_error_noise"]
    n_pub = rep["pairs_published_expected"]
    split = (f"contribution bounding {100 * eb:.1f} %, noise {100 * en:.1f} %" if math.isfinite(err) else "")
    if not rep["goal_met"]:
        return {"useful": False, "status": "not_met", "headline": "Goal NOT met by the settings found.",
                "why": "Loosen the goal."}
    note = _attacker_note(rep)
    if is_useful(rep, level):
        return {"useful": True, "status": "useful",
                "headline": (f"Goal met and useful: published counts are expected to be off by {100 * err:.1f} % on "
                             f"average ({split}; under the {100 * level:.0f} % level), about {n_pub:,.0f} pairs "
                             f"carrying {100 * rep['trips_published_frac_expected']:.1f} % of the user-trips." + note),
                "why": ""}
    if n_pub < 1:
        why = (f"nothing would be published: {n_pub:.2g} pairs expected (busiest pair: "
               f"{rep['busiest_pair']:,} people, threshold {rep['threshold']:,}).")
    else:
        why = (f"published counts would be off by {100 * err:.1f} % on average ({split}), above the "
               f"{100 * level:.0f} % level; about {n_pub:,.0f} pairs would be published.")
    return {"useful": False, "status": "not_useful",
            "headline": "Goal met, but no useful release exists at this goal on this data: " + why + note, "why": why}


def _attacker_note(rep: dict) -> str:
    """When the goal bounds an attacker who knows only some of the person's trips, what one who knows all of them
    reaches on the same settings (said in the verdict, not further down)."""
    g, rk = rep["goal"], rep["risk"]
    if g["kind"] not in ("attack", "tpr", "advantage", "posterior"):
        return ""
    if g["kind"] != "attack" and g.get("attacker") == "full":
        return ""
    full = rk["full"]
    if "known" in rk and rk["known"]["pairs_seen"] >= full["pairs_seen"]:
        return (f" With max pairs {rep['max_pairs']}, an attacker who knows all of the person's trips learns no more "
                f"than one who knows {g['known_trips']}.")
    if g["kind"] == "attack":
        return (f" The goal bounds an attacker who knows {g['known_trips']} of the person's trips; one who knows all "
                f"of them is right at most {100 * full['success']:.1f} % of the time.")
    fig = {"tpr": f"a TPR of {100 * full['tpr']:.2f} % at FPR {100 * rk['fpr']:.3g} %",
           "advantage": f"an advantage of {full['advantage']:.3f}",
           "posterior": f"a belief of {100 * full['posterior']:.1f} % from {100 * rk['prior']:.3g} %"}[g["kind"]]
    return (f" The goal bounds an attacker who knows {g['known_trips']} of the person's trips; one who knows all of "
            f"them reaches {fig}.")


def design_report(goal: Goal, week_pairs: pd.DataFrame | WeekIndex, user_trips, *, week: int = 0,
                  max_pairs: int | None = None, tune: bool = False, rng=None, with_frontier: bool = False,
                  level: float = USEFUL_ERROR) -> dict:
    """Everything the designer says, as a JSON-able dict.

    Top-level keys are the chosen design's (:meth:`Design.to_dict`: ``max_pairs``, ``noise_scale``,
    ``threshold``, ``epsilon_user_week``, ``delta_user_week``, ``epsilon_user_total``, ``delta_user_total``,
    ``weeks``, ``pairs_published``, ``trips_published``, ``mean_relative_error`` (the seeded release) and the
    expected utility ``relative_error`` with its split ``relative_error_bounding`` / ``relative_error_noise``,
    ``pairs_published_expected``, ``trips_published_frac_expected``, ``mostly_noise_expected``, ``goal``, ...),
    plus ``useful`` (the verdict: goal met, expected error <= ``level`` and at least one pair expected),
    ``verdict`` (:func:`verdict`), ``error_level``, ``would_change`` (:func:`what_would_change`), ``risk``
    (:func:`odcore.privacy.risk.risk_measures` of the chosen settings: TPR at FPR, advantage, posterior for the
    attacker who knows k trips and the one who knows all), ``week``, ``people``, ``typical_trips`` /
    ``busy_trips`` (median and maximum unique trips per person in the week) and the attack bound for each
    (``attack_success_typical`` / ``attack_success_busy``), ``default`` (the data-independent design, same keys),
    ``candidates`` (every m with its expected utility), ``google`` (:func:`google_point`), ``tuning_note`` and,
    with ``with_frontier``, ``frontier`` (:func:`frontier` rows).
    """
    week_pairs = _index(week_pairs)
    ranked = _Ranked(week_pairs, rng)             # one ranking for design and frontier
    best, default, cands = design(goal, week_pairs, max_pairs=max_pairs, tune=tune, rng=rng, level=level,
                                  _ranked=ranked)
    trips = np.asarray(user_trips, dtype=int)
    n_typ = typical_trips(trips)
    n_busy = int(trips.max()) if trips.size else 0
    k = goal.known_trips if goal.known_trips is not None else n_typ

    def with_risk(d: Design) -> dict:
        out = d.to_dict()
        out["attack_success_typical"] = person_risk(d.epsilon, d.max_pairs, d.threshold, n_typ)
        out["attack_success_busy"] = person_risk(d.epsilon, d.max_pairs, d.threshold, n_busy)
        out["risk"] = risk_measures(d.epsilon, d.max_pairs, d.threshold, known_trips=max(int(k), 1),
                                    fpr=goal.fpr, prior=goal.prior)
        out["busiest_pair"] = int(ranked.raw.max()) if ranked.n_pairs else 0
        out["useful"] = is_useful(out, level) and bool(out["goal_met"])
        return out

    rep = {**with_risk(best), "week": int(week), "people": int(trips.size), "typical_trips": n_typ,
           "busy_trips": n_busy, "error_level": level, "default": with_risk(default),
           "candidates": cands.to_dict(orient="records"),
           "google": google_point(week_pairs, trips, delta=goal.delta, _ranked=ranked)}
    rep["verdict"] = verdict(rep, level)
    rep["useful"] = rep["verdict"]["useful"]
    rep["would_change"] = [] if rep["useful"] else what_would_change(goal, rep, cands, ranked, int(trips.size),
                                                                     level)
    if best.tuned_on_data:
        rep["tuning_note"] = (f"max_pairs = {best.max_pairs} was chosen among {len(cands)} values because, of those "
                              f"whose expected error is at most {100 * level:.0f} %, it publishes the most user-trips "
                              f"on this week's data: that choice itself uses the data and is not covered by the "
                              f"guarantee. The data-independent default max_pairs = {DEFAULT_MAX_PAIRS} is given "
                              f"under 'default'.")
    elif max_pairs is not None:
        rep["tuning_note"] = f"max_pairs = {best.max_pairs} was fixed before looking at the data."
    else:
        rep["tuning_note"] = (f"max_pairs = {best.max_pairs} is the data-independent default, fixed before looking "
                              "at the data" + (" (tuning found no useful candidate)." if tune else
                                               "; tuning it on the data is available and says so."))
    if with_frontier:
        rep["frontier"] = frontier(week_pairs, delta=goal.delta, rng=rng, _ranked=ranked).to_dict(orient="records")
    return rep


def verdict_rows(rep: dict) -> list[tuple[str, str]]:
    """The verdict's numbers as (label, value) rows, worded once for the designer page and the guarantee sheet (so
    both show the same figures): utility with its split, the attacker the goal bounds, and the risk measures of the
    two attackers."""
    def pct(x, d: int = 1) -> str:
        return "–" if x is None or not math.isfinite(x) else percent_text(x, d)

    rk = rep["risk"]
    rows = [
        ("Verdict", "useful" if rep["useful"] else ("goal NOT met" if not rep["goal_met"] else "not useful")),
        ("Expected relative error of published counts", f"{pct(rep['relative_error'])} (useful at most "
                                                        f"{pct(rep['error_level'], 0)})"),
        ("… of which contribution bounding (people cut from the pair)", pct(rep["relative_error_bounding"])),
        ("… of which noise (the two parts add up to the error)", pct(rep["relative_error_noise"])),
        ("Pairs expected to be published", f"{expected_count_text(rep['pairs_published_expected'])} of "
                                           f"{rep['pairs_total']:,} "
                                           f"({pct(rep['pairs_published_frac_expected'], 3)})"),
        ("User-trips on published pairs (expected)", pct(rep["trips_published_frac_expected"])),
        ("Published pairs that are mostly noise (expected)", expected_count_text(rep["mostly_noise_expected"])),
        ("The goal bounds", rep["goal"]["attacker_words"]),
    ]
    for key in ("known", "full"):
        if key in rk:
            a = rk[key]
            rows.append((f"Risk: {a['attacker']}",
                         f"TPR {pct(a['tpr'], 2)} at FPR {pct(rk['fpr'], 1)}; advantage {a['advantage']:.3f}; "
                         f"posterior from {pct(rk['prior'], 0)} at most {pct(a['posterior'])}"))
    rows.append(("Chance of a giveaway (a pair only the person makes is published)", f"{rk['delta_partition']:.2g}"))
    return rows
