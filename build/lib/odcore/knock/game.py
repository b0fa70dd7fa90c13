"""The distinguishability game and the adversary's priors (Pyrgelis et al. 2018, §III-B, §IV-A, §V-B, §VI, §VII-B).

For one target ``u*`` a :class:`GameData` holds the groups the adversary trains on (with in/out labels and the time
windows whose aggregates she sees) and the groups of the challenge (test) set. Groups are rows of user indices;
in-groups hold ``u*`` plus ``m-1`` others, out-groups ``m`` others. Labels are balanced and groups unique within
each label unless that is combinatorially impossible (then :class:`~odcore.errors.ParameterError`, or repeats when
``allow_repeats=True``, recorded in ``notes``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from odcore.errors import ParameterError, coerce_enum


class Prior(StrEnum):
    """Adversarial prior knowledge (§IV-A; ``perfect`` is the worst case of §VII-B)."""

    SUBSET = "subset"                      # (1) locations of a fraction alpha of users, target included
    SAME_GROUPS = "same-groups"            # (2a) past aggregates of the very groups released
    DIFFERENT_GROUPS = "different-groups"  # (2b) past aggregates of other groups
    PERFECT = "perfect"                    # §VII-B: knows the released groups' inference-period aggregates


@dataclass(frozen=True)
class GameConfig:
    """Parameters of one game (defaults: the paper's sizes).

    Parameters
    ----------
    prior:
        :class:`Prior`.
    m:
        Group size.
    alpha:
        Fraction of users known to the adversary (``subset``; paper SFC: 0.2 -> 106 of 534 cabs).
    n_train, n_test:
        ``subset``: 400 training groups from the adversary's users, 100 test groups from the others (+ ``u*``).
    beta:
        ``same-groups``: number of groups (150); trained on each observation week, tested on the inference week.
    n_groups, train_fraction:
        ``different-groups``: 400 groups split 75/25 (stratified) into training and test groups;
        ``perfect``: 400 groups, trained and tested on the same groups (§VII-B).
    period_slots:
        Length of a period in slots (168 = one week of hours).
    inference_period:
        Index of the inference period; default 0 for ``subset``/``perfect`` (paper: first week) and the last
        full period for ``same-groups``/``different-groups`` (the observation periods are all the others).
    allow_repeats:
        Permit repeated groups when fewer distinct groups exist than requested (e.g. ``m = 1``).
    """

    prior: Prior = Prior.SUBSET
    m: int = 10
    alpha: float = 0.2
    n_train: int = 400
    n_test: int = 100
    beta: int = 150
    n_groups: int = 400
    train_fraction: float = 0.75
    period_slots: int = 168
    inference_period: int | None = None
    allow_repeats: bool = False

    def __post_init__(self) -> None:
        coerce_enum(self, "prior", Prior)
        for name in ("m", "n_train", "n_test", "beta", "n_groups", "period_slots"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ParameterError(f"{name} must be an integer >= 1, got {name}={v!r}.")
        for name in ("n_train", "n_test", "beta", "n_groups"):
            if getattr(self, name) < 2:
                raise ParameterError(f"{name} must be >= 2 (one in- and one out-group), got {getattr(self, name)}.")
        if not 0 < self.alpha < 1:
            raise ParameterError(f"alpha must be in (0, 1), got alpha={self.alpha}.")
        if not 0 < self.train_fraction < 1:
            raise ParameterError(f"train_fraction must be in (0, 1), got train_fraction={self.train_fraction}.")
        if self.inference_period is not None and (int(self.inference_period) != self.inference_period
                                                  or self.inference_period < 0):
            raise ParameterError(f"inference_period must be an integer >= 0, got {self.inference_period!r}.")


@dataclass(frozen=True, eq=False)
class GameData:
    """Training and challenge sets of one target.

    ``*_groups`` are ``(n, m)`` user-index arrays, ``*_labels`` 1 = target in the group. The adversary's samples are
    every (window, group) pair: ``train_windows`` × ``train_groups`` (window-major), likewise for testing.
    """

    target: int
    train_groups: np.ndarray
    train_labels: np.ndarray
    train_windows: tuple[tuple[int, int], ...]
    test_groups: np.ndarray
    test_labels: np.ndarray
    test_windows: tuple[tuple[int, int], ...]
    notes: tuple[str, ...] = ()

    def sample_labels(self, which: str) -> np.ndarray:
        """Labels of the samples (window-major tiling of the group labels)."""
        lab, win = ((self.train_labels, self.train_windows) if which == "train"
                    else (self.test_labels, self.test_windows))
        return np.tile(lab, len(win))


def sample_unique_groups(rng: np.random.Generator | int | None, pool: np.ndarray, size: int, n: int, *,
                         forced: int | None = None, allow_repeats: bool = False,
                         notes: list[str] | None = None) -> np.ndarray:
    """``n`` distinct groups of ``size`` users from ``pool`` (plus ``forced`` in every group when given).

    Vectorised: each batch draws uniform random subsets as the ``k`` smallest of i.i.d. uniforms per row
    (``argpartition``) and de-duplicates sorted rows with ``np.unique``; a few batches suffice unless the number of
    distinct groups is close to ``n``.
    """
    rng = np.random.default_rng(rng)
    pool = np.asarray(pool)
    k = size - (forced is not None)
    if k < 0 or k > len(pool):
        raise ParameterError(f"cannot draw groups of size m={size} from {len(pool)} users"
                             f"{' plus the target' if forced is not None else ''}: need m <= {len(pool) + (forced is not None)}.")
    capacity = math.comb(len(pool), k)
    if capacity < n and not allow_repeats:
        raise ParameterError(
            f"only {capacity} distinct groups of m={size} exist (pool of {len(pool)} users), but n={n} unique groups "
            "are needed; lower the number of groups, change m, or set allow_repeats=True.")

    def draw(count: int) -> np.ndarray:
        if k == 0:
            return np.empty((count, 0), dtype=np.int64)
        if k == len(pool):
            return np.tile(np.arange(len(pool)), (count, 1))
        return np.argpartition(rng.random((count, len(pool))), k - 1, axis=1)[:, :k]

    if capacity < n:
        picked = draw(n)
        if notes is not None:
            notes.append(f"only {capacity} distinct groups of size {size}: {n} groups drawn with repeats")
    else:
        picked = np.empty((0, k), dtype=np.int64)
        for _ in range(1000):
            need = n - len(picked)
            if need <= 0:
                break
            cand = np.sort(draw(int(need * 1.1) + 4), axis=1)
            allc = np.concatenate([picked, cand])
            _, first = np.unique(allc, axis=0, return_index=True)
            first.sort()
            picked = allc[first][:n]
        else:  # pragma: no cover - only when capacity is barely above n
            raise ParameterError(f"could not draw {n} unique groups of m={size} from {len(pool)} users.")
    groups = pool[picked]
    if forced is not None:
        groups = np.concatenate([np.full((n, 1), forced, dtype=groups.dtype), groups], axis=1)
    # shuffle the order of groups (dedup sorted them)
    return groups[rng.permutation(n)].astype(np.int64)


def _balanced(rng: np.random.Generator, pool: np.ndarray, target: int, m: int, n: int, allow: bool,
              notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    n_in = n // 2
    n_out = n - n_in
    g_in = sample_unique_groups(rng, pool, m, n_in, forced=target, allow_repeats=allow, notes=notes)
    g_out = sample_unique_groups(rng, pool, m, n_out, allow_repeats=allow, notes=notes)
    groups = np.concatenate([g_in, g_out])
    labels = np.r_[np.ones(n_in, dtype=np.int8), np.zeros(n_out, dtype=np.int8)]
    order = rng.permutation(n)
    return groups[order], labels[order]


def periods(n_slots: int, period_slots: int) -> int:
    """Number of full periods."""
    return n_slots // period_slots


def make_game(n_users: int, n_slots: int, target: int, config: GameConfig,
              rng: np.random.Generator | int | None = None) -> GameData:
    """Draw the adversary's training set and the challenge set for ``target`` under ``config.prior``.

    Parameters
    ----------
    n_users, n_slots:
        Size of the :class:`~odcore.knock.timeseries.LocationTimeSeries` (users are indices ``0..n_users-1``).
    target:
        Index of ``u*``.
    config:
        :class:`GameConfig`.
    rng:
        Seed or generator.

    Notes
    -----
    - ``subset`` (§VI-A): the adversary knows ``floor(alpha·|U|)`` users including ``u*``; training groups are
      drawn among them, test groups among the other users (plus ``u*``); ``T_O = T_I`` (the inference period).
    - ``same-groups`` (§VI-B, 2a): ``beta`` groups; each observation period's aggregates are training samples, the
      inference period's aggregates of the same groups are the test samples.
    - ``different-groups`` (§VI-B, 2b): ``n_groups`` groups split 75/25 stratified; training groups over the
      observation periods, test groups over the inference period.
    - ``perfect`` (§VII-B): ``n_groups`` groups; training and test are the same groups in the inference period
      (the defence perturbs the test aggregates with fresh noise).
    """
    rng = np.random.default_rng(rng)
    if not 0 <= target < n_users:
        raise ParameterError(f"target index must be in [0, {n_users}), got target={target}.")
    c = config
    m = int(c.m)
    n_per = periods(n_slots, c.period_slots)
    if n_per < 1:
        raise ParameterError(f"the series has {n_slots} slots, fewer than one period of period_slots="
                             f"{c.period_slots}.")
    notes: list[str] = []
    others = np.setdiff1d(np.arange(n_users), [target])
    multi = c.prior in (Prior.SAME_GROUPS, Prior.DIFFERENT_GROUPS)
    if multi and n_per < 2:
        raise ParameterError(f"prior={c.prior.value} needs at least 2 periods of {c.period_slots} slots "
                             f"(observation + inference), the series has {n_per}.")
    inf = c.inference_period if c.inference_period is not None else (n_per - 1 if multi else 0)
    if inf >= n_per:
        raise ParameterError(f"inference_period={inf} but the series has only {n_per} full periods.")

    def win(p: int) -> tuple[int, int]:
        return (p * c.period_slots, (p + 1) * c.period_slots)

    obs = tuple(win(p) for p in range(n_per) if p != inf)
    if c.prior == Prior.SUBSET:
        n_adv = math.floor(c.alpha * n_users)
        if n_adv < 2:
            raise ParameterError(f"alpha={c.alpha} of {n_users} users leaves {n_adv} known users; need >= 2.")
        perm = rng.permutation(others)
        known = np.sort(perm[: n_adv - 1])
        unknown = np.sort(perm[n_adv - 1:])
        if m > len(known):
            raise ParameterError(f"subset prior: m={m} exceeds the {len(known)} users the adversary knows besides "
                                 f"the target (alpha={c.alpha}, {n_users} users).")
        if m > len(unknown):
            raise ParameterError(f"subset prior: m={m} exceeds the {len(unknown)} users outside the prior.")
        tr_g, tr_l = _balanced(rng, known, target, m, c.n_train, c.allow_repeats, notes)
        te_g, te_l = _balanced(rng, unknown, target, m, c.n_test, c.allow_repeats, notes)
        return GameData(target, tr_g, tr_l, (win(inf),), te_g, te_l, (win(inf),), tuple(notes))
    if m > len(others):
        raise ParameterError(f"m={m} exceeds the {len(others)} users other than the target.")
    if c.prior == Prior.SAME_GROUPS:
        g, lab = _balanced(rng, others, target, m, c.beta, c.allow_repeats, notes)
        return GameData(target, g, lab, obs, g, lab, (win(inf),), tuple(notes))
    g, lab = _balanced(rng, others, target, m, c.n_groups, c.allow_repeats, notes)
    if c.prior == Prior.PERFECT:
        return GameData(target, g, lab, (win(inf),), g, lab, (win(inf),), tuple(notes))
    # different groups: stratified split of the groups
    tr_idx, te_idx = [], []
    for lv in (0, 1):
        idx = np.flatnonzero(lab == lv)
        idx = idx[rng.permutation(len(idx))]
        k = round(c.train_fraction * len(idx))
        k = min(max(k, 1), len(idx) - 1)
        tr_idx.append(idx[:k])
        te_idx.append(idx[k:])
    tr = np.sort(np.concatenate(tr_idx))
    te = np.sort(np.concatenate(te_idx))
    return GameData(target, g[tr], lab[tr], obs, g[te], lab[te], (win(inf),), tuple(notes))
