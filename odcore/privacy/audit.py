"""The guarantee tested on the release itself: an empirical lower bound on ε, beside the theory.

Two audits of the Laplace + threshold release (:func:`odcore.privacy.release.release`), in either unit:

- **one run** (Steinke, Nasr and Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023): ``m``
  canary people, each given its own unique pairs drawn from the week's pairs (1 pair per count; the typical
  person's number of unique pairs per person), each included with probability ½ by a fair coin; the week is
  released once with the included canaries; the auditor, who knows everyone else's data, scores each canary by the
  likelihood ratio of what the release shows on its pairs (:func:`odcore.privacy.attack.pair_llr`, the statistic of
  the Attack page), guesses "in"/"out" on the most confident canaries and abstains on the rest. If the release is
  ε-DP for one canary, the number of correct guesses among ``r`` is stochastically dominated by
  Binomial(r, e^ε/(1+e^ε)) (their Theorem 3.1 with δ = 0); the largest ε this rejects at the stated confidence is the
  lower bound.
- **many runs** (Jagielski, Ullman and Oprea 2020; Nasr et al. 2021): one target, ``R`` releases of its pairs, half
  with the target and half without; the score's threshold is chosen on one half of the runs and applied to the other;
  Clopper–Pearson upper bounds on FPR and FNR give ε ≥ log((1 − δ − FNR)/FPR) (and the mirror).

Both are seeded. What the theory promises: per count, ε of one Laplace count; per person and week, the tight ε of the
k-fold composition (:func:`odcore.privacy.pld.epsilon_for_delta`, Houssiau et al. 2022) — the audit measures what the
per-metric guarantee does not promise.

Cost: one release of the week (one run), or ``R × k`` Laplace draws (many runs: only the target's pairs are drawn,
the other pairs' noise is independent of the target and the score ignores it).

A note on δ: the threshold makes the release (ε, δ)-DP with a tiny δ (2·10⁻²⁹ per count at the Google setting);
the one-run bound uses δ = 0 and is therefore valid up to a term of order ``r·δ`` in the guess count, negligible here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum

import numpy as np
import pandas as pd
from scipy import optimize, stats

from odcore.constants import DESTINATION, ORIGIN, USER, WEEK
from odcore.errors import ParameterError, check_int, check_positive, check_prob, coerce_enum
from odcore.privacy import pld
from odcore.privacy.attack import pair_llr
from odcore.privacy.release import ReleaseConfig, release

__all__ = [
    "AuditConfig",
    "AuditResult",
    "Placement",
    "Unit",
    "audit_many_runs",
    "audit_one_run",
    "clopper_pearson_upper",
    "many_run_epsilon_lower",
    "one_run_epsilon_lower",
]


class Placement(StrEnum):
    """Where the canaries' pairs are.

    ``visible``: each canary pair is an (origin, destination) nobody in the week uses, given a known background of
    ``ceil(τ + 10/ε)`` other people so that it is published (the counts the per-count guarantee must cover: the
    audit's strongest setting). ``typical``: pairs of the week drawn as a random person's pairs (with probability
    proportional to their count, no pair used twice) — most of them are suppressed by the threshold, as most of a
    typical person's pairs are.
    """

    VISIBLE = "visible"
    TYPICAL = "typical"


class Unit(StrEnum):
    """What one canary is: one count (one pair), or one person with the week's typical number of unique pairs."""

    COUNT = "count"
    PERSON = "person"


@dataclass(frozen=True)
class AuditConfig:
    """Settings of an audit.

    Parameters
    ----------
    epsilon, threshold:
        The release's Laplace ε per count (noise scale 1/ε) and its threshold τ.
    unit:
        :class:`Unit`: ``count`` (each canary has 1 pair) or ``person`` (each has ``trips`` pairs).
    placement:
        :class:`Placement` of the canaries' pairs (``visible`` by default).
    canaries:
        Number of canaries (one run) — the bound cannot exceed what ``canaries`` guesses can show (about
        log(canaries) when every guess is right).
    trips:
        Unique pairs per canary person; None: the median number of unique pairs of the week's people (``person``),
        1 (``count``).
    guess_share:
        Share of the canaries the auditor guesses on (the most confident by |score|); the rest abstain.
    confidence:
        Confidence of the lower bound (0.95).
    delta:
        δ of the theoretical ε per person (tight ε(δ) of the k-fold Laplace law) and of the many-run bound.
    private:
        False audits a release without noise (counts thresholded as they are), the check that the audit finds a
        leak where there is one.
    """

    epsilon: float = 0.66
    threshold: float = 100
    unit: Unit | str = Unit.COUNT
    placement: Placement | str = Placement.VISIBLE
    canaries: int = 1000
    trips: int | None = None
    guess_share: float = 0.5
    confidence: float = 0.95
    delta: float = 1e-6
    private: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        object.__setattr__(self, "threshold", check_positive("threshold", self.threshold))
        coerce_enum(self, "unit", Unit)
        coerce_enum(self, "placement", Placement)
        object.__setattr__(self, "canaries", check_int("canaries", self.canaries, minimum=2))
        if self.trips is not None:
            object.__setattr__(self, "trips", check_int("trips", self.trips, minimum=1))
        g = float(self.guess_share)
        if not (0 < g <= 1):
            raise ParameterError(f"guess_share must be in (0, 1], got guess_share={self.guess_share!r}.")
        object.__setattr__(self, "confidence", check_prob("confidence", self.confidence))
        object.__setattr__(self, "delta", check_prob("delta", self.delta))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["unit"] = str(self.unit)
        d["placement"] = str(self.placement)
        return d


@dataclass(frozen=True)
class AuditResult:
    """``epsilon_lower`` (the lower bound at ``confidence``) beside ``epsilon_theory``, and how it was reached."""

    unit: str
    method: str
    epsilon_lower: float
    epsilon_theory: float
    trips: int
    guesses: int
    correct: int
    canaries: int
    details: dict

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------------------------
# Bounds
# ---------------------------------------------------------------------------------------------------------------

def _p_of(eps: float) -> float:
    return 1.0 / (1.0 + math.exp(-eps))


def one_run_epsilon_lower(correct: int, guesses: int, confidence: float = 0.95) -> float:
    """Largest ε that ``correct`` right guesses out of ``guesses`` reject at ``confidence``.

    Steinke, Nasr and Jagielski 2023, Theorem 3.1 (δ = 0): for an ε-DP mechanism the number of correct guesses is
    stochastically dominated by Binomial(r, e^ε/(1+e^ε)); every ε with ``P[Bin(r, p_ε) >= v] <= 1 − confidence`` is
    rejected, and the bound is the supremum of those (0 when none is).

    >>> round(one_run_epsilon_lower(100, 100), 3)   # 100 of 100 right: p_eps**100 = 0.05
    3.493
    >>> one_run_epsilon_lower(50, 100)
    0.0
    """
    r = check_int("guesses", guesses, minimum=0)
    v = check_int("correct", correct, minimum=0)
    if v > r:
        raise ParameterError(f"correct must be <= guesses, got correct={v}, guesses={r}.")
    beta = 1.0 - check_prob("confidence", confidence)
    if r == 0:
        return 0.0

    def tail(eps: float) -> float:   # P[Bin(r, p_eps) >= v] - beta, increasing in eps
        return float(stats.binom.sf(v - 1, r, _p_of(eps))) - beta

    if tail(0.0) > 0:
        return 0.0
    hi = 1.0
    while tail(hi) <= 0:
        hi *= 2
        if hi > 1e4:   # pragma: no cover - v = r makes the tail reach beta at a finite eps
            return math.inf
    return float(optimize.brentq(tail, 0.0, hi, xtol=1e-10))


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided upper Clopper–Pearson bound on a binomial proportion at level ``1 − alpha``.

    >>> round(clopper_pearson_upper(0, 100, 0.05), 4)
    0.0295
    """
    if n <= 0:
        return 1.0
    if k >= n:
        return 1.0
    return float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def many_run_epsilon_lower(fp: int, negatives: int, fn: int, positives: int, confidence: float = 0.95,
                           delta: float = 0.0) -> float:
    """ε lower bound from one threshold's false positives and negatives (Clopper–Pearson, both at level
    ``1 − (1 − confidence)/2``): ``max(log((1 − δ − FNR⁺)/FPR⁺), log((1 − δ − FPR⁺)/FNR⁺), 0)``.

    >>> round(many_run_epsilon_lower(0, 1000, 0, 1000), 3)
    5.601
    """
    a = (1.0 - check_prob("confidence", confidence)) / 2.0
    fpr = clopper_pearson_upper(fp, negatives, a)
    fnr = clopper_pearson_upper(fn, positives, a)
    out = 0.0
    for num, den in ((1.0 - delta - fnr, fpr), (1.0 - delta - fpr, fnr)):
        if num > 0 and den > 0:
            out = max(out, math.log(num / den))
    return out


def theory_epsilon(unit: Unit, epsilon: float, trips: int, delta: float) -> float:
    """What the release promises for one canary: ε per count, or the tight ε(δ) of ``trips`` Laplace counts."""
    if unit is Unit.COUNT or trips == 1:
        return float(epsilon)
    return float(pld.epsilon_for_delta(delta, trips, epsilon))


# ---------------------------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------------------------

def _week_pairs(pairs: pd.DataFrame, week: int | None) -> tuple[pd.DataFrame, int]:
    need = [WEEK, USER, ORIGIN, DESTINATION]
    missing = [c for c in need if c not in pairs.columns]
    if missing:
        raise ParameterError(f"pairs must have columns {need}; missing {missing}.")
    if len(pairs) == 0:
        raise ParameterError("pairs is empty: there is nothing to audit.")
    if week is None:
        week = int(pairs[WEEK].value_counts().idxmax())
    wk = pairs.loc[pairs[WEEK].to_numpy() == week, need].drop_duplicates()
    if wk.empty:
        weeks = sorted(int(w) for w in pairs[WEEK].unique())
        raise ParameterError(f"week={week} has no pairs; weeks with pairs: {weeks[:20]}.")
    return wk, int(week)


def _canary_pairs(counts: pd.DataFrame, n_canaries: int, trips: int, rng: np.random.Generator) -> np.ndarray:
    """Row indices into ``counts`` (one per distinct pair), ``n_canaries × trips``, no pair used twice; a pair is
    drawn with probability proportional to its count (the pairs of a random person of the week)."""
    need = n_canaries * trips
    if need > len(counts):
        raise ParameterError(
            f"{n_canaries} canaries × {trips} pairs need {need:,} distinct pairs, but the week has {len(counts):,}; "
            "use fewer canaries (canaries) or fewer pairs per canary (trips).")
    w = counts["count"].to_numpy(float)
    idx = rng.choice(len(counts), size=need, replace=False, p=w / w.sum())
    return idx.reshape(n_canaries, trips)


def _fresh_pairs(counts: pd.DataFrame, need: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``need`` distinct (origin, destination) pairs of the week's zones that nobody in the week made."""
    cells = np.unique(np.concatenate([counts[ORIGIN].to_numpy(), counts[DESTINATION].to_numpy()]))
    n = cells.size
    if n < 2 or n * (n - 1) - len(counts) < need:
        raise ParameterError(f"the week's {n} zones have fewer than {need:,} unused pairs for the canaries; use "
                             "fewer canaries or fewer pairs per canary (trips).")
    used = set(zip(counts[ORIGIN].to_numpy().tolist(), counts[DESTINATION].to_numpy().tolist(), strict=True))
    out: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    while len(out) < need:
        a = cells[rng.integers(0, n, size=2 * (need - len(out)) + 16)]
        b = cells[rng.integers(0, n, size=a.size)]
        for od in zip(a.tolist(), b.tolist(), strict=True):
            if od[0] != od[1] and od not in used and od not in seen:
                seen.add(od)
                out.append(od)
                if len(out) == need:
                    break
    arr = np.array(out, dtype=np.int64)
    return arr[:, 0], arr[:, 1]


def _trips_of(wk: pd.DataFrame, cfg: AuditConfig) -> int:
    if cfg.trips is not None:
        return cfg.trips
    if cfg.unit is Unit.COUNT:
        return 1
    return max(1, int(np.median(wk.groupby(USER, sort=False).size().to_numpy())))


def background_count(cfg: AuditConfig) -> int:
    """Others on each ``visible`` canary pair: ``ceil(τ + 10/ε)``, published with probability 1 − ½e^{−10}."""
    return math.ceil(cfg.threshold + 10.0 / cfg.epsilon)


def _design(wk: pd.DataFrame, cfg: AuditConfig, m: int, trips: int, rng: np.random.Generator):
    """The canaries' pairs ``(o, d)`` (m × trips), the others' count on each, and the rows of the known background
    people (``visible`` only; user ids are filled in by the caller)."""
    counts = wk.groupby([ORIGIN, DESTINATION], sort=True).size().rename("count").reset_index()
    if cfg.placement is Placement.TYPICAL:
        idx = _canary_pairs(counts, m, trips, rng)
        o = counts[ORIGIN].to_numpy()[idx]
        d = counts[DESTINATION].to_numpy()[idx]
        return o, d, counts["count"].to_numpy(float)[idx], None
    o, d = _fresh_pairs(counts, m * trips, rng)
    b = background_count(cfg)
    bg = pd.DataFrame({ORIGIN: np.repeat(o, b), DESTINATION: np.repeat(d, b)})
    return o.reshape(m, trips), d.reshape(m, trips), np.full((m, trips), float(b)), bg


def _released_view(table: pd.DataFrame, o: np.ndarray, d: np.ndarray, week: int) -> tuple[np.ndarray, np.ndarray]:
    """(published, noisy_count) of each (origin, destination) of ``week`` in a release table (absent = suppressed)."""
    t = table.loc[table[WEEK].to_numpy() == week, [ORIGIN, DESTINATION, "noisy_count", "released"]]
    key = pd.MultiIndex.from_arrays([t[ORIGIN].to_numpy(), t[DESTINATION].to_numpy()])
    pos = key.get_indexer(pd.MultiIndex.from_arrays([o, d]))
    pub = np.zeros(o.size, dtype=bool)
    noisy = np.full(o.size, np.nan)
    found = pos >= 0
    pub[found] = t["released"].to_numpy(bool)[pos[found]]
    noisy[found] = t["noisy_count"].to_numpy(float)[pos[found]]
    noisy[~pub] = np.nan
    return pub, noisy


def _scores(others: np.ndarray, published: np.ndarray, noisy: np.ndarray, cfg: AuditConfig) -> np.ndarray:
    """Per canary pair: the log-likelihood ratio of "in" against "out" (± a large number without noise)."""
    if cfg.private:
        return pair_llr(others, published, noisy, cfg.epsilon, cfg.threshold)
    # no noise: a published count says exactly whether the canary is there; a suppression says so when exactly one
    # of c and c + 1 clears the threshold
    s = np.zeros(others.size)
    s[published] = np.where(np.isclose(noisy[published], others[published] + 1.0), 1.0, -1.0)
    edge = ~published & (others + 1.0 >= cfg.threshold) & (others < cfg.threshold)
    s[edge] = -1.0
    return s


def _guess(scores: np.ndarray, share: float) -> np.ndarray:
    """+1 (in), −1 (out) or 0 (abstain) per canary: guesses on the ``share`` of canaries with the largest |score|
    (a function of the release alone, as the theorem requires); a score of exactly 0 always abstains."""
    r = max(1, math.ceil(share * scores.size))
    mag = np.abs(scores)
    cut = np.sort(mag)[::-1][r - 1]
    sign = np.sign(scores)
    return np.where((mag >= cut) & (mag > 0), sign, 0).astype(np.int64)


def audit_one_run(pairs: pd.DataFrame, config: AuditConfig | None = None, *, week: int | None = None,
                  rng=None) -> AuditResult:
    """One-run audit of one week's release (Steinke, Nasr and Jagielski 2023).

    Parameters
    ----------
    pairs:
        DataFrame[week, user, origin, destination] of unique pairs (``ODData.pairs``).
    config:
        :class:`AuditConfig`.
    week:
        The week released and audited; None: the week with the most user-pairs.
    rng:
        Seed or Generator (canaries' pairs, coins and the release's noise). Same seed, same result.
    """
    cfg = AuditConfig() if config is None else config
    rng = np.random.default_rng(rng)
    wk, week = _week_pairs(pairs, week)
    trips = _trips_of(wk, cfg)
    m = cfg.canaries
    o, d, others, bg = _design(wk, cfg, m, trips, rng)
    coins = rng.random(m) < 0.5
    # every person as an integer code; canaries and background people get codes nobody has
    codes, _ = pd.factorize(wk[USER], sort=True)
    base = int(codes.max()) + 1 if codes.size else 0
    parts = [pd.DataFrame({WEEK: week, USER: codes, ORIGIN: wk[ORIGIN].to_numpy(), DESTINATION: wk[DESTINATION].to_numpy()})]
    inc = np.flatnonzero(coins)
    parts.append(pd.DataFrame({WEEK: week, USER: np.repeat(base + inc, trips), ORIGIN: o[inc].ravel(),
                               DESTINATION: d[inc].ravel()}))
    if bg is not None:
        parts.append(bg.assign(**{WEEK: week, USER: base + m + np.arange(len(bg))})[[WEEK, USER, ORIGIN, DESTINATION]])
    data = pd.concat(parts, ignore_index=True)
    if cfg.private:
        table = release(data, ReleaseConfig(epsilon=cfg.epsilon, threshold=cfg.threshold), rng=rng)
    else:
        c = data.groupby([WEEK, ORIGIN, DESTINATION], sort=True).size().rename("true_count").reset_index()
        table = c.assign(noisy_count=c["true_count"].astype(float), released=c["true_count"] >= cfg.threshold)
    pub, noisy = _released_view(table, o.ravel(), d.ravel(), week)
    s = _scores(others.ravel(), pub, noisy, cfg).reshape(m, trips).sum(axis=1)
    g = _guess(s, cfg.guess_share)
    made = g != 0
    truth = np.where(coins, 1, -1)
    correct = int((g[made] == truth[made]).sum())
    r = int(made.sum())
    lower = one_run_epsilon_lower(correct, r, cfg.confidence)
    return AuditResult(
        unit=str(cfg.unit), method="one_run", epsilon_lower=lower,
        epsilon_theory=theory_epsilon(cfg.unit, cfg.epsilon, trips, cfg.delta), trips=trips, guesses=r,
        correct=correct, canaries=m,
        details={"week": week, "included": int(coins.sum()), "config": cfg.to_dict(),
                 "rows_released": len(data),
                 "canary_pairs_published": float(pub.mean()),
                 "accuracy": correct / r if r else math.nan,
                 "epsilon_basic": float(trips * cfg.epsilon) if cfg.private else math.inf})


# ---------------------------------------------------------------------------------------------------------------
# Many runs
# ---------------------------------------------------------------------------------------------------------------

def audit_many_runs(pairs: pd.DataFrame, config: AuditConfig | None = None, *, runs: int = 2000,
                    week: int | None = None, rng=None) -> AuditResult:
    """Many-run audit of one target: ``runs`` releases of its pairs, half with the target, half without.

    The target is a canary with ``trips`` pairs drawn like the one-run canaries. Each run draws the Laplace noise of
    the target's pairs only (the rest of the table is independent of the target and not used by the score), applies
    the threshold and scores the run by the summed likelihood ratio. The threshold on the score is chosen on the
    first half of the runs (the one with the largest bound there) and the bound is computed on the second half.
    """
    cfg = AuditConfig() if config is None else config
    n = check_int("runs", runs, minimum=8)
    rng = np.random.default_rng(rng)
    wk, week = _week_pairs(pairs, week)
    trips = _trips_of(wk, cfg)
    _, _, others, _ = _design(wk, cfg, 1, trips, rng)
    others = others[0]
    member = np.arange(n) % 2 == 0
    true = others[None, :] + member[:, None]
    noisy = true + (rng.laplace(0.0, 1.0 / cfg.epsilon, size=true.shape) if cfg.private else 0.0)
    pub = noisy >= cfg.threshold
    noisy = np.where(pub, noisy, np.nan)
    s = _scores(np.broadcast_to(others, true.shape).ravel(), pub.ravel(), noisy.ravel(), cfg)
    s = s.reshape(n, trips).sum(axis=1)
    half = n // 2
    a, b = slice(0, half), slice(half, n)

    def bound_at(t: float, part: slice) -> float:
        pos, neg = member[part], ~member[part]
        said_in = s[part] > t
        return many_run_epsilon_lower(int((said_in & neg).sum()), int(neg.sum()), int((~said_in & pos).sum()),
                                      int(pos.sum()), cfg.confidence, cfg.delta)

    cands = np.unique(s[a])
    cands = np.concatenate([cands - 1e-12, [cands.max() + 1.0]]) if cands.size else np.array([0.0])
    if cands.size > 512:
        cands = np.quantile(cands, np.linspace(0, 1, 512))
    best = max(cands, key=lambda t: bound_at(float(t), a))
    lower = bound_at(float(best), b)
    said = s[b] > best
    correct = int((said == member[b]).sum())
    return AuditResult(
        unit=str(cfg.unit), method="many_runs", epsilon_lower=lower,
        epsilon_theory=theory_epsilon(cfg.unit, cfg.epsilon, trips, cfg.delta), trips=trips,
        guesses=n - half, correct=correct, canaries=1,
        details={"week": week, "runs": n, "threshold_score": float(best), "config": cfg.to_dict(),
                 "target_others": others.tolist()})
