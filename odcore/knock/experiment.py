"""End-to-end Knock Knock experiments: game -> aggregates -> features -> classifiers -> AUC/PL/PG (+ MRE).

:func:`run_experiment` is the one entry point the CLI and the dashboard call (Pyrgelis et al. 2018, §V–§VII).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from odcore.data.validate import check_param
from odcore.errors import ParameterError, check_positive, coerce_enum
from odcore.knock.classifiers import ALL_CLASSIFIERS, Classifier, fit_scores, parse_classifiers
from odcore.knock.defences import ALL_MECHANISMS, Clip, DefenceConfig, Mechanism, TransformNorm, perturb
from odcore.knock.features import Selection, extract_features, select_features
from odcore.knock.game import GameConfig, GameData, Prior, make_game, periods, sample_unique_groups
from odcore.knock.metrics import auc, mre, mre_denominator, privacy_gain, privacy_loss, roc, sample_targets
from odcore.knock.timeseries import LocationTimeSeries, TimeSeriesConfig, build_timeseries

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class KnockConfig:
    """One membership-inference experiment (hashable: a good cache key).

    Parameters
    ----------
    prior, m, alpha:
        Game (see :class:`~odcore.knock.game.GameConfig`).
    targets:
        Number of target users, sampled equally from the three mobility thirds (paper: 150).
    target_ids:
        Explicit target user ids instead of sampling (then ``targets`` is ignored).
    classifiers:
        Tuple of :class:`~odcore.knock.classifiers.Classifier` (or a ``"lr,knn,rf,mlp"`` string).
    selection:
        :class:`~odcore.knock.features.Selection` (default ``variance``; the paper's is ``rfe``).
    defence, epsilon, delta, kappa, clip, norm:
        Optional DP defence applied to the released (test) aggregates with fresh noise (§VII).
    train_on_noisy:
        The strategic adversary: train on noisy aggregates too (fresh noise), §VII-B case (2).
    seed:
        Seed of everything random (game, targets, noise, classifiers).
    n_train, n_test, beta, n_groups, period_slots, inference_period:
        Game sizes (paper defaults).
    allow_repeats:
        Allow repeated groups when fewer distinct groups exist than needed (e.g. m = 1).
    n_jobs:
        Parallel jobs for the random forest.
    """

    prior: Prior = Prior.SUBSET
    m: int = 10
    alpha: float = 0.2
    targets: int = 3
    target_ids: tuple[str, ...] | None = None
    classifiers: tuple[Classifier, ...] = ALL_CLASSIFIERS
    selection: Selection = Selection.VARIANCE
    defence: Mechanism | None = None
    epsilon: float | None = None
    delta: float = 0.1
    kappa: int = 20
    clip: Clip = Clip.GROUP
    norm: TransformNorm = TransformNorm.ORTHO
    round_counts: bool = False
    train_on_noisy: bool = False
    seed: int = 0
    n_train: int = 400
    n_test: int = 100
    beta: int = 150
    n_groups: int = 400
    period_slots: int = 168
    inference_period: int | None = None
    observation_stride: int | None = None
    allow_repeats: bool = False
    n_jobs: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "classifiers", parse_classifiers(self.classifiers))
        for name, enum in (("prior", Prior), ("clip", Clip), ("norm", TransformNorm), ("selection", Selection)):
            coerce_enum(self, name, enum)
        if self.defence is not None:
            coerce_enum(self, "defence", Mechanism)
            if self.epsilon is None:
                raise ParameterError(f"defence={self.defence.value} needs epsilon.")
        if self.train_on_noisy and self.defence is None:
            raise ParameterError("train_on_noisy needs a defence.")
        for name in ("m", "alpha", "targets", "n_train", "n_test", "beta", "n_groups", "period_slots", "kappa",
                     "n_jobs", "inference_period"):   # the one rule of odcore.data.validate.PARAMETERS (as the CLI)
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_param(name, getattr(self, name)))
        if self.target_ids is not None:
            object.__setattr__(self, "target_ids", tuple(str(t) for t in self.target_ids))
        if not isinstance(self.seed, int | np.integer) or self.seed < 0:
            raise ParameterError(f"seed must be an integer >= 0, got seed={self.seed!r}.")
        self.game()  # validates the game parameters

    def game(self) -> GameConfig:
        return GameConfig(prior=self.prior, m=self.m, alpha=self.alpha, n_train=self.n_train, n_test=self.n_test,
                          beta=self.beta, n_groups=self.n_groups, period_slots=self.period_slots,
                          inference_period=self.inference_period, observation_stride=self.observation_stride,
                          allow_repeats=self.allow_repeats)

    def defence_config(self, sensitivity: float) -> DefenceConfig | None:
        if self.defence is None:
            return None
        return DefenceConfig(self.defence, self.epsilon, sensitivity, delta=self.delta, kappa=self.kappa,
                             clip=self.clip, norm=self.norm, round_counts=self.round_counts)


@dataclass(frozen=True, eq=False)
class TargetResult:
    """Result for one target: AUC per classifier (on the released aggregates, noisy when a defence is set)."""

    target: str
    mobility: str
    reports: int
    auc: dict[str, float]
    pl: dict[str, float]
    roc: dict[str, dict[str, list[float]]]
    auc_raw: dict[str, float] | None = None  # defence runs: AUC on raw released aggregates (trained on raw)
    pg: dict[str, float] | None = None
    notes: tuple[str, ...] = ()

    def best(self) -> tuple[str, float]:
        """The best classifier for this target (the paper's "BEST" curve)."""
        name = max(self.auc, key=lambda k: self.auc[k])
        return name, self.auc[name]

    def to_dict(self, *, with_roc: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"target": self.target, "mobility": self.mobility, "reports": self.reports,
                             "auc": self.auc, "pl": self.pl, "best": {"classifier": self.best()[0],
                                                                       "auc": self.best()[1]}}
        if self.auc_raw is not None:
            d["auc_raw"] = self.auc_raw
            d["pg"] = self.pg
        if with_roc:
            d["roc"] = self.roc
        if self.notes:
            d["notes"] = list(self.notes)
        return d


@dataclass(frozen=True, eq=False)
class KnockResult:
    config: KnockConfig
    per_target: tuple[TargetResult, ...]
    sensitivity: int
    seconds: float
    series: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)   # seconds per step, summed over targets (and workers)
    mre: float | None = None
    workers: int = 1

    def _mean(self, attr: str) -> dict[str, float]:
        out = {}
        for c in self.config.classifiers:
            vals = [getattr(t, attr)[c.value] for t in self.per_target if getattr(t, attr) is not None]
            if vals:
                out[c.value] = float(np.mean(vals))
        if attr in ("auc", "pl") and self.per_target:
            best = [t.best()[1] for t in self.per_target]
            out["best"] = float(np.mean(best if attr == "auc" else privacy_loss(np.array(best))))
        return out

    @property
    def mean_auc(self) -> dict[str, float]:
        return self._mean("auc")

    @property
    def mean_pl(self) -> dict[str, float]:
        return self._mean("pl")

    @property
    def mean_pg(self) -> dict[str, float] | None:
        return self._mean("pg") if self.config.defence is not None else None

    def by_mobility(self) -> dict[str, dict[str, float]]:
        """Mean AUC per classifier within each mobility third."""
        out: dict[str, dict[str, float]] = {}
        for cls in ("high", "mild", "somewhat"):
            ts = [t for t in self.per_target if t.mobility == cls]
            if ts:
                out[cls] = {c.value: float(np.mean([t.auc[c.value] for t in ts])) for c in self.config.classifiers}
        return out

    def to_dict(self, *, with_roc: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "config": {k: (v.value if hasattr(v, "value") else ([x.value for x in v] if k == "classifiers" else v))
                       for k, v in self.config.__dict__.items()},
            "per_target": [t.to_dict(with_roc=with_roc) for t in self.per_target],
            "mean_auc": self.mean_auc, "mean_pl": self.mean_pl, "by_mobility": self.by_mobility(),
            "sensitivity": self.sensitivity, "seconds": round(self.seconds, 3), "series": self.series,
            "timings": {k: round(v, 3) for k, v in self.timings.items()}, "workers": self.workers,
        }
        if self.config.defence is not None:
            d["mean_pg"] = self.mean_pg
            d["mean_auc_raw"] = self._mean("auc_raw")
            d["mre"] = self.mre
        return d


def as_timeseries(data: LocationTimeSeries | pd.DataFrame, ts_config: TimeSeriesConfig | None = None
                  ) -> LocationTimeSeries:
    if isinstance(data, LocationTimeSeries):
        return data
    if isinstance(data, pd.DataFrame):
        return build_timeseries(data, ts_config)
    raise ParameterError(f"data must be a trace DataFrame or LocationTimeSeries, got {type(data).__name__}.")


def _samples(ts: LocationTimeSeries, groups: np.ndarray, windows: tuple[tuple[int, int], ...],
             cache: dict[tuple[int, int], Any]) -> np.ndarray:
    """Aggregates of every (window, group) pair stacked window-major: ``(len(windows)·n_groups, ROI, T)``."""
    parts = []
    for w in windows:
        if w not in cache:
            cache[w] = ts.aggregation_operand(*w)
        parts.append(ts.aggregate(groups, *w, window=cache[w]))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def run_target(ts: LocationTimeSeries, target: int, config: KnockConfig, rng: np.random.Generator, *,
               sensitivity: int, window_cache: dict | None = None, timings: dict | None = None,
               mobility: str = "", mre_out: list | None = None, clf_jobs: int | None = None,
               float32: bool = True) -> TargetResult:
    """Play the game for one target (training + challenge sets, every classifier).

    ``clf_jobs`` overrides ``config.n_jobs`` (the random forest's threads; 1 inside a worker process);
    ``float32`` is the MLP's precision (:func:`~odcore.knock.classifiers.fit_scores`).
    """
    cache = {} if window_cache is None else window_cache
    tm = {} if timings is None else timings
    t0 = time.perf_counter()
    game: GameData = make_game(ts.n_users, ts.n_slots, target, config.game(), rng)
    a_tr = _samples(ts, game.train_groups, game.train_windows, cache)
    a_te = _samples(ts, game.test_groups, game.test_windows, cache)
    y_tr, y_te = game.sample_labels("train"), game.sample_labels("test")
    t1 = time.perf_counter()
    tm["aggregate"] = tm.get("aggregate", 0.0) + t1 - t0
    x_tr_raw = extract_features(a_tr)
    x_te_raw = extract_features(a_te)
    dcfg = config.defence_config(sensitivity)
    x_te_noisy = x_tr_noisy = None
    if dcfg is not None:
        noisy_te = perturb(a_te, dcfg, rng, group_size=config.m)
        if mre_out is not None:
            mre_out.append(mre(a_te, noisy_te))
        x_te_noisy = extract_features(noisy_te)
        if config.train_on_noisy:
            x_tr_noisy = extract_features(perturb(a_tr, dcfg, rng, group_size=config.m))
    t2 = time.perf_counter()
    tm["features"] = tm.get("features", 0.0) + t2 - t1
    seed = int(rng.integers(2**31 - 1))
    fit = {"seed": seed, "n_jobs": config.n_jobs if clf_jobs is None else clf_jobs, "float32": float32}
    x_tr = x_tr_noisy if x_tr_noisy is not None else x_tr_raw
    keep = select_features(x_tr, y_tr, config.selection)
    keep_raw = select_features(x_tr_raw, y_tr, config.selection) if x_tr_noisy is not None else keep
    t3 = time.perf_counter()
    tm["selection"] = tm.get("selection", 0.0) + t3 - t2
    aucs, pls, rocs, aucs_raw, pgs = {}, {}, {}, {}, {}
    for clf in config.classifiers:
        if dcfg is None:
            (s,) = fit_scores(clf, x_tr[:, keep], y_tr, [x_te_raw[:, keep]], **fit)
        elif x_tr_noisy is None:  # passive adversary: trained on raw, tested on raw and on noisy
            s_raw, s = fit_scores(clf, x_tr_raw[:, keep], y_tr, [x_te_raw[:, keep], x_te_noisy[:, keep]], **fit)
            aucs_raw[clf.value] = auc(y_te, s_raw)
        else:  # strategic adversary: trained on noisy; AUC_A from the raw-trained classifier on raw aggregates
            (s_raw,) = fit_scores(clf, x_tr_raw[:, keep_raw], y_tr, [x_te_raw[:, keep_raw]], **fit)
            (s,) = fit_scores(clf, x_tr[:, keep], y_tr, [x_te_noisy[:, keep]], **fit)
            aucs_raw[clf.value] = auc(y_te, s_raw)
        a = auc(y_te, s)
        aucs[clf.value] = a
        pls[clf.value] = float(privacy_loss(a))
        rocs[clf.value] = roc(y_te, s)
        if dcfg is not None:
            pgs[clf.value] = float(privacy_gain(aucs_raw[clf.value], a))
    tm["classify"] = tm.get("classify", 0.0) + time.perf_counter() - t3
    reports = int(ts.reports(*game.test_windows[0])[target])
    return TargetResult(str(ts.users[target]), mobility, reports, aucs, pls, rocs,
                        aucs_raw if dcfg is not None else None, pgs if dcfg is not None else None, game.notes)


# One worker process's copy of the series and settings, set once by its initializer (spawned processes only; the
# parent never writes it).
_WORKER_STATE: dict[str, Any] = {}


def _worker_init(ts_file: str, config: KnockConfig, sensitivity: int, float32: bool) -> None:
    """A worker process's start: the series read from the file the parent wrote (a process is started with a few
    bytes of arguments: a large series written into its start-up pipe would block the parent for good if the child
    died before reading it)."""
    threadpool_limits(limits=1)   # one process per core: BLAS and OpenMP single-threaded inside each
    with open(ts_file, "rb") as fh:
        ts = pickle.load(fh)
    _WORKER_STATE.update(ts=ts, config=config, sensitivity=sensitivity, float32=float32, cache={})


def _worker_play(target: int, mobility: str, rng: np.random.Generator
                 ) -> tuple[TargetResult, dict[str, float], list]:
    st = _WORKER_STATE
    tm: dict[str, float] = {}
    mres: list = []
    r = run_target(st["ts"], target, st["config"], rng, sensitivity=st["sensitivity"], window_cache=st["cache"],
                   timings=tm, mobility=mobility, mre_out=mres, clf_jobs=1, float32=st["float32"])
    return r, tm, mres


def play_order(classes) -> list[int]:
    """Target positions taken in turn from each mobility third (high, mild, somewhat, high, ...).

    The result does not depend on the order targets are played in; this one makes any prefix of the finished
    targets (an interrupted run's log) a balanced sample of the thirds.

    >>> play_order(["high", "high", "mild", "mild", "somewhat"])
    [0, 2, 4, 1, 3]
    """
    by: dict[Any, list[int]] = {}
    for i, c in enumerate(classes):
        by.setdefault(c, []).append(i)
    rounds = max((len(v) for v in by.values()), default=0)
    return [v[k] for k in range(rounds) for v in by.values() if k < len(v)]


def run_experiment(data: LocationTimeSeries | pd.DataFrame, config: KnockConfig,
                   rng: np.random.Generator | int | None = None, *, ts_config: TimeSeriesConfig | None = None,
                   progress: Progress | None = None, workers: int = 1, float32: bool = True) -> KnockResult:
    """Run the membership-inference game for ``config.targets`` targets (Pyrgelis et al. 2018, §V-B).

    Each target plays with its own random stream, spawned from ``rng`` after the targets are drawn, so the result
    is the same for any number of ``workers``.

    Parameters
    ----------
    data:
        A trace table (built into series with ``ts_config``) or a ready :class:`LocationTimeSeries`.
    config:
        :class:`KnockConfig`.
    rng:
        Seed or generator; default ``config.seed``.
    progress:
        ``progress(done, total, message)`` called before the first and after each target (in the order targets
        finish when ``workers > 1``).
    workers:
        Processes playing targets in parallel (spawned, one per core, each single-threaded; the random forest then
        uses one thread). 1 plays them here, one after the other.
    float32:
        Train the MLP in single precision (see :mod:`odcore.knock.classifiers`).

    Returns
    -------
    KnockResult
        Per-target AUC, PL, ROC (and AUC on raw, PG and the MRE of the released aggregates under a defence),
        means over targets, Δ and timings.
    """
    t_start = time.perf_counter()
    rng = np.random.default_rng(config.seed if rng is None else rng)
    ts = as_timeseries(data, ts_config)
    game_cfg = config.game()
    n_per = periods(ts.n_slots, game_cfg.period_slots)
    multi = game_cfg.prior in (Prior.SAME_GROUPS, Prior.DIFFERENT_GROUPS)
    inf = game_cfg.inference_period if game_cfg.inference_period is not None else (n_per - 1 if multi else 0)
    if n_per < 1 or inf >= n_per:
        raise ParameterError(f"the series has {n_per} full periods of {game_cfg.period_slots} slots; cannot use "
                             f"inference period {inf}.")
    t_inf = (inf * game_cfg.period_slots, (inf + 1) * game_cfg.period_slots)
    sensitivity = ts.sensitivity(*t_inf)
    all_reports = ts.reports()
    if config.target_ids is not None:
        lookup = {str(u): i for i, u in enumerate(ts.users)}
        missing = [t for t in config.target_ids if t not in lookup]
        if missing:
            raise ParameterError(f"target ids not in the data: {missing[:5]}{'...' if len(missing) > 5 else ''}.")
        idx = np.array([lookup[t] for t in config.target_ids])
        order = np.argsort(-all_reports, kind="stable")
        third = np.empty(ts.n_users, dtype=object)
        for name, part in zip(("high", "mild", "somewhat"), np.array_split(order, 3), strict=True):
            third[part] = name
        classes = third[idx]
    else:
        idx, classes = sample_targets(all_reports, config.targets, rng)
    total = len(idx)
    if progress:
        progress(0, total, f"{total} targets, prior={config.prior.value}, m={config.m}")
    workers = int(check_param("workers", workers))
    streams = rng.spawn(total)
    timings: dict[str, float] = {}
    mres: list = []
    results: list[TargetResult | None] = [None] * total

    def done(i: int, r: TargetResult, tm: dict[str, float], mre_parts: list) -> None:
        results[i] = r
        for k, v in tm.items():
            timings[k] = timings.get(k, 0.0) + v
        mres.extend(mre_parts)
        if progress:
            aucs = " ".join(f"{k}={v:.3f}" for k, v in r.auc.items())
            progress(sum(x is not None for x in results), total, f"target {r.target} ({r.mobility}): AUC {aucs}")

    order = play_order(classes)
    if workers == 1 or total == 1:
        cache: dict = {}
        for i in order:
            tm: dict[str, float] = {}
            parts: list = []
            r = run_target(ts, int(idx[i]), config, streams[i], sensitivity=sensitivity, window_cache=cache,
                           timings=tm, mobility=str(classes[i]), mre_out=parts, float32=float32)
            done(i, r, tm, parts)
    else:
        with tempfile.TemporaryDirectory(prefix="odlab_knock_") as tmp:
            ts_file = os.path.join(tmp, "series.pkl")
            with open(ts_file, "wb") as fh:
                pickle.dump(ts, fh, protocol=pickle.HIGHEST_PROTOCOL)
            with ProcessPoolExecutor(max_workers=min(workers, total), mp_context=multiprocessing.get_context("spawn"),
                                     initializer=_worker_init, initargs=(ts_file, config, sensitivity, float32)) as pool:
                futures = {pool.submit(_worker_play, int(idx[i]), str(classes[i]), streams[i]): i for i in order}
                for fut in as_completed(futures):
                    done(futures[fut], *fut.result())
    mre_val = None
    if mres:
        allm = np.concatenate([m.ravel() for m in mres])
        mre_val = float(np.nanmean(allm)) if np.isfinite(allm).any() else None
    return KnockResult(config, tuple(r for r in results if r is not None), sensitivity, time.perf_counter() - t_start,
                       ts.summary() | {"inference_slots": list(t_inf)}, timings, mre_val, workers)


@dataclass(frozen=True)
class MREConfig:
    """Utility table of the defences (Tables II/III): MRE of released aggregates of random groups.

    Parameters
    ----------
    epsilons:
        ε values (paper: 0.01, 0.1, 1, 10).
    mechanisms:
        Mechanisms to evaluate (default all five).
    m:
        Group size (paper SFC: 500); ``None`` -> ``min(500, users - 1)``.
    n_groups:
        Number of random groups whose inference-period aggregates are perturbed (MRE averaged over groups and ROIs).
    period_slots, inference_period:
        The released period (default: the first week).
    delta, kappa, clip, norm, round_counts:
        Mechanism parameters (paper: δ = 0.1, κ = 20 for SFC) and post-processing.
    gamma_scope:
        ``series`` (γ = 0.1% of each ROI series' sum, the paper's wording) or ``matrix`` (of the whole release).
    seed:
        Seed.
    """

    epsilons: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)
    mechanisms: tuple[Mechanism, ...] = ALL_MECHANISMS
    m: int | None = None
    n_groups: int = 20
    period_slots: int = 168
    inference_period: int = 0
    delta: float = 0.1
    kappa: int = 20
    clip: Clip = Clip.GROUP
    norm: TransformNorm = TransformNorm.ORTHO
    round_counts: bool = False
    gamma_scope: str = "series"
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("m", "n_groups", "period_slots", "inference_period", "kappa"):   # as KnockConfig and the CLI
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_param(name, getattr(self, name)))
        if self.gamma_scope not in ("series", "matrix"):
            raise ParameterError(f"gamma_scope must be 'series' or 'matrix', got {self.gamma_scope!r}.")
        if not self.epsilons:
            raise ParameterError("epsilons must hold at least one value.")
        object.__setattr__(self, "epsilons", tuple(check_positive("epsilon", e) for e in self.epsilons))
        try:
            object.__setattr__(self, "mechanisms", tuple(Mechanism(x) for x in self.mechanisms))
        except ValueError as exc:
            raise ParameterError(f"mechanisms: {exc}; expected some of {[x.value for x in Mechanism]}.") from None
        for name, enum in (("clip", Clip), ("norm", TransformNorm)):
            coerce_enum(self, name, enum)
        if self.m is not None and (int(self.m) != self.m or self.m < 1):
            raise ParameterError(f"m must be an integer >= 1, got m={self.m!r}.")
        if int(self.n_groups) != self.n_groups or self.n_groups < 1:
            raise ParameterError(f"n_groups must be an integer >= 1, got n_groups={self.n_groups!r}.")


def mre_table(data: LocationTimeSeries | pd.DataFrame, config: MREConfig | None = None,
              rng: np.random.Generator | int | None = None, *, ts_config: TimeSeriesConfig | None = None
              ) -> dict[str, Any]:
    """MRE of each mechanism and ε on the inference-period aggregates of random groups (§VII-C, Tables II/III).

    Returns ``{"mre": {mechanism: {str(ε): mean over groups and ROI series}}, "mre_median": same with the median,
    "sensitivity": Δ, "l2_sensitivity": Δ₂, "m": m,
    "n_groups": ..., "series_without_mre": count of all-zero ROI series (MRE undefined, excluded)}``.
    """
    config = config or MREConfig()
    rng = np.random.default_rng(config.seed if rng is None else rng)
    ts = as_timeseries(data, ts_config)
    p = config.inference_period
    t0, t1 = p * config.period_slots, (p + 1) * config.period_slots
    if t1 > ts.n_slots:
        raise ParameterError(f"inference period {p} of {config.period_slots} slots ends after the series "
                             f"({ts.n_slots} slots).")
    m = config.m if config.m is not None else min(500, ts.n_users - 1)
    if m > ts.n_users:
        raise ParameterError(f"m={m} exceeds the {ts.n_users} users.")
    groups = sample_unique_groups(rng, np.arange(ts.n_users), m, config.n_groups, allow_repeats=True)
    agg = ts.aggregate(groups, t0, t1)
    delta_l1 = ts.sensitivity(t0, t1)
    table: dict[str, dict[str, float]] = {}
    medians: dict[str, dict[str, float]] = {}
    undefined = 0
    den = mre_denominator(agg, scope=config.gamma_scope)     # the same for every mechanism and ε
    memo: dict = {}
    for mech in config.mechanisms:
        row, med = {}, {}
        for eps in config.epsilons:
            cfg = DefenceConfig(mech, eps, delta_l1, delta=config.delta, kappa=config.kappa, clip=config.clip,
                                norm=config.norm, round_counts=config.round_counts)
            r = mre(agg, perturb(agg, cfg, rng, group_size=m, memo=memo), denominator=den)
            undefined = int(np.isnan(r).sum())
            row[f"{eps:g}"] = float(np.nanmean(r))
            med[f"{eps:g}"] = float(np.nanmedian(r))
        table[mech.value] = row
        medians[mech.value] = med
    return {"mre": table, "mre_median": medians, "sensitivity": delta_l1, "l2_sensitivity": float(np.sqrt(delta_l1)), "m": m,
            "n_groups": config.n_groups, "inference_slots": [t0, t1], "series_without_mre": undefined,
            "clip": config.clip.value, "norm": config.norm.value,
            "round_counts": config.round_counts, "gamma_scope": config.gamma_scope, "kappa": config.kappa, "delta": config.delta}
