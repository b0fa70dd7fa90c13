"""Functions the pages hand to Streamlit to call later: format functions, button callbacks, deferred downloads.

A session keeps these after its run, and for two minutes after it closes (``server.disconnectedSessionTTL``), so
that a dropped connection comes back with its state. A function defined in a page script keeps that page's whole
namespace alive with it: the session's release, maps and tables, ~8 MB on the OD release page. So the pages define
none: what they hand over is defined here (or in :mod:`odapp.release.view`, :mod:`odapp.attack.view` for the
fragments), and gets only small arguments; anything large is fetched again from the caches when it is called.
``tests/serve/test_session_memory.py`` checks this in a real server.
"""

from __future__ import annotations

import streamlit as st

from odapp.budget import cache as budget_cache
from odapp.game import cache as game_cache
from odcore.errors import ODCoreError
from odcore.report.teaching import GameRules, deal, parse_class_code


def power_of_ten(v: float) -> str:
    """``1e-06`` for 0.000001: the label of a δ choice."""
    return f"{v:.0e}"


def knock_target(mobility: dict, target) -> str:
    """A Knock Knock target with its mobility class: ``mobility`` maps target to class."""
    return f"{target} ({mobility[target]} mobility)"


def budget_over_weeks(epsilon: float, trips: int, weeks: int, delta: float, max_pairs: int | None, vs_trips,
                      total_interval: float):
    """The Privacy budget page's ε-over-weeks numbers with the lower end of the tight bracket too (composed only
    when downloaded); ``max_pairs``: the per-user bound, None per metric."""
    full = budget_cache.epsilon_over_weeks(epsilon, trips, weeks, delta, total_interval)
    if max_pairs is not None:
        full = budget_cache.person_curves(epsilon, max_pairs, delta, vs_trips, full)[1]
    return full


def game_join(fingerprint: str) -> None:
    """Callback of "Join" on the Play the attacker page: take the seed and known-trips choice from the class code
    (before the widgets are drawn)."""
    ss = st.session_state
    try:
        seed, choice, fp = parse_class_code(ss.get("game_join_code", ""))
    except ODCoreError as exc:
        ss["game_join_error"] = str(exc)
        return
    if fp != fingerprint:
        ss["game_join_error"] = ("this code was made with other settings (data, week, ε, threshold or guarantee "
                                 "unit): set the sidebar as on the teacher's screen, then join again.")
        return
    ss["game_join_error"] = None
    ss["game_seed"], ss["game_choice"] = seed, choice


def game_pool(ctx):
    """``(pool, rules)`` of the Play the attacker page: the week's people (cached) and the release's rules."""
    s = ctx.settings
    rcfg = s.release_config()
    pool = game_cache.attacker_pool(s.dataset.id, ctx.od_config, s.week, rcfg, s.seed, _od=ctx.od)
    return pool, GameRules(s.epsilon, s.threshold, rcfg.sensitivity)


def game_answer(ctx, game: str, k: int, j: int, game_seed: int, guess_in: bool) -> None:
    """Callback of "In"/"Out" on the Play the attacker page: the round (dealt again from the cached pool of the
    week, as the page dealt it) and the guess go into the game's history (``session_state[game]``)."""
    r = deal(*game_pool(ctx), k, j, game_seed)
    history = st.session_state[game]["history"]
    history.append({"round": len(history) + 1, "k": k, "j": j, "user": str(r.user), "guess": guess_in,
                    "member": r.member, "optimal": r.optimal_guess, "llr": r.llr_total,
                    "exact_success": r.exact_success()})
