"""The Trajectory recovery page's caches and drawings (the arithmetic is :mod:`odcore.recover`)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pydeck as pdk
import streamlit as st

from odapp.maps import deck as map_deck
from odcore.knock.timeseries import TimeSeriesConfig
from odcore.recover.aggregates import Population, SlotConfig, build_population
from odcore.recover.defences import Defence, DefenceSpec, defend
from odcore.recover.experiment import SweepConfig, run_sweep
from odcore.recover.phases import RecoveryConfig, day_bounds, recover
from odcore.recover.score import chance_accuracy, score

TRUE_RGB = [60, 60, 60]
RECOVERED_RGB = list(map_deck.ORIGIN_RGB)


@dataclass(frozen=True)
class RecoverSettings:
    """What the page's controls choose (a small, hashable cache key)."""

    people: int = 150
    days: int = 2
    grid_side: int = 20
    slot_minutes: int = 60
    tz: str = "UTC"
    seed: int = 0

    def slot_config(self) -> SlotConfig:
        n = self.days * (1440 // self.slot_minutes)
        return SlotConfig(TimeSeriesConfig(shape=(self.grid_side, self.grid_side), slot_minutes=self.slot_minutes,
                                           n_slots=n, tz=self.tz))


@st.cache_resource(max_entries=4, show_spinner="Building each person's cell in every hour…")
def population(dataset_id: str, rs: RecoverSettings, _df: pd.DataFrame) -> Population:
    """The first ``days`` whole days of the dataset, ``people`` drawn at random (shared and read-only)."""
    return build_population(_df, rs.slot_config()).subsample(rs.people, rs.seed)


@st.cache_data(max_entries=16, show_spinner="Recovering trajectories from the counts…")
def recovery(dataset_id: str, rs: RecoverSettings, spec: DefenceSpec, _pop: Population) -> dict:
    """One attack on the counts published under ``spec``: the recovered sequences and their score."""
    agg = _pop.aggregates()
    published = defend(_pop, spec, rs.seed)
    rec = recover(agg.with_counts(published), RecoveryConfig(n_people=_pop.n_users))
    s = score(rec, _pop.sequences, agg.cells.n_cells, days=day_bounds(agg))
    return {"recovered": rec, "score": s.to_dict(), "matching": s.matching, "per_slot": s.per_slot,
            "chance": chance_accuracy(_pop.sequences, agg.cells.n_cells, rs.seed)}


@st.cache_data(max_entries=8, show_spinner="Running the attack under every defence and ε…")
def sweep(dataset_id: str, rs: RecoverSettings, config: SweepConfig, _pop: Population) -> dict:
    return run_sweep(_pop, config)


def most_moving(pop: Population, n: int = 4) -> list[int]:
    """The ``n`` people who spend most slots away from their first cell (their paths show the most)."""
    away = (pop.sequences != pop.sequences[:, :1]).mean(axis=1)
    return [int(i) for i in np.argsort(-away, kind="stable")[:n]]


def chance_table(result: dict) -> pd.DataFrame:
    """Per defence, the ε below which the recovery is at chance (words when outside the ε tried)."""
    words = {"below_grid": "above chance at every ε tried", "above_grid": "at chance at every ε tried"}
    return pd.DataFrame([{"defence": d, "at chance below ε": f"{c['epsilon']:.3g}" if c["epsilon"] else words[c["where"]]}
                         for d, c in result["chance_epsilon"].items()])


def path_frame(pop: Population, rec: np.ndarray, matching: np.ndarray, people: list[int]) -> pd.DataFrame:
    """The segments drawn: for each chosen person, their true path and the recovered trajectory matched to them,
    one row per move between cells (``s`` → ``t``, [lon, lat])."""
    lat, lon = pop.cells.lat, pop.cells.lon
    rows = []
    for i, p in enumerate(people):
        agree = float(np.mean(pop.sequences[p] == rec[matching[p]]))
        for kind, seq, rgb, width in (("true", pop.sequences[p], TRUE_RGB, 5),
                                      ("recovered", rec[matching[p]], RECOVERED_RGB, 2.5)):
            off = 0.0008 * i        # people drawn a little apart so overlapping paths stay visible
            pts = [[round(float(lon[c]) + off, 5), round(float(lat[c]) + off, 5)] for c in seq]
            tip = f"person {i + 1}, {kind} path\nsame cell in {agree:.0%} of the hours"
            for a, b in pairwise(pts):
                if a != b:
                    rows.append({"s": a, "t": b, "color": rgb, "width": width, "tip": tip})
            rows.append({"s": pts[0], "t": pts[0], "color": rgb, "width": width, "tip": tip})
    return pd.DataFrame(rows)


def paths_deck(frame: pd.DataFrame, pop: Population) -> pdk.Deck:
    """Segments as a LineLayer (the kind the lab's other maps draw reliably without a GPU) and the cells visited
    as dots."""
    vs = pdk.ViewState(latitude=float(np.median(pop.cells.lat)), longitude=float(np.median(pop.cells.lon)), zoom=10)
    lines = pdk.Layer("LineLayer", data=frame, get_source_position="s", get_target_position="t",
                      get_color="color", get_width="width", width_min_pixels=1, pickable=True)
    dots = pdk.Layer("ScatterplotLayer", data=frame, get_position="t", get_fill_color="color", get_radius=60,
                     radius_min_pixels=2, pickable=False)
    return map_deck.deck([lines, dots], vs, height=460)


def per_slot_figure(per_slot: np.ndarray, chance: float) -> go.Figure:
    """Accuracy in every slot (the share of people in the right cell in that hour)."""
    fig = go.Figure(go.Scatter(x=np.arange(len(per_slot)), y=per_slot, mode="lines", name="accuracy per hour"))
    fig.add_hline(y=chance, line_dash="dash", annotation_text="chance")
    fig.update_layout(xaxis={"title": "hour since the first midnight"}, yaxis={"title": "accuracy", "range": [0, 1]},
                      height=220, margin={"l": 50, "r": 20, "t": 10, "b": 40}, showlegend=False)
    return fig


def curve_figure(result: dict) -> go.Figure:
    """Accuracy against ε per defence, with the no-defence level and the chance baseline."""
    rows = pd.DataFrame(result["rows"])
    fig = go.Figure()
    for d, g in rows[rows["epsilon"].notna()].groupby("defence", sort=False):
        fig.add_trace(go.Scatter(x=g["epsilon"], y=g["accuracy"], mode="lines+markers", name=str(d)))
    none = float(rows.loc[rows["defence"] == Defence.NONE.value, "accuracy"].iloc[0])
    fig.add_hline(y=none, line_dash="dot", annotation_text=f"no defence {none:.0%}")
    fig.add_hline(y=result["chance"], line_dash="dash", annotation_text=f"chance {result['chance']:.0%}")
    fig.update_layout(xaxis={"type": "log", "title": "ε"}, yaxis={"title": "accuracy (share of person-hours)",
                                                                    "range": [0, 1]},
                      height=380, margin={"l": 50, "r": 20, "t": 30, "b": 40}, legend={"orientation": "h"})
    return fig
