"""The app's reading of :mod:`odcore.report.facts`: the week's named quantities, computed once per data, zones,
week and release settings (cached, shared by every page and session), and the guarantee card every page opens with.
"""

from __future__ import annotations

import streamlit as st

from odapp.attack import cache as attack_cache
from odapp.shared import caching
from odcore.report.facts import HEADLINE_DELTA, located_in_week, week_facts


@st.cache_data(max_entries=64, show_spinner=False, hash_funcs=caching.HASH_FUNCS)
def facts(dataset_id: str, od_config, week: int, release_config, seed: int, _od) -> dict:
    """:func:`odcore.report.facts.week_facts` of the settings: the typical person is attacked on the rows the
    release counts (:func:`odapp.attack.cache.attack_pairs`, shared with the Attack page), so both show one number."""
    if not _od.stats.get("pairs_available", True):
        return week_facts(None, week=week, release=release_config, delta=HEADLINE_DELTA)
    pairs, counts = attack_cache.attack_pairs(dataset_id, od_config, week, release_config, seed, _od=_od)
    return week_facts(_od.week_pairs(week), week=week, release=release_config, attack_pairs=pairs, counts=counts,
                      people_data=_od.n_users,
                      people_located=located_in_week(_od.user_week, week), delta=HEADLINE_DELTA)


def of(ctx) -> dict:
    """The facts of a page's context (:class:`odapp.shared.sidebar.PageContext`)."""
    s = ctx.settings
    return facts(s.dataset.id, ctx.od_config, s.week, s.release_config(), int(s.seed), _od=ctx.od)
