"""Which pairs to publish: the lab's "Laplace then τ" beside the partition selection of the DP libraries.

The lab's release (Bassolas et al.) adds Laplace noise of scale m/ε to each bounded count and publishes the pair when
that same noisy count reaches τ; with τ fitted to δ (:func:`odcore.privacy.accounting.partition_threshold`) this is
exactly the Laplace thresholding of Google's differential-privacy library (Desfontaines, Voss, Gipson and Mandayam,
"Differentially private partition selection", PoPETs 2022), with one noisy count serving both the selection and the
published value. The libraries' default pipeline instead composes two mechanisms — a partition selection (the
optimal truncated geometric, or Laplace / Gaussian thresholding on a noisy count of its own) and a separate noisy
count — and splits ε between them.

:func:`keep_probability` gives each strategy's exact chance of publishing a pair with ``n`` people (checked against
PyDP's ``probability_of_keep`` in the tests); :func:`compare_selection` runs them on one week's pairs at the same
(ε, δ) per person and week, and, when PipelineDP is installed (a test and benchmark dependency, never the engine's),
PipelineDP itself on the same pairs.
"""

from __future__ import annotations

import math
from enum import StrEnum

import numpy as np
import pandas as pd
from scipy import optimize
from scipy.special import (
    ndtr,  # Φ (scipy.stats.norm.cdf is ndtr behind argument checks that cost 50 µs)
    ndtri,  # Φ⁻¹: norm.isf(q) is -ndtri(q)
)

from odcore.constants import DESTINATION, ORIGIN, USER, WEEK
from odcore.errors import ParameterError, check_max_pairs, check_positive, check_prob
from odcore.od.bounding import bounding_key
from odcore.od.pairs import PreparedPairs, bounded_counts, prepare_pairs
from odcore.privacy.accounting import partition_threshold
from odcore.privacy.release import TRUE_COUNT, release_probability
from odcore.privacy.utility import shapley_split

__all__ = ["Strategy", "compare_selection", "gaussian_delta", "gaussian_one_count", "gaussian_sigma", "keep_probability",
           "run_pipeline_dp", "truncated_geometric_keep"]


MECHANISMS = {
    "lab: Laplace then tau (one noisy count)": "Laplace, one count",
    "lab: Gaussian then tau (one noisy count)": "Gaussian, one count",
    "truncated geometric + separate count": "truncated geometric selection + Laplace count",
    "Laplace thresholding + separate count": "Laplace selection + Laplace count",
    "PipelineDP: truncated_geometric": "truncated geometric selection + Laplace count",
    "PipelineDP: laplace": "Laplace selection + Laplace count",
    "PipelineDP: gaussian": "Gaussian selection + Gaussian count",
    "PipelineDP: laplace (post-aggregation thresholding)": "Laplace, one count",
    "PipelineDP: gaussian (post-aggregation thresholding)": "Gaussian, one count",
}
"""The noise mechanism of each row of :func:`compare_selection`, so that rows are compared mechanism for mechanism
(the lab's one-count Laplace beside PipelineDP's post-aggregation Laplace, Gaussian beside Gaussian)."""


class Strategy(StrEnum):
    """Partition selection strategies."""

    LAB_ONE_COUNT = "lab: Laplace then tau (one noisy count)"
    LAB_GAUSSIAN_ONE_COUNT = "lab: Gaussian then tau (one noisy count)"
    TRUNCATED_GEOMETRIC = "truncated geometric + separate count"
    LAPLACE_THRESHOLDING = "Laplace thresholding + separate count"


def truncated_geometric_keep(n, epsilon: float, delta: float, max_partitions: int = 1) -> np.ndarray:
    """Keep probability of the optimal (ε, δ) partition selection for partitions with ``n`` people.

    Desfontaines et al. (PoPETs 2022), Theorem 1: ``π(0) = 0``, ``π(n) = min(e^ε π(n−1) + δ,
    1 − e^{−ε}(1 − π(n−1) − δ), 1)``, the largest keep probabilities an (ε, δ)-DP selection can have for a person in
    one partition. A person in up to ``m`` partitions: each partition gets ``ε/m`` and ``δ_adj = 1 − (1 − δ)^{1/m}``
    (the Google library's ``TruncatedGeometricPartitionSelection``).

    >>> truncated_geometric_keep([0, 1, 30], 1.0, 1e-6).round(6).tolist()
    [0.0, 1e-06, 1.0]
    """
    eps = check_positive("epsilon", epsilon)
    d = check_prob("delta", delta)
    m = check_max_pairs(max_partitions)
    n = np.asarray(n, dtype=np.int64)
    if n.size and n.min() < 0:
        raise ParameterError("n must be counts of people >= 0.")
    e = eps / m
    da = -math.expm1(math.log1p(-d) / m)
    top = int(n.max()) if n.size else 0
    pi = np.zeros(top + 1)
    ee, ei = math.exp(e), math.exp(-e)
    for k in range(1, top + 1):
        pi[k] = min(ee * pi[k - 1] + da, 1.0 - ei * (1.0 - pi[k - 1] - da), 1.0)
        if pi[k] >= 1.0:
            pi[k:] = 1.0
            break
    return pi[n]


def gaussian_delta(sigma: float, epsilon: float, l2: float = 1.0) -> float:
    """δ(ε) of the Gaussian mechanism with noise σ and L2 sensitivity ``l2`` (Balle and Wang 2018, Theorem 8):
    ``Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ)``."""
    a, b = l2 / (2 * sigma), epsilon * sigma / l2
    return float(ndtr(a - b) - math.exp(epsilon) * ndtr(-a - b))


def gaussian_sigma(epsilon: float, delta: float, l2: float = 1.0) -> float:
    """Smallest σ for which the Gaussian mechanism of L2 sensitivity ``l2`` is (ε, δ)-DP (analytic Gaussian
    mechanism, Balle and Wang 2018), by bisection on :func:`gaussian_delta` (decreasing in σ).

    >>> round(gaussian_sigma(1.0, 1e-5), 3)
    3.731
    """
    eps = check_positive("epsilon", epsilon)
    d = check_prob("delta", delta)
    hi = 1.0
    while gaussian_delta(hi, eps, l2) > d:
        hi *= 2
    return float(optimize.brentq(lambda s: gaussian_delta(s, eps, l2) - d, 1e-9, hi, xtol=1e-12, rtol=1e-12))


def gaussian_one_count(epsilon: float, delta: float, max_partitions: int) -> tuple[float, float]:
    """(σ, τ) of the Gaussian release with one noisy count: each person's m pairs have L2 sensitivity √m; half of δ
    goes to the Gaussian mechanism on the pairs both neighbours have, half to the chance that any of a person's m
    pairs of their own (count 1) clears τ: ``1 − (1 − P(1 + N(0, σ²) >= τ))^m = δ/2``."""
    m = check_max_pairs(max_partitions)
    sigma = gaussian_sigma(epsilon, delta / 2, math.sqrt(m))
    d1 = -math.expm1(math.log1p(-delta / 2) / m)
    return sigma, 1.0 + sigma * float(-ndtri(d1))


def keep_probability(strategy: Strategy | str, n, epsilon: float, delta: float, max_partitions: int,
                     selection_share: float = 0.5) -> np.ndarray:
    """Chance that a pair with ``n`` people (after bounding to ``max_partitions`` pairs a person) is published.

    ``LAB_ONE_COUNT`` spends all of ε on one noisy count; the two others give ``selection_share`` of ε to the
    selection (the rest to the published count) and all of δ to the selection.
    """
    s = Strategy(strategy)
    m = check_max_pairs(max_partitions)
    eps = check_positive("epsilon", epsilon)
    counts = np.asarray(n)
    n = np.asarray(counts, dtype=float)
    if counts.dtype.kind in "iu":   # integer counts: release_probability takes each distinct value once
        counts = counts.astype(np.int64)
    else:
        counts = n
    if s is Strategy.LAB_ONE_COUNT:
        return release_probability(counts, eps, partition_threshold(eps, m, delta), m)
    if s is Strategy.LAB_GAUSSIAN_ONE_COUNT:
        sigma, tau = gaussian_one_count(eps, delta, m)
        return ndtr(-((tau - n) / sigma))
    es = eps * selection_share
    if s is Strategy.TRUNCATED_GEOMETRIC:
        return truncated_geometric_keep(n.astype(np.int64), es, delta, m)
    return release_probability(counts, es, partition_threshold(es, m, delta), m)


def _bounded_counts(prep: PreparedPairs, max_pairs: int, rng: np.random.Generator) -> pd.DataFrame:
    """``DataFrame[week, origin, destination, raw_count, count]`` of the pairs in ``prep``: distinct people before
    and after each person's week is cut to ``max_pairs`` pairs by the lab's rule (the hash key is the first draw of
    ``rng``, as in :func:`odcore.od.pairs.bound_contributions`), in (week, origin, destination) order."""
    table, _ = bounded_counts(prep, max_pairs, bounding_key(rng))
    return table.rename(columns={TRUE_COUNT: "count"})


def run_pipeline_dp(pairs: pd.DataFrame, epsilon: float, delta: float, max_pairs: int, strategy: str,
                    post_aggregation_thresholding: bool = False) -> pd.DataFrame:
    """PipelineDP (OpenMined / Google) on the same pairs: distinct people per (week, origin, destination) with its
    own contribution bounding (``max_partitions_contributed = max_pairs``, one per pair) and partition selection.

    Returns ``DataFrame[week, origin, destination, noisy_count]`` of the pairs it publishes. Its noise is drawn by
    PyDP's secure generator: not seedable, so repeated runs differ.
    """
    try:
        import pipeline_dp
    except ImportError:
        raise ParameterError("PipelineDP is not installed (pip install pipeline-dp; requirements-dev.txt has it).") \
            from None
    strat = {"truncated_geometric": pipeline_dp.PartitionSelectionStrategy.TRUNCATED_GEOMETRIC,
             "laplace": pipeline_dp.PartitionSelectionStrategy.LAPLACE_THRESHOLDING,
             "gaussian": pipeline_dp.PartitionSelectionStrategy.GAUSSIAN_THRESHOLDING}[strategy]
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=epsilon, total_delta=delta)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT], max_partitions_contributed=max_pairs,
        max_contributions_per_partition=1, partition_selection_strategy=strat,
        post_aggregation_thresholding=post_aggregation_thresholding,
        noise_kind=pipeline_dp.NoiseKind.GAUSSIAN if strategy == "gaussian" else pipeline_dp.NoiseKind.LAPLACE)
    ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[1], partition_extractor=lambda r: (r[0], r[2], r[3]),
                                     value_extractor=lambda r: 0)
    rows = list(pairs[[WEEK, USER, ORIGIN, DESTINATION]].itertuples(index=False, name=None))
    out = engine.aggregate(rows, params, ext)
    acc.compute_budgets()
    res = [(k[0], k[1], k[2], float(v.privacy_id_count)) for k, v in out]
    return pd.DataFrame(res, columns=[WEEK, ORIGIN, DESTINATION, "noisy_count"]).sort_values([WEEK, ORIGIN, DESTINATION],
                                                                                             ignore_index=True)


def _row(name: str, reason: str, counts: pd.DataFrame, keep: np.ndarray, noisy: np.ndarray | None,
         published: np.ndarray, eps_sel: float | str, eps_count: float | str) -> dict:
    """One strategy's figures: expected pairs and user-trips kept (exact, from ``keep``) or counted (PipelineDP),
    the pairs and user-trips one run publishes, and its error split into bounding and noise."""
    raw = counts["raw_count"].to_numpy(float)
    n = counts["count"].to_numpy(float)
    pub = published
    row = {"strategy": name, "epsilon_selection": eps_sel, "epsilon_count": eps_count,
           "pairs_expected": float(keep.sum()) if keep is not None else math.nan,
           "user_trips_expected": float((keep * raw).sum()) if keep is not None else math.nan,
           "pairs_published": int(pub.sum()), "user_trips_published": int(raw[pub].sum())}
    if pub.any() and noisy is not None:
        row["mre_total"] = float(np.mean(np.abs(noisy[pub] - raw[pub]) / raw[pub]))
        alone_b = float(np.mean((raw[pub] - n[pub]) / raw[pub]))
        alone_n = float(np.mean(np.abs(noisy[pub] - n[pub]) / raw[pub]))
        row["mre_bounding"], row["mre_noise"] = shapley_split(row["mre_total"], alone_b, alone_n)
    else:
        row.update(mre_total=math.nan, mre_bounding=math.nan, mre_noise=math.nan)
    row["why"] = reason
    return row


def _week_prepared(pairs: pd.DataFrame | PreparedPairs, week: int | None) -> tuple[PreparedPairs, int]:
    """The unique rows of ``week`` (default: the week with the most rows) prepared, and the week."""
    if isinstance(pairs, PreparedPairs):
        w = pairs.pairs.w          # sorted
        if week is None:
            weeks, n = np.unique(w, return_counts=True)
            if not len(weeks):
                raise ParameterError("pairs is empty: no week to compare.")
            week = int(weeks[np.argmax(n)])
        lo, hi = np.searchsorted(w, [week, week + 1])
        if lo == hi:
            raise ParameterError(f"week={week} has no pairs.")
        if hi - lo == len(w):
            return pairs, week
        return prepare_pairs(pairs.pairs.take(np.arange(lo, hi)).frame()), week
    if week is None:
        week = int(pairs[WEEK].value_counts().idxmax())
    wk = pairs.loc[pairs[WEEK].to_numpy() == week, [WEEK, USER, ORIGIN, DESTINATION]]
    if wk.empty:
        raise ParameterError(f"week={week} has no pairs.")
    return prepare_pairs(wk), week


def compare_selection(pairs: pd.DataFrame | PreparedPairs, *, epsilon: float = 1.0, delta: float = 1e-6,
                      max_pairs: int = 10, week: int | None = None, rng=None, pipeline_dp: bool = True,
                      selection_share: float = 0.5) -> pd.DataFrame:
    """Pairs and user-trips kept, and the error, of each selection strategy on one week at equal (ε, δ) per person.

    Parameters
    ----------
    pairs:
        DataFrame[week, user, origin, destination] of unique pairs, or the same prepared by
        :func:`odcore.od.pairs.prepare_pairs` (a week's pairs checked and sorted once serve every seed, ε and
        max pairs: the same table as from the DataFrame).
    epsilon, delta:
        The guarantee per person and week.
    max_pairs:
        Pairs a person keeps in the week (m).
    week:
        Week compared (default: the one with the most pairs).
    rng:
        Seed or Generator of the lab's bounding and noise.
    pipeline_dp:
        Also run PipelineDP (skipped with a row saying so when it is not installed).
    selection_share:
        Share of ε the composed strategies give to the selection.
    """
    eps = check_positive("epsilon", epsilon)
    m = check_max_pairs(max_pairs)
    rng = np.random.default_rng(rng)
    prep, week = _week_prepared(pairs, week)
    counts = _bounded_counts(prep, m, rng)
    people = counts["count"].to_numpy()
    n = people.astype(float)
    live = n > 0
    rows = []
    tau = partition_threshold(eps, m, delta)
    # the lab: one Laplace(m/eps) count, published when it reaches tau
    noisy = n + rng.laplace(0.0, m / eps, size=n.size)
    pub = live & (noisy >= tau)
    keep = np.where(live, keep_probability(Strategy.LAB_ONE_COUNT, people, eps, delta, m), 0.0)
    rows.append(_row(str(Strategy.LAB_ONE_COUNT), f"all of epsilon on one count; tau = {tau:.1f} fitted to delta "
                     "(Google's Laplace thresholding with the same noisy count published)",
                     counts, keep, noisy, pub, eps, "same count"))
    sigma, tau_g = gaussian_one_count(eps, delta, m)
    noisy = n + rng.normal(0.0, sigma, size=n.size)
    pub = live & (noisy >= tau_g)
    keep = np.where(live, keep_probability(Strategy.LAB_GAUSSIAN_ONE_COUNT, people, eps, delta, m), 0.0)
    rows.append(_row(str(Strategy.LAB_GAUSSIAN_ONE_COUNT),
                     f"Gaussian noise sigma = {sigma:.1f} on one count (L2 sensitivity sqrt(m) grows slower than "
                     f"Laplace's m), delta split evenly between the noise and tau = {tau_g:.1f}",
                     counts, keep, noisy, pub, eps, "same count"))
    es, ec = eps * selection_share, eps * (1 - selection_share)
    for s in (Strategy.TRUNCATED_GEOMETRIC, Strategy.LAPLACE_THRESHOLDING):
        keep = np.where(live, keep_probability(s, people, eps, delta, m, selection_share), 0.0)
        sel = live & (rng.random(n.size) < keep)
        noisy = n + rng.laplace(0.0, m / ec, size=n.size)
        why = (f"selection gets {selection_share:.0%} of epsilon ({es:g}) and all of delta, the count the rest "
               f"({ec:g}): the threshold moves up by the factor {1 / selection_share:g} in noise scale")
        if s is Strategy.TRUNCATED_GEOMETRIC:
            why += "; optimal for the selection alone (Desfontaines et al.), so it keeps more than Laplace here"
        rows.append(_row(str(s), why, counts, keep, noisy, sel, es, ec))
    if pipeline_dp:
        wk = prep.pairs.frame()   # the week's unique rows
        key = counts.set_index([WEEK, ORIGIN, DESTINATION])
        for strategy, post in (("truncated_geometric", False), ("laplace", False), ("gaussian", False),
                               ("laplace", True), ("gaussian", True)):
            name = f"PipelineDP: {strategy}" + (" (post-aggregation thresholding)" if post else "")
            try:
                got = run_pipeline_dp(wk, eps, delta, m, strategy, post)
            except ParameterError as e:
                rows.append({"strategy": name, "why": str(e)})
                break
            pos = key.index.get_indexer(pd.MultiIndex.from_frame(got[[WEEK, ORIGIN, DESTINATION]]))
            publ = np.zeros(len(counts), bool)
            publ[pos[pos >= 0]] = True
            nz = np.full(len(counts), np.nan)
            nz[pos[pos >= 0]] = got["noisy_count"].to_numpy()[pos >= 0]
            why = ("its naive accountant splits epsilon evenly between the count and the selection and gives the "
                   "selection all of delta; its own bounding samples each person's pairs (not the lab's pairs)")
            if post:
                why = ("one noisy count for both, as the lab: the selection threshold is applied to the published "
                       "count; " + why.split(";")[1].strip())
            if strategy == "gaussian":
                why += "; Gaussian noise calibrated to (epsilon, delta) per pair of the m a person may touch"
            rows.append(_row(name, why, counts, None, nz, publ, "PipelineDP", "PipelineDP"))
    out = pd.DataFrame(rows)
    out.insert(1, "mechanism", out["strategy"].map(MECHANISMS).fillna("–"))
    out.attrs.update({"week": week, "epsilon": eps, "delta": delta, "max_pairs": m, "people": len(prep.pairs.users),
                      "user_pairs": len(prep), "pairs": int(live.sum())})
    return out
