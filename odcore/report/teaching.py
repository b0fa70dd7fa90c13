"""Teaching mode: the membership game ("play the attacker"), the noise picture and the worksheet's answers.

Nothing here imports streamlit: the pages ``7_Play_the_attacker.py`` and ``8_See_the_noise.py`` only draw what these
functions return, and the tests play the same rounds without a browser.

The game (Houssiau et al. 2022, Methods, "Performing the attack", played against the *thresholded* release)
--------------------------------------------------------------------------------------------------------------
The attacker knows every record of the week but the victim's, and ``k`` of the victim's unique trips (cell
pairs). A hidden fair coin decides whether the victim is in the release. On each known pair the release shows the
count of the others ``c`` plus the victim (if in) plus ``Lap(0, b)`` noise (``b = sensitivity/ε``), published iff
the noisy count is ``>= τ`` — exactly the rule and noise of :func:`odcore.privacy.release.release` (the victim's pairs are
independent coordinates of the weekly release, so only they are drawn). The learner sees, per pair, ``c`` and the
published value or "suppressed", and guesses in or out.

The optimal attacker is the likelihood-ratio test (Neyman–Pearson): it sums :func:`odcore.privacy.attack.pair_llr` over the
pairs and says "in" when the sum is > 0, "out" when < 0, and tosses the round's own fair coin on an exact tie.
Its chance of being right on a round is ``½ + ½·TV`` of the two laws of what the release shows on those pairs,
:func:`odcore.privacy.attack.user_risk` (exact within ~1e-6). **This, not the no-threshold curve p_k of Houssiau et al.
Fig. 1, is the theory for the game**: a suppressed pair carries far less than ε, so against the real release the
optimal success at a given k is lower (at τ = 100 on the bundled city, about 66 % at k = 32 instead of 95.5 %).
The expected score of a player who follows the optimal attacker over a set of rounds is the mean of the rounds'
exact successes (:func:`expected_success`); the number of wins is then a Poisson-binomial variable whose variance is
at most the binomial one, so a binomial interval around that mean is conservative.

Rounds are reproducible: round ``j`` of level ``k`` is dealt from ``numpy.random.default_rng((seed, k, j))`` (the
person, which k of their pairs, the coin, the noise, the tie coin), so a fixed-k game and the same level of a
"climb" game show the same rounds, and a class that enters the same code (:func:`class_code`) plays the same game.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

import numpy as np
import pandas as pd
from scipy import fft as sfft
from scipy import stats

from odcore.constants import COUNT, DESTINATION, ORIGIN, USER
from odcore.errors import ParameterError, check_int, check_positive
from odcore.privacy.attack import (
    DEFAULT_TOL,
    integer_ranks,
    pair_errors,
    pair_llr,
    pair_loss_pmf,
    posterior_bound,
    success_curve,
    user_risk,
)
from odcore.privacy.release import release_probability
from odcore.report.sheet import percent_text

__all__ = [
    "LADDER",
    "AttackerPool",
    "GameRules",
    "NoisePicture",
    "Round",
    "binomial_interval",
    "class_code",
    "deal",
    "expected_success",
    "game_level",
    "noise_picture",
    "parse_class_code",
    "round_others",
    "round_success",
    "settings_fingerprint",
    "worksheet_html",
    "worksheet_items",
]

LADDER = (1, 3, 10, 32)
"""Known trips per level when the learner climbs (Houssiau et al. quote k = 3 and k = 32)."""

THEORY_ROUNDS = 200
"""Rounds per level over which the game's theory (the optimal attacker's expected score) is averaged."""


# ---------------------------------------------------------------------------------------------------------------
# The people an attacker can be asked about
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AttackerPool:
    """The week's people and, per person, their unique pairs with the count of the *other* people on each.

    Stored as flat arrays sorted by person (``start[i]:start[i + 1]`` are person ``i``'s pairs), so dealing a
    round is an index lookup. Build with :meth:`from_pairs`.
    """

    users: np.ndarray          # person ids, sorted
    start: np.ndarray          # int64, len(users) + 1
    origin: np.ndarray
    destination: np.ndarray
    others: np.ndarray         # float: count − 1 on each (person, pair)

    @classmethod
    def from_pairs(cls, pairs: pd.DataFrame, counts: pd.DataFrame | None = None) -> AttackerPool:
        """From one week's ``pairs`` (DataFrame[user, origin, destination], one row per unique person-pair) and
        optionally ``counts`` (DataFrame[origin, destination, count]; computed from ``pairs`` when omitted, as for
        the bounded pairs of a per-user release).

        Raises
        ------
        ParameterError
            Missing columns, no rows, or counts that disagree with the pairs (a count below its people in pairs).
        """
        need = [USER, ORIGIN, DESTINATION]
        missing = [c for c in need if c not in pairs.columns]
        if missing:
            raise ParameterError(f"pairs must have columns {need}; missing {missing}.")
        if pairs.empty:
            raise ParameterError("pairs has no rows: no one travelled in this week, so there is no one to attack.")
        # codes in sorted order, so that sorting one int64 key sorts the rows by (person, origin, destination)
        codes = {c: _sorted_codes(pairs[c]) for c in need}
        for c, (code, _) in codes.items():
            if (code < 0).any():
                raise ParameterError(f"pairs has {int((code < 0).sum())} missing value(s) in column {c!r}.")
        (uc, users), (oc, ov), (dc, dv) = codes.values()
        n_od = ov.size * dv.size
        if users.size * n_od >= 2 ** 63:
            raise ParameterError(f"too many people × origins × destinations ({users.size} × {ov.size} × {dv.size}) "
                                 "for one week's attacker pool.")
        pair = oc * dv.size + dc                                              # (origin, destination) code
        key = uc * n_od
        key += pair
        as_given = key.size < 2 or bool(np.all(key[1:] > key[:-1]))          # sorted and distinct, as ODData has them
        if not as_given:
            key = np.sort(key)
            key = key[_first_of_runs(key)]                                    # the distinct rows, sorted
            uc, pair = key // n_od, key % n_od
        dense = n_od <= max(4 * pair.size, 1 << 22)
        # a slot per pair: its code when origins × destinations are few (no sort), else its rank among the pairs
        slot_ids = None if dense else np.unique(pair)
        slot = pair if dense else np.searchsorted(slot_ids, pair)
        own = np.bincount(slot, minlength=n_od if dense else slot_ids.size)          # people per pair
        if counts is None:
            others = own[slot].astype(float)
        else:
            miss = [c for c in (ORIGIN, DESTINATION, COUNT) if c not in counts.columns]
            if miss:
                raise ParameterError(f"counts must have columns origin, destination, count; missing {miss}.")
            co, cd = ov.get_indexer(counts[ORIGIN]), dv.get_indexer(counts[DESTINATION])   # -1: no one's pair
            known = (co >= 0) & (cd >= 0)
            ckey = co[known].astype(np.int64) * dv.size + cd[known]
            cval = counts[COUNT].to_numpy(dtype=float)[known]
            if not dense:
                at = np.minimum(np.searchsorted(slot_ids, ckey), slot_ids.size - 1)
                keep = slot_ids[at] == ckey
                ckey, cval = at[keep], cval[keep]
            count = np.full(own.size, np.nan)
            count[ckey] = cval
            others = count[slot]
            # each row's pair against its people (NaN: no count); the whole table only to report a disagreement
            bad = None if bool(np.all(others >= own[slot])) else (own > 0) & ~(count >= own)
            if bad is not None:
                i = int(np.flatnonzero(bad)[0])
                code = i if dense else int(slot_ids[i])
                what = (f"count {count[i]:g} < {int(own[i])} people in pairs" if count[i] == count[i]
                        else "no count in counts")
                raise ParameterError(f"counts disagree with pairs on {int(bad.sum())} pair(s), e.g. origin "
                                     f"{ov[code // dv.size]}, destination {dv[code % dv.size]}: {what}.")
        start = np.searchsorted(uc, np.arange(users.size + 1)).astype(np.int64)   # uc: sorted, every person's code
        return cls(users=np.asarray(users), start=start,
                   origin=_labels(pairs[ORIGIN], ov, lambda: pair // dv.size, as_given),
                   destination=_labels(pairs[DESTINATION], dv, lambda: pair % dv.size, as_given),
                   others=np.subtract(others, 1.0, out=others))

    @property
    def trips(self) -> np.ndarray:
        """Unique pairs per person."""
        return np.diff(self.start)

    def eligible(self, k: int) -> np.ndarray:
        """Indices of the people with at least ``k`` unique pairs (those a level-k round can pick)."""
        return np.flatnonzero(self.trips >= k)


def _sorted_codes(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """``pandas.factorize(column, sort=True)`` with int64 codes; for integer ids by one table lookup
    (:func:`odcore.privacy.attack.integer_ranks`: no hash table, no sort)."""
    values = column.to_numpy()
    ranks = integer_ranks(values, 4 * values.size + (1 << 20)) if isinstance(column.dtype, np.dtype) else None
    if ranks is None:
        code, uniques = pd.factorize(column, sort=True)
        return code.astype(np.int64, copy=False), uniques
    code, lut, low = ranks
    return code, pd.Index((np.flatnonzero(lut >= 0) + low).astype(values.dtype), dtype=values.dtype)


def _labels(column: pd.Series, uniques: pd.Index, code, rows_as_given: bool) -> np.ndarray:
    """``uniques[code()]`` (the pool's rows' ids) as an array; when the pool's rows are ``column``'s own rows in
    their order and the ids are integers, a copy of the column: the same values, without the gather."""
    if rows_as_given and isinstance(column.dtype, np.dtype) and column.dtype.kind == "i" \
            and column.dtype == uniques.dtype:
        return column.to_numpy().copy()
    return np.asarray(uniques)[code()]


def _first_of_runs(sorted_values: np.ndarray) -> np.ndarray:
    """Mask of the first element of each run of equal values (``np.unique`` of a sorted array without its sort)."""
    first = np.ones(sorted_values.size, dtype=bool)
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=first[1:])
    return first


# ---------------------------------------------------------------------------------------------------------------
# Rounds
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GameRules:
    """The release the game is played against: per-pair Laplace parameter, threshold, and the noise's sensitivity.

    ``epsilon`` is the per-count ε of the release; ``sensitivity`` is 1 per metric or ``max_pairs`` in the per-user
    release (noise ``sensitivity/ε``, so each pair carries ``ε/sensitivity``).
    """

    epsilon: float = 0.66
    threshold: float = 100
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        object.__setattr__(self, "threshold", check_positive("threshold", self.threshold))
        object.__setattr__(self, "sensitivity", check_int("sensitivity", self.sensitivity, minimum=1))

    @property
    def scale(self) -> float:
        return self.sensitivity / self.epsilon

    @property
    def epsilon_pair(self) -> float:
        """Laplace parameter of one pair: ``1/scale``."""
        return self.epsilon / self.sensitivity


@dataclass(frozen=True)
class Round:
    """One dealt round: who, which pairs, the hidden truth, what the release shows and the optimal verdict."""

    seed: int
    k: int
    index: int                 # j: the round's number within its level
    user: object
    origin: np.ndarray
    destination: np.ndarray
    others: np.ndarray         # count of the other people on each pair (known to the attacker)
    member: bool               # the hidden coin: is the person in the release?
    noisy: np.ndarray          # others + member + noise (what the mechanism computed)
    published: np.ndarray      # noisy >= threshold
    llr: np.ndarray            # per pair, log P_in/P_out of what is shown (odcore.privacy.attack.pair_llr)
    tie_coin: bool             # the fair coin the optimal attacker tosses on an exact tie
    rules: GameRules = field(repr=False)

    @property
    def llr_total(self) -> float:
        return float(np.sum(self.llr))

    @property
    def tie(self) -> bool:
        # atoms of pair_llr are exactly ±ε; summed in units of ε they cancel to an exact 0
        return float(np.sum(self.llr / self.rules.epsilon_pair)) == 0.0

    @property
    def optimal_guess(self) -> bool:
        """The likelihood-ratio test's answer (True = "in")."""
        return self.tie_coin if self.tie else self.llr_total > 0.0

    def shown(self) -> pd.DataFrame:
        """What the learner sees: one row per known pair (suppressed pairs have no published value)."""
        return pd.DataFrame({
            "pair": np.arange(1, self.k + 1),
            ORIGIN: self.origin, DESTINATION: self.destination,
            "others": self.others.astype(np.int64),
            "published": np.where(self.published, self.noisy, np.nan),
            "state": np.where(self.published, "released", "suppressed"),
        })

    def explanation(self) -> pd.DataFrame:
        """The optimal attacker's evidence, pair by pair: each pair's LLR and the running total."""
        return pd.DataFrame({"pair": np.arange(1, self.k + 1), "llr": self.llr, "cumulative": np.cumsum(self.llr),
                             "state": np.where(self.published, "released", "suppressed")})

    def exact_success(self, resolution: int = 64) -> float:
        """Probability that the optimal attacker is right on this person and these pairs (``user_risk``)."""
        return float(user_risk(self.others, self.rules.epsilon_pair, self.rules.threshold,
                               resolution=resolution).success)


def deal(pool: AttackerPool, rules: GameRules, k: int, index: int, seed: int) -> Round:
    """Deal round ``index`` of level ``k`` (a person with at least ``k`` unique trips, ``k`` of their pairs).

    Everything random comes from ``numpy.random.default_rng((seed, k, index))``: same arguments, same round.

    Raises
    ------
    ParameterError
        ``k`` < 1, or nobody in the week has ``k`` unique trips (the message gives the largest k available).
    """
    k = check_int("k", k, minimum=1)
    index = check_int("index", index)
    seed = check_int("seed", seed)
    who = pool.eligible(k)
    if who.size == 0:
        raise ParameterError(f"nobody in this week has k={k} unique trips (the most is {int(pool.trips.max())}); "
                             "pick a smaller k or another week.")
    rng, i, pick = _draw_pairs(pool, who, k, index, seed)
    member = bool(rng.random() < 0.5)
    others = pool.others[pick]
    noisy = others + float(member) + rng.laplace(0.0, rules.scale, size=k)
    published = noisy >= rules.threshold          # the release's rule (odcore.privacy.release: noisy_count >= threshold)
    llr = pair_llr(others, published, np.where(published, noisy, np.nan), rules.epsilon_pair, rules.threshold)
    tie_coin = bool(rng.random() < 0.5)
    return Round(seed=seed, k=k, index=index, user=pool.users[i], origin=pool.origin[pick],
                 destination=pool.destination[pick], others=others, member=member, noisy=noisy,
                 published=published, llr=llr, tie_coin=tie_coin, rules=rules)


def game_level(round_number: int, ladder=LADDER, per_level: int = 5) -> tuple[int, int]:
    """``(k, j)`` of the game's ``round_number``-th round (0-based) when climbing ``ladder``, ``per_level`` rounds
    per level; the last level repeats. A one-step ladder is a fixed-k game.

    >>> [game_level(n, (1, 3), 2) for n in range(5)]
    [(1, 0), (1, 1), (3, 0), (3, 1), (3, 2)]
    """
    n = check_int("round_number", round_number)
    per = check_int("per_level", per_level, minimum=1)
    steps = tuple(int(v) for v in ladder)
    if not steps:
        raise ParameterError("ladder must name at least one k.")
    level = min(n // per, len(steps) - 1)
    return steps[level], n - level * per


def expected_success(pool: AttackerPool, rules: GameRules, k: int, seed: int, rounds: int = THEORY_ROUNDS,
                     resolution: int = 64) -> np.ndarray:
    """Exact success of the optimal attacker on each of the first ``rounds`` rounds of level ``k``.

    Their mean is the theory for the game as played (the expected score of a player who follows the optimal
    attacker); compare :func:`odcore.privacy.attack.success_curve`, which is the no-threshold p_k. The same as
    :func:`round_others` then :func:`round_success` (the app keeps the first, which does not depend on ε or τ).
    """
    return round_success(round_others(pool, k, seed, rounds), rules, resolution)


def round_others(pool: AttackerPool, k: int, seed: int, rounds: int = THEORY_ROUNDS) -> np.ndarray:
    """The others' counts on the pairs of each of the first ``rounds`` rounds of level ``k``: shape ``(rounds, k)``,
    row ``j`` = ``deal(pool, rules, k, j, seed).others`` for any rules (the pairs are drawn before the coin and the
    noise, so they do not depend on ε, the threshold or the guarantee's sensitivity).

    Raises
    ------
    ParameterError
        As :func:`deal` (``k`` < 1, or nobody has ``k`` unique trips).
    """
    rounds = check_int("rounds", rounds, minimum=1)
    k = check_int("k", k, minimum=1)
    seed = check_int("seed", seed)
    who = pool.eligible(k)
    if who.size == 0:
        deal(pool, GameRules(), k, 0, seed)    # raises the error that names the largest k available
    rows = np.stack([_draw_pairs(pool, who, k, j, seed)[2] for j in range(rounds)])
    return pool.others[rows]


def round_success(others, rules: GameRules, resolution: int = 64) -> np.ndarray:
    """:func:`odcore.privacy.attack.user_risk` ``(row, rules.epsilon_pair, rules.threshold, resolution=resolution).success``
    for every row of ``others`` (shape ``(rounds, k)``: the others' counts on each round's ``k`` pairs), batched.

    The same computation as ``user_risk``: pairs whose lone TV is below its tolerance are silent, pairs that are
    (almost) never suppressed are one type, the loss PMFs are composed by FFT (connect-the-dots) at ``resolution``
    and at half of it, and the two TVs are Richardson-extrapolated and clipped as there. Here every round has ``k``
    pairs, a silent pair composes as a point mass at loss 0 (shifting the sum by one grid step per pair instead of
    leaving it out), each distinct multiset of pair types is composed once, and all of them in one batched FFT: the
    results agree with ``user_risk`` to rounding (``tests/odcore/report/test_teaching.py`` checks 1e-12).
    """
    c = np.asarray(others, dtype=float)
    if c.ndim != 2 or c.shape[0] == 0 or c.shape[1] == 0:
        raise ParameterError(f"others must be a non-empty table (rounds × k) of counts, got shape {c.shape}.")
    if np.any(~np.isfinite(c)) or np.any(c < 0):
        raise ParameterError("others must be finite counts >= 0 (true count minus the person).")
    R = check_int("resolution", resolution, minimum=4)
    eps, tau = rules.epsilon_pair, float(rules.threshold)
    uniq, inv = np.unique(c, return_inverse=True)
    tv, supp = pair_errors(uniq, eps, tau)
    silent = tv < DEFAULT_TOL
    plain = ~silent & (supp < DEFAULT_TOL)
    types, type_of = np.unique(np.where(plain, np.inf, uniq)[~silent], return_inverse=True)
    code = np.zeros(uniq.size, dtype=np.int64)          # 0: silent; 1 + i: informative type i
    code[~silent] = 1 + type_of
    sig, sig_of = np.unique(np.sort(code[inv.reshape(c.shape)], axis=1), axis=0, return_inverse=True)
    out = np.full(sig.shape[0], 0.5)                    # nothing informative: user_risk's exact ½
    has = (sig > 0).any(axis=1)
    if has.any():
        hi = _composed_success(sig[has], types, eps, tau, R)
        half = _composed_success(sig[has], types, eps, tau, R // 2)
        out[has] = np.clip((4.0 * hi - half) / 3.0, 0.5, hi)
    return out[sig_of.reshape(-1)]


def _composed_success(sig: np.ndarray, types: np.ndarray, eps: float, tau: float, R: int) -> np.ndarray:
    """½ + ½·TV of the sum of the informative pairs' losses for each row of ``sig`` (type codes: 0 = silent, left
    out; ``1 + i`` = ``types[i]``; every row has one informative pair at least), connect-the-dots at resolution
    ``R``: the composition and TV of ``odcore.privacy.attack.user_risk``, for many rounds at once."""
    kin = np.count_nonzero(sig, axis=1)
    order = np.argsort(-kin, kind="stable")             # most informative pairs first ...
    sig, kin = -np.sort(-sig[order], axis=1), kin[order]  # ... and each row's informative pairs first
    n = 2 * int(kin[0]) * R + 1
    size = sfft.next_fast_len(n, real=True)
    spec = sfft.rfft(pair_loss_pmf(types, eps, tau, resolution=R), n=size, axis=1)
    tot = spec[sig[:, 0] - 1]
    for t in range(1, int(kin[0])):
        m = int(np.count_nonzero(kin > t))              # the rows with more than t informative pairs (a prefix)
        tot[:m] *= spec[sig[:m, t] - 1]
    p = np.clip(sfft.irfft(tot, n=size, axis=1)[:, :n], 0.0, None)
    # a row with K informative pairs has loss (j − K·R)·ε/R on grid point j <= 2·K·R; TV = Σ_{loss > 0} p·(1 − e^−loss)
    w = -np.expm1(-np.arange(n // 2 + 1) * (eps / R))
    tv = np.empty(sig.shape[0])
    for kk in np.unique(kin):
        rows = np.flatnonzero(kin == kk)
        tv[rows] = p[rows, kk * R + 1:2 * kk * R + 1] @ w[1:kk * R + 1]
    out = np.empty(sig.shape[0])
    out[order] = 0.5 + 0.5 * tv
    return out


def _draw_pairs(pool: AttackerPool, who: np.ndarray, k: int, index: int, seed: int):
    """The first draws of round ``index`` of level ``k``: ``(rng, person, pair rows)``. :func:`deal` goes on with the
    coin and the noise from ``rng``; :func:`expected_success` needs only the pairs (their exact success)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence((seed, k, index))))   # = default_rng(...)
    i = int(who[rng.integers(who.size)])
    lo, hi = int(pool.start[i]), int(pool.start[i + 1])
    return rng, i, lo + rng.choice(hi - lo, size=k, replace=False)


def binomial_interval(p: float, n: int, confidence: float = 0.99) -> tuple[float, float]:
    """Central interval of the *share* of wins in ``n`` rounds won with probability ``p`` each: the binomial
    quantiles at ``(1 − confidence)/2`` and ``(1 + confidence)/2``, divided by n.

    >>> binomial_interval(0.5, 200)
    (0.41, 0.59)
    """
    n = check_int("n", n, minimum=1)
    if not (0.0 <= p <= 1.0):
        raise ParameterError(f"p must be a probability in [0, 1], got p={p!r}.")
    if not (0.0 < confidence < 1.0):
        raise ParameterError(f"confidence must be in (0, 1), got confidence={confidence!r}.")
    lo, hi = stats.binom.ppf([(1 - confidence) / 2, (1 + confidence) / 2], n, p)
    return float(lo) / n, float(hi) / n


# ---------------------------------------------------------------------------------------------------------------
# Class codes
# ---------------------------------------------------------------------------------------------------------------

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"     # Crockford base 32: no I, L, O, U
SEED_BITS = 20
LADDER_CHOICES = (LADDER, (1,), (3,), (10,), (32,))
"""Known-trips choices a class code can carry (index 0 = climb)."""


def settings_fingerprint(epsilon: float, threshold: float, sensitivity: int, week: int, people: int,
                         pairs: int) -> int:
    """A 10-bit digest of what makes the rounds (release settings and the week's size), so a class code entered
    with other settings is refused instead of silently dealing other rounds."""
    text = f"{float(epsilon):.4f}|{float(threshold):.4f}|{int(sensitivity)}|{int(week)}|{int(people)}|{int(pairs)}"
    h = 0
    for ch in text.encode():
        h = (h * 131 + ch) % 1_000_003
    return h % 1024


def class_code(seed: int, ladder_choice: int, fingerprint: int) -> str:
    """A 7-character code (shown as ``XXXX-XXX``) carrying the game seed (< 2**20), the known-trips choice and the
    settings fingerprint.

    >>> class_code(12345, 0, 77)
    '030E-82D'
    >>> parse_class_code("030e 82d")
    (12345, 0, 77)
    """
    seed = check_int("seed", seed)
    if seed >= 2 ** SEED_BITS:
        raise ParameterError(f"seed must be < {2 ** SEED_BITS} to fit a class code, got seed={seed}.")
    choice = check_int("ladder_choice", ladder_choice)
    if choice >= len(LADDER_CHOICES):
        raise ParameterError(f"ladder_choice must be < {len(LADDER_CHOICES)}, got {choice}.")
    fp = check_int("fingerprint", fingerprint)
    if fp >= 1024:
        raise ParameterError(f"fingerprint must be < 1024, got {fp}.")
    v = (seed << 13) | (choice << 10) | fp
    chars = "".join(_ALPHABET[(v >> (5 * i)) & 31] for i in reversed(range(7)))
    return f"{chars[:4]}-{chars[4:]}"


def parse_class_code(code: str) -> tuple[int, int, int]:
    """``(seed, ladder_choice, fingerprint)`` from a code (case, spaces and dashes ignored; O read as 0, I/L as 1).

    Raises
    ------
    ParameterError
        Not 7 characters of the code alphabet, or a known-trips choice that does not exist.
    """
    raw = str(code).upper().replace("-", "").replace(" ", "").replace("O", "0").replace("I", "1").replace("L", "1")
    if len(raw) != 7 or any(ch not in _ALPHABET for ch in raw):
        raise ParameterError(f"class code must be 7 letters or digits like 030E-82D, got {code!r}.")
    v = 0
    for ch in raw:
        v = v * 32 + _ALPHABET.index(ch)
    seed, choice, fp = v >> 13, (v >> 10) & 7, v & 1023
    if seed >= 2 ** SEED_BITS or choice >= len(LADDER_CHOICES):
        raise ParameterError(f"class code {code!r} is not one this lab makes (check for a typo).")
    return seed, choice, fp


# ---------------------------------------------------------------------------------------------------------------
# See the noise
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NoisePicture:
    """What happens to a true count ``c``: published with probability ``p_published``; the noisy value lies in
    ``[low, high]`` (the central ``level`` interval of ``c + Lap(0, scale)``) with probability ``level``."""

    count: float
    epsilon: float
    threshold: float
    sensitivity: int
    level: float
    scale: float
    p_published: float        # odcore.privacy.release.release_probability (the release's own >= rule)
    low: float
    high: float
    p_published_in_range: float   # P(noisy >= τ and low <= noisy <= high)

    def sentence(self) -> str:
        """The plain-language reading, every number from the mechanism."""
        c = f"{self.count:g}"
        pub = _pct(self.p_published)
        lvl = _pct(self.level, 0)
        rng_txt = f"{self.low:.1f} and {self.high:.1f}"
        if self.p_published >= 0.9995 or self.low >= self.threshold:
            return (f"A count of {c} is published in {pub} of weeks, as a number between {rng_txt} in {lvl} "
                    "of weeks.")
        if self.p_published < 0.0005:
            return (f"A count of {c} is published {pub} of the weeks: almost every week it is suppressed "
                    f"(below the threshold of {self.threshold:g}).")
        shown_lo = max(self.low, self.threshold)
        if shown_lo > self.high:      # the usual range lies below the threshold: only the rare high draws show
            return (f"A count of {c} is published {pub} of the time (suppressed otherwise); when it is, the "
                    f"number shown is at least {self.threshold:g}, well above the true count.")
        return (f"A count of {c} is published {pub} of the time (suppressed otherwise); when it is, the number "
                f"shown is at least {self.threshold:g}: between {shown_lo:.1f} and {self.high:.1f} in "
                f"{_pct(self.p_published_in_range)} of weeks.")

    def density(self, points: int = 401) -> pd.DataFrame:
        """The Laplace density of the noisy count on ``c ± 8·scale`` (and the threshold), for the chart."""
        span = 8.0 * self.scale
        x = np.linspace(min(self.count - span, self.threshold - 2.0 * self.scale),
                        max(self.count + span, self.threshold + 2.0 * self.scale), points)
        pdf = np.exp(-np.abs(x - self.count) / self.scale) / (2.0 * self.scale)
        return pd.DataFrame({"noisy_count": x, "density": pdf, "published": x >= self.threshold})


def _pct(p: float, digits: int = 1) -> str:
    if 0 < p < 1e-5:
        return "less than 0.001 %"
    if 0 < p < 0.001:
        return f"{100 * p:.2g} %"
    return percent_text(p, digits)   # never 100.0 % for a chance below 1


def noise_picture(count: float, epsilon: float, threshold: float, sensitivity: int = 1,
                  level: float = 0.95) -> NoisePicture:
    """The distribution of what is published for a true count (Bassolas et al.: ``c + Lap(1/ε)``, published iff
    ``>= τ``; per user: noise ``sensitivity/ε`` with ``sensitivity = max_pairs``).

    Examples
    --------
    >>> pic = noise_picture(120, 0.66, 100)
    >>> round(pic.low, 1), round(pic.high, 1)
    (115.5, 124.5)
    >>> pic.sentence()
    'A count of 120 is published in 99.9999 % of weeks, as a number between 115.5 and 124.5 in 95 % of weeks.'
    """
    c = float(count)
    if not math.isfinite(c) or c < 0:
        raise ParameterError(f"count must be a number >= 0 of people, got count={count!r}.")
    eps = check_positive("epsilon", epsilon)
    tau = check_positive("threshold", threshold)
    sens = check_int("sensitivity", sensitivity, minimum=1)
    if not (0.0 < float(level) < 1.0):
        raise ParameterError(f"level must be in (0, 1), got level={level!r}.")
    b = sens / eps
    half = -b * math.log(1.0 - float(level))      # P(|Lap(b)| <= h) = 1 − e^{−h/b}
    low, high = c - half, c + half
    p_pub = float(release_probability(c, eps, tau, sens))
    # P(max(low, τ) <= noisy <= high) = P(noisy >= max(low, τ)) − P(noisy > high)
    lo_eff = max(low, tau)
    p_in = float(release_probability(c, eps, lo_eff, sens)) - float(release_probability(c, eps, high, sens)) \
        if lo_eff <= high else 0.0
    return NoisePicture(count=c, epsilon=eps, threshold=tau, sensitivity=sens, level=float(level), scale=b,
                        p_published=p_pub, low=low, high=high, p_published_in_range=max(p_in, 0.0))


# ---------------------------------------------------------------------------------------------------------------
# Worksheet
# ---------------------------------------------------------------------------------------------------------------

def worksheet_items(epsilon: float, threshold: float, *, game_theory: dict[int, float] | None = None,
                    median_trips: float | None = None) -> list[tuple[str, str]]:
    """Questions and their answers, every answer computed by the engine for these settings.

    ``game_theory``: optimal attacker's expected success per k in the game (:func:`expected_success` means);
    ``median_trips``: unique trips of the week's median person (``ODData.user_week``).
    """
    eps = check_positive("epsilon", epsilon)
    tau = check_positive("threshold", threshold)
    p = success_curve(eps, 32)
    near, far = noise_picture(tau + 20, eps, tau), noise_picture(max(tau - 5, 0), eps, tau)
    items = [
        ("What is an origin–destination (OD) count?",
         "The number of distinct people who moved from one grid cell to another in a week."),
        (f"With ε = {eps:g}, what is the noise's scale (how far a count typically moves)?",
         f"1/ε = {1 / eps:.2f} people (Laplace noise; 95 % of weeks within ±{-math.log(0.05) / eps:.1f})."),
        (f"A pair with {near.count:g} people: what is published, 95 % of the time?",
         f"A number between {near.low:.1f} and {near.high:.1f} (published in {_pct(near.p_published)} of weeks)."),
        (f"A pair with {far.count:g} people, threshold {tau:g}: how often is it published?",
         f"{_pct(far.p_published)} of weeks (release_probability)."),
        (f"What does ε = {eps:g} promise for one trip of one person (a 50/50 prior)?",
         f"An attacker right at most {_pct(posterior_bound(eps))} of the time."),
        ("An attacker who knows 3 of your trips (nothing suppressed): how often right?", f"{_pct(float(p[3]))}."),
        ("And with 32 of your trips?", f"{_pct(float(p[32]))} — near-certainty from a guarantee of "
                                       f"{_pct(posterior_bound(eps))} per trip."),
        ("What privacy budget does one person with 32 trips really get in one week (basic composition)?",
         f"32 × ε = {32 * eps:.2f}."),
    ]
    if median_trips is not None:
        items.append(("How many unique trips does the week's median person make?", f"{median_trips:g}."))
    if game_theory:
        for k, s in sorted(game_theory.items()):
            items.append((f"In the game, against the real thresholded release, how often is the optimal attacker "
                          f"right with k = {k}?", f"{_pct(s)} (no threshold: {_pct(float(success_curve(eps, k)[k]))})."))
    return items


def worksheet_html(items: list[tuple[str, str]], *, title: str = "OD Privacy Lab worksheet",
                   settings: str = "") -> str:
    """A printable HTML page: the questions with space to answer, then the answers on a separate page."""
    qs = "\n".join(f"<li><p>{escape(q)}</p><div class='blank'></div></li>" for q, _ in items)
    ans = "\n".join(f"<li><p><b>{escape(q)}</b><br>{escape(a)}</p></li>" for q, a in items)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>
body {{ font-family: 'DejaVu Sans', Arial, sans-serif; max-width: 46em; margin: 2em auto; color: #111;
       line-height: 1.45; }}
.blank {{ border-bottom: 1px solid #888; height: 2.2em; margin-bottom: 0.6em; }}
.answers {{ page-break-before: always; }}
small {{ color: #444; }}
@media print {{ body {{ margin: 1cm; }} }}
</style></head><body>
<h1>{escape(title)}</h1>
<p><small>{escape(settings)}</small></p>
<p>Use the lab's pages (the guided tour takes you through them) to answer.</p>
<ol>
{qs}
</ol>
<section class="answers"><h2>Answers (computed by the lab for these settings)</h2>
<ol>
{ans}
</ol></section>
</body></html>
"""
