"""The Knock Knock page's cached computations: the location time-series and the defences' error."""

from __future__ import annotations

from odapp.shared.caching import cache_data, cache_resource
from odcore.knock import build_timeseries, mre_table


@cache_resource(max_entries=4, show_spinner="Building location time-series (10 × 10 grid, hourly)…")
def knock_series(dataset_id: str, ts_config, _df):
    """:func:`odcore.knock.build_timeseries` of the dataset (heavy, read-only: not copied per rerun)."""
    return build_timeseries(_df, ts_config)


@cache_data(max_entries=16, show_spinner="Measuring the defences' error…")
def knock_mre(dataset_id: str, ts_config, mre_config, _ts):
    return mre_table(_ts, mre_config)
