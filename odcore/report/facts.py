"""One source for every quantity a person reads about a week's release: each computed once, with its definition,
and, where two numbers differ by design, the reason in the same words everywhere.

The guarantee card of every page, the Home, Attack and Privacy budget pages and the command line
(``python -m odcore facts --json``) read :func:`week_facts`. A bound and an attack are two different things and
both are shown: the **bound** is the most *any* attacker can be right about the typical person's week (from its ε
and δ); the **attack** is how often the optimal attacker of Houssiau et al. (who knows everyone else's trips) is
right about that person in this release, where suppressed pairs say little; **without suppression** is the same
attacker if every pair were published. Home's **32-trip example** is a person of the paper, not of the data.

Definitions
-----------
- *people in the week*: distinct people with at least one trip in the week (``people_data``: in the loaded data
  after the region and box filters, with at least one kept fix; ``people_located_week``: with at least one hourly
  location in the week, a trip or not: a person seen in one cell all week is located but makes no trip, is in no
  count and is not one of the week's people). The designer's people are these (:func:`week_trips`).
- *the typical person*: the person of the week whose number of unique trips is the median (nearest rank, the
  first by id among equals; :func:`typical_person`). The Attack page's "typical" pick is this person.
- *ε per person and week*: tight ε of the typical person's week at δ = :data:`HEADLINE_DELTA` for the noise
  (:func:`odcore.privacy.accounting.person_week`); *δ per person and week*: that δ plus the thresholding δ (the
  chance that a pair only this person makes is published).
- *bound*: :func:`success_bound` of that (ε, δ), from a 50 % prior.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from odcore.constants import UNIQUE_TRIPS, USER, WEEK
from odcore.errors import check_prob
from odcore.numbers import number_text, percent_text
from odcore.privacy.accounting import person_week
from odcore.privacy.attack import bounded_success_curve, person_others, success_curve, user_risk
from odcore.privacy.audit import one_run_epsilon_lower
from odcore.privacy.release import Mode, ReleaseConfig
from odcore.privacy.risk import typical_trips

__all__ = [
    "BOUND_WHY",
    "EXAMPLE_TRIPS",
    "HEADLINE_DELTA",
    "TYPICAL_HOW",
    "Fact",
    "located_in_week",
    "success_bound",
    "typical_person",
    "week_facts",
    "week_trips",
]

HEADLINE_DELTA = 1e-6
"""δ for the noise at which the typical person's ε per week is given (the thresholding δ is added to it)."""

EXAMPLE_TRIPS = 32
"""Houssiau et al.'s example person: 32 unique trips in a week (the author's own)."""

TYPICAL_HOW = "the person of the week with the median number of unique trips (nearest rank; first by id among equals)"
BOUND_WHY = ("bound: the most any attacker can be right about the typical person's whole week, from its ε and δ, "
             "whatever the attacker knows")
ATTACK_WHY = ("attack: how often the optimal attacker who knows everyone else's trips is right about the typical "
              "person in this release, where suppressed pairs say little")
PLAIN_WHY = "attack without suppression: the same attacker if every one of the person's pairs were published"
EXAMPLE_WHY = (f"example, not a person of this data: someone with {EXAMPLE_TRIPS} unique trips (Houssiau et al.), "
               "every pair published")
PEOPLE_WEEK_WHY = "people with at least one trip in the week (the data hold more people over all weeks)"
PEOPLE_LOCATED_WHY = ("people with at least one hourly location in the week, a trip or not; only those with a trip "
                      "are in the counts and are the week's people")
PEOPLE_DATA_WHY = "people in the loaded data, after the region and box filters, over all weeks"


@dataclass(frozen=True)
class Fact:
    """One quantity as a person reads it: ``value`` (a number, None when the data cannot give it), ``text`` (as
    written, :mod:`odcore.numbers`), ``name`` (its label), ``why`` (what it is, in the words used wherever it
    appears beside a number that differs from it by design) and ``definition`` (how it is computed)."""

    key: str
    name: str
    value: float | int | None
    text: str
    why: str
    definition: str

    def to_dict(self) -> dict:
        return asdict(self)


def success_bound(epsilon: float, delta: float = 0.0, prior: float = 0.5) -> float:
    """The most often any attacker can be right guessing whether a person is in an (ε, δ)-DP release, from a prior
    ``prior`` that they are: the largest ``π·TPR + (1 − π)·(1 − FPR)`` over the (ε, δ) region ``TPR ≤ e^ε·FPR + δ``,
    ``1 − FPR ≤ e^ε·(1 − TPR) + δ`` (Kairouz, Oh and Viswanath 2015, Thm 2.1). A linear function on a convex
    polygon is largest at a corner: (FPR, TPR) = (0, δ), ((1 − δ)/(1 + e^ε), e^ε·FPR + δ), (1 − δ, 1), (0, 0) or
    (1, 1). At π = ½ it is ``(e^ε + δ)/(1 + e^ε)``; with δ = 0 it is at least Houssiau et al.'s posterior bound
    ``π e^ε/(π e^ε + 1 − π)`` and equal to it at π = ½.

    >>> round(success_bound(0.66), 4), round(success_bound(0.66, 0.1), 4), success_bound(50.0) < 1
    (0.6593, 0.6933, True)
    """
    pi = float(prior)
    if not 0 <= pi <= 1:
        raise ValueError(f"prior must be in [0, 1], got prior={prior}.")
    d = float(check_prob("delta", delta)) if delta else 0.0
    if epsilon is None or not math.isfinite(epsilon):
        return 1.0
    below_one = d < 1 and 0 < pi < 1   # then the bound is below 1, however close: never rounded up to it
    e = math.exp(min(float(epsilon), 700.0))
    f = (1 - d) / (1 + e)
    corners = [(0.0, d), (f, min(1.0, e * f + d)), (1 - d, 1.0), (0.0, 0.0), (1.0, 1.0)]
    best = min(1.0, max(pi * t + (1 - pi) * (1 - x) for x, t in corners))
    return math.nextafter(1.0, 0.0) if below_one and best >= 1.0 else best


def typical_person(trips_per_person: pd.Series):
    """``(person, trips)`` of :data:`TYPICAL_HOW` (``trips_per_person``: unique trips of each person of the week,
    indexed by person), or ``(None, None)`` for a week without people."""
    s = trips_per_person.sort_index()
    if not len(s):
        return None, None
    ks = s.to_numpy()
    target = typical_trips(ks)
    return s.index[int(np.flatnonzero(ks == target)[0])], target


def week_trips(user_week: pd.DataFrame, week: int) -> np.ndarray:
    """Unique trips of each of the week's people (at least one trip; sorted by person): what the designer's typical
    and busiest person are taken from, so that its people are the facts' people of the week."""
    wk = user_week.loc[user_week[WEEK].to_numpy() == int(week)].sort_values(USER, kind="stable")
    trips = wk[UNIQUE_TRIPS].to_numpy()
    return trips[trips > 0]


def located_in_week(user_week: pd.DataFrame, week: int) -> int:
    """People with at least one hourly location in ``week`` (``user_week`` holds one row per such person)."""
    return int(user_week.loc[user_week[WEEK].to_numpy() == int(week), USER].nunique())


def _fact(key, name, value, text, why, definition) -> Fact:
    return Fact(key, name, value, text, why, definition)


def week_facts(week_pairs: pd.DataFrame | None, *, week: int, release: ReleaseConfig,
               attack_pairs: pd.DataFrame | None = None, counts: pd.DataFrame | None = None,
               people_data: int | None = None, people_located: int | None = None,
               delta: float = HEADLINE_DELTA) -> dict[str, Fact]:
    """Every named quantity of ``week`` under ``release`` (each a :class:`Fact`).

    Parameters
    ----------
    week_pairs:
        The week's unique (user, origin, destination) rows, before any contribution bounding (None for data without
        per-person pairs: an OD counts folder; the person facts are then None).
    attack_pairs, counts:
        The rows as the release counts them and the week's counts (:func:`odcore.privacy.attack.person_others`):
        per count, ``week_pairs`` and the counts; per person and week, the bounded rows and None. Default: per
        count, ``week_pairs`` with counts made from them; per person, the facts of the attack are left out.
    people_data:
        People in the loaded data (all weeks), when known.
    """
    user_level = release.mode is Mode.USER_LEVEL
    m = release.max_pairs if user_level else None
    eps_pair = 1.0 / release.scale
    out: dict[str, Fact] = {}

    def add(key, name, value, text, why, definition):
        out[key] = _fact(key, name, value, text, why, definition)

    if people_data is not None:
        add("people_data", "People in the data", int(people_data), number_text(int(people_data)), PEOPLE_DATA_WHY,
            "distinct people with at least one kept fix")
    has_pairs = week_pairs is not None
    per_person = week_pairs.groupby(USER, sort=True).size() if has_pairs else pd.Series(dtype=int)
    add("people_week", f"People in week {week}", len(per_person) if has_pairs else None,
        number_text(len(per_person)) if has_pairs else "–", PEOPLE_WEEK_WHY,
        "distinct people with at least one unique trip in the week")
    if people_located is not None:
        add("people_located_week", f"People located in week {week}", int(people_located),
            number_text(int(people_located)), PEOPLE_LOCATED_WHY,
            "distinct people with at least one hourly location in the week")
    user, typical = typical_person(per_person)
    add("typical_trips", "Typical person's unique trips", typical, number_text(typical), TYPICAL_HOW,
        "unique (origin, destination) pairs of that person in the week")
    add("epsilon_count", "ε of one count", eps_pair, number_text(eps_pair),
        f"each count gets Laplace noise of scale {number_text(release.scale)}" +
        (f" ({m} pairs share ε)" if user_level else ""), "1 / noise scale")
    add("threshold", "Threshold", float(release.threshold), number_text(release.threshold),
        "a pair is published when its noisy count reaches it", "the release setting")
    if typical is not None or user_level:
        g = person_week(release.mode.value, release.epsilon, release.threshold, max(int(typical or 1), 1), m, delta)
        ew, dw = float(g["epsilon_person_week"]), float(g["delta_person_week"])
        add("epsilon_person_week", "Typical person's week: ε", ew, number_text(round(ew, 3)),
            f"tight, at δ {number_text(delta)} for the noise",
            "tight ε of the person's week from the exact privacy-loss distribution (accounting.person_week)")
        add("delta_noise", "δ for the noise", float(delta), number_text(delta), "δ at which ε is given",
            "chosen")
        dt = float(g["delta_threshold_week"])
        add("delta_threshold", "δ of thresholding", dt, number_text(dt),
            "the chance that a pair only this person makes is published", "Laplace tail above the threshold")
        add("delta_person_week", "Typical person's week: δ", dw, number_text(dw), "noise δ + thresholding δ",
            "sum of the two parts")
        b = success_bound(ew, min(dw, 1.0))
        add("bound_typical", "Bound on any attacker (typical person's week)", b, percent_text(b), BOUND_WHY,
            "(e^ε + δ)/(1 + e^ε) at the week's ε and δ, from a 50 % prior")
    if typical is not None and (attack_pairs is not None or not user_level):
        pairs = week_pairs if attack_pairs is None else attack_pairs
        if attack_pairs is None:
            counts = None
        others = person_others(pairs, counts, week, user)
        k = len(others)
        att = float(user_risk(list(np.sort(others)), eps_pair, float(release.threshold)).success) if k else 0.5
        plain = float(success_curve(eps_pair, max(k, 1))[k])
        uid = user.item() if isinstance(user, np.generic) else user
        add("typical_user", "Typical person", uid, str(user), TYPICAL_HOW, "pseudonymous id in the data")
        add("attack_typical", "Attack on the typical person", att, percent_text(att),
            ATTACK_WHY + f" (threshold {number_text(release.threshold)})",
            "½ + ½·TV of what the release shows with and without them (attack.user_risk)")
        add("attack_typical_plain", "Attack without suppression", plain, percent_text(plain), PLAIN_WHY,
            f"p_k at k = {k} for noise scale {number_text(release.scale)} (attack.success_curve)")
    ex = float(bounded_success_curve(release.epsilon, m, EXAMPLE_TRIPS)[EXAMPLE_TRIPS]) if user_level \
        else float(success_curve(release.epsilon, EXAMPLE_TRIPS)[EXAMPLE_TRIPS])
    add("attack_example", f"Attack on a person with {EXAMPLE_TRIPS} trips", ex, percent_text(ex), EXAMPLE_WHY,
        "p_k of Houssiau et al. at k = 32 (at most max pairs of them counted per person and week)")
    return out


def facts_json(facts: dict[str, Fact]) -> dict:
    """The facts as the command line prints them (``--json``): key → :meth:`Fact.to_dict`."""
    return {k: f.to_dict() for k, f in facts.items()}


def audit_most_shown(guesses: int, confidence: float = 0.95) -> float:
    """The largest ε a one-run audit with ``guesses`` guesses can ever show: every guess right
    (:func:`odcore.privacy.audit.one_run_epsilon_lower`); 500 guesses never show more than 5.11 at 95 %."""
    return one_run_epsilon_lower(int(guesses), int(guesses), confidence)


def audit_sentence(results: dict[str, dict], epsilon: float, confidence: float = 0.95) -> str:
    """What the one-run audits of a week say, in words that hold for their numbers (``results``: unit → the
    :meth:`odcore.privacy.audit.AuditResult.to_dict` of ``count`` and/or ``person``). The bound is a valid
    ``confidence`` lower bound: for a mechanism as tight as Laplace it passes the true ε by chance in about
    1 − ``confidence`` of seeds, so a count bound above ε is said to be that, not a failure nor impossible; a
    person bound is set beside the most its guesses could show."""
    level = percent_text(confidence, 0)
    chance = percent_text(1 - confidence, 0)
    out = []
    c = results.get("count")
    if c is not None:
        lo, th = c["epsilon_lower"], c["epsilon_theory"]
        head = (f"Per count the measured ε is a {level} lower bound: for a mechanism as tight as Laplace it passes "
                f"the true ε by chance in about {chance} of seeds.")
        if lo <= th:
            out.append(f"{head} Here it is {number_text(round(lo, 3))}, at or below the promised "
                       f"{number_text(round(th, 3))}.")
        else:
            out.append(f"{head} Here it is {number_text(round(lo, 3))}, above the promised {number_text(round(th, 3))}"
                       f": one of those seeds (another seed, or a higher confidence, tells chance from a leak).")
    p = results.get("person")
    if p is not None:
        most = audit_most_shown(p["guesses"], confidence)
        out.append(f"Per person the same release lets the attacker show ε ≥ {number_text(round(p['epsilon_lower'], 2))}"
                   f" against a per-count promise of {number_text(round(float(epsilon), 3))}; {p['guesses']} guesses "
                   f"can never show more than {number_text(round(most, 2))} even all right, so the theory's "
                   f"{number_text(round(p['epsilon_theory'], 2))} is out of this audit's reach, not refuted by it.")
    return " ".join(out)


DELTA_SPLIT_DESIGNER = ("the Release designer splits δ: half to the tight ε of the noise, half to the threshold "
                        "(rounded up to a whole count)")
DELTA_SPLIT_SELECTION = ("the Audit page's comparison uses noise m/ε exactly (pure ε) and gives all of δ to the "
                         "threshold")
"""Why the designer and the Audit page's comparison give different thresholds, pairs and errors at the same (ε, max
pairs, δ): said in these words on both pages."""
