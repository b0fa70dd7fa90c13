"""Every ``st.cache_*`` wrapper of the app, keyed on small things (dataset id, frozen configs, seed).

Large objects are passed as ``_``-prefixed arguments, which Streamlit does not hash: the dataset id already says
which data they are. Heavy, read-only engine objects use ``st.cache_resource`` (no copy on each rerun, which keeps a
slider change well under 300 ms); small tables use ``st.cache_data``. Nothing in here reads a global.
"""

from __future__ import annotations

import streamlit as st

from odapp import data as _data


@st.cache_resource(max_entries=2, show_spinner="Reading the bundled synthetic city…")
def sample_traces(dataset_id: str) -> _data.Loaded:
    return _data.load_sample()


@st.cache_resource(max_entries=4, show_spinner="Synthesising a city…")
def synth_traces(users: int, weeks: int, extent_km: float, seed: int) -> _data.Loaded:
    return _data.load_synth(users, weeks, extent_km, seed)


@st.cache_resource(max_entries=8, show_spinner="Cutting traces into weekly trips on the grid…")
def od_data(dataset_id: str, od_config, _df):
    """:func:`odcore.trips.build_od` of the dataset ``dataset_id`` (``_df`` is its trace table)."""
    from odcore.trips import build_od

    return build_od(_df, od_config)
