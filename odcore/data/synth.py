"""A synthetic city: users with homes, workplaces and an exploration / preferential-return life.

The generator gives traces in the trace schema (``user, time, lat, lon``, UTC) with the ingredients Houssiau et al.
(2022) and Bassolas et al. (2022) reason about: weekly trips between ~1.3 km² cells, with a realistic spread of
unique weekly trips per user (median in the tens, a long tail) and enough concentration that many OD pairs pass the
100-user threshold.

Model (all vectorised over users; the only loop is over the hours of the simulated weeks):

- **Space.** Residential density is a mixture of a dense centre (Clark's negative-exponential profile) and
  suburban sub-centres; jobs concentrate more (a central business district plus the sub-centres); shared venues
  (shops, leisure) are drawn like jobs and carry Zipf popularity.
- **Anchors.** Each user has a home; commuters (``commuter_share``) have a workplace. Personal regularity:
  departure hour, working hours, the probability of going to work on a weekday, wake-up and bed times.
- **Leisure and errands.** In free waking hours a user starts an outing with a personal rate (log-normal across
  users, which yields the long tail). The destination follows Song et al. (2010), "Modelling the scaling
  properties of human mobility": with probability ``rho * S**-gamma`` (S = distinct places seen so far) the user
  explores a new place at a jump distance drawn from a truncated power law ``P(r) ~ (r + r0)**-(1+beta)``, snapped
  to a nearby venue weighted by popularity; otherwise they return to a known place with probability proportional
  to past visits (preferential return). Outings last 1-3 hours and may chain. Nights are spent at home.
- **Records.** One location per user-hour, kept at the first and last hour of every stay (a stay's inner hours
  repeat the same place and add no trip), each stamped at a random second within its hour, like sparse CDR.
  Winner-takes-all hours and trips (:func:`odcore.od.trips.build_od`) are therefore exactly those of the full hourly
  sequence.

Reference: C. Song, T. Koren, P. Wang, A.-L. Barabási, "Modelling the scaling properties of human mobility",
Nature Physics 6, 818-823 (2010): rho = 0.6, gamma = 0.21, beta = 0.55 (defaults here: rho = 0.8).
"""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from odcore.constants import DEFAULT_SAMPLE_SEED, LAT, LON, TIME, USER
from odcore.errors import ParameterError, check_positive
from odcore.paths import atomic_folder

__all__ = ["DEFAULT_SAMPLE_CONFIG", "DEFAULT_SAMPLE_SEED", "SynthConfig", "generate_city", "write_city_chunked",
           "write_sample"]

_KM_PER_DEG = 111.32
_MAX_IN_MEMORY_USER_WEEKS = 5_000_000   # ~7 GB for the table and the simulation's arrays
_MAX_PLACES = 40          # personal place slots: 0 home, 1 work, 2.. venues


@dataclass(frozen=True)
class SynthConfig:
    """Parameters of :func:`generate_city`.

    Parameters
    ----------
    users, weeks:
        Population and simulated weeks (each Monday 00:00 to Sunday 24:00 local time).
    center:
        (lat, lon) of the city centre (default: Atlanta, GA, the city of Houssiau et al.'s utility arithmetic).
    extent_km:
        Radius of the urbanised area in km.
    start:
        First Monday (ISO date), local time.
    tz:
        Local time zone of the daily schedule (output times are UTC).
    commuter_share:
        Fraction of users with a workplace they commute to on weekdays.
    outing_rate:
        Median (over users) probability of starting an outing in a free waking hour.
    outing_sigma:
        Log-normal spread of the personal outing rate across users (drives the tail of trips per week).
    n_subcentres:
        Suburban centres around the core.
    venues:
        Number of shared venues (default: users // 8, at least 500).
    rho, gamma, beta, r0_km:
        Exploration / preferential-return parameters of Song et al. (2010) (they fit rho = 0.6 over months of
        data; the default 0.8 compensates for a memory that starts empty at each simulation start).
    """

    users: int = 25_000
    weeks: int = 1
    center: tuple[float, float] = (33.7490, -84.3880)
    extent_km: float = 20.0
    start: str = "2024-01-08"
    tz: str = "UTC"
    commuter_share: float = 0.8
    outing_rate: float = 0.3
    outing_sigma: float = 1.2
    n_subcentres: int = 6
    venues: int | None = None
    rho: float = 0.8
    gamma: float = 0.21
    beta: float = 0.55
    r0_km: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.users, int | np.integer) or self.users < 2:
            raise ParameterError(f"users must be an integer >= 2, got users={self.users!r}.")
        if self.users > 100_000_000:
            raise ParameterError(f"users must be <= 100,000,000, got users={self.users}.")
        if not isinstance(self.weeks, int | np.integer) or not (1 <= self.weeks <= 104):
            raise ParameterError(f"weeks must be an integer in [1, 104], got weeks={self.weeks!r}.")
        try:
            lat, lon = (float(v) for v in self.center)
        except (TypeError, ValueError):
            raise ParameterError(f"center must be (lat, lon), got center={self.center!r}.") from None
        if not (-80 <= lat <= 80 and -180 <= lon <= 180):
            raise ParameterError(f"center must be a (lat, lon) with |lat| <= 80, got center={self.center!r}.")
        check_positive("extent_km", self.extent_km)
        if self.extent_km > 200:
            raise ParameterError(f"extent_km must be <= 200 (a city), got extent_km={self.extent_km}.")
        try:
            ts = pd.Timestamp(self.start)
        except (TypeError, ValueError):
            raise ParameterError(f"start must be an ISO date, got start={self.start!r}.") from None
        if ts.day_of_week != 0 or ts != ts.normalize():
            raise ParameterError(f"start must be a Monday at 00:00, got start={self.start!r} ({ts.day_name()}).")
        try:
            pd.Timestamp("2020-01-01").tz_localize(self.tz)
        except Exception:
            raise ParameterError(f"tz must be an IANA time zone, got tz={self.tz!r}.") from None
        for name in ("commuter_share",):
            v = getattr(self, name)
            if not (0 <= v <= 1):
                raise ParameterError(f"{name} must be in [0, 1], got {name}={v}.")
        if not (0 < self.outing_rate < 1):
            raise ParameterError(f"outing_rate must be in (0, 1), got outing_rate={self.outing_rate}.")
        check_positive("outing_sigma", self.outing_sigma, allow_zero=True)
        if self.n_subcentres < 0:
            raise ParameterError(f"n_subcentres must be >= 0, got n_subcentres={self.n_subcentres}.")
        if self.venues is not None and self.venues < 10:
            raise ParameterError(f"venues must be >= 10, got venues={self.venues}.")
        if not (0 < self.rho <= 1):
            raise ParameterError(f"rho must be in (0, 1], got rho={self.rho}.")
        check_positive("gamma", self.gamma, allow_zero=True)
        check_positive("beta", self.beta)
        check_positive("r0_km", self.r0_km)

    @property
    def n_venues(self) -> int:
        return self.venues if self.venues is not None else max(500, self.users // 8)


DEFAULT_SAMPLE_CONFIG = SynthConfig()
"""The settings of the bundled ``sample_data/synthetic_city.parquet`` (seed 2022)."""


# ---------------------------------------------------------------------------------------------------------------
# Space
# ---------------------------------------------------------------------------------------------------------------

def _subcentres(cfg: SynthConfig, rng: np.random.Generator) -> np.ndarray:
    k = cfg.n_subcentres
    if k == 0:
        return np.zeros((0, 2))
    ang = 2 * np.pi * (np.arange(k) / k + rng.uniform(0, 1 / k, k))
    rad = cfg.extent_km * rng.uniform(0.3, 0.65, k)
    return np.stack([rad * np.cos(ang), rad * np.sin(ang)], axis=1)


def _radial(n: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Points around (0, 0) with density ~ exp(-r / scale) (Clark 1951): r ~ Gamma(2, scale)."""
    r = rng.gamma(2.0, scale, n)
    a = rng.uniform(0, 2 * np.pi, n)
    return np.stack([r * np.cos(a), r * np.sin(a)], axis=1)


def _mixture(n: int, cfg: SynthConfig, subs: np.ndarray, w_core: float, core_scale: float, sub_scale: float,
             w_spread: float, rng: np.random.Generator) -> np.ndarray:
    """Core + sub-centres + diffuse spread, clipped to 1.2 x extent."""
    comp = rng.choice(3, size=n, p=[w_core, 1 - w_core - w_spread, w_spread] if len(subs) else
                      [w_core / (w_core + w_spread), 0.0, w_spread / (w_core + w_spread)])
    pts = np.empty((n, 2))
    m = comp == 0
    pts[m] = _radial(int(m.sum()), core_scale, rng)
    m = comp == 1
    if m.any():
        which = rng.integers(0, len(subs), int(m.sum()))
        pts[m] = subs[which] + _radial(int(m.sum()), sub_scale, rng)
    m = comp == 2
    pts[m] = _radial(int(m.sum()), cfg.extent_km / 3.0, rng)
    r = np.hypot(pts[:, 0], pts[:, 1])
    lim = 1.2 * cfg.extent_km
    far = r > lim
    pts[far] *= (lim / r[far])[:, None] * rng.uniform(0.5, 1.0, int(far.sum()))[:, None]
    return pts


def _truncated_power_law(n: int, cfg: SynthConfig, rng: np.random.Generator) -> np.ndarray:
    """Jump lengths with P(r) ~ (r + r0)^-(1+beta), r < 1.5 x extent (Song et al. 2010)."""
    cap = 1.5 * cfg.extent_km
    # Inverse CDF of the Lomax law truncated at `cap`.
    fcap = 1.0 - (1.0 + cap / cfg.r0_km) ** (-cfg.beta)
    u = rng.uniform(0.0, fcap, n)
    return cfg.r0_km * ((1.0 - u) ** (-1.0 / cfg.beta) - 1.0)


# ---------------------------------------------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------------------------------------------

def generate_city(config: SynthConfig | None = None, rng: np.random.Generator | int | None = None,
                  ) -> pd.DataFrame:
    """Simulate ``config.users`` people for ``config.weeks`` weeks; return a trace table.

    Parameters
    ----------
    config:
        :class:`SynthConfig` (default settings = the bundled sample).
    rng:
        Generator, seed or None. Same seed, same output.

    Returns
    -------
    pandas.DataFrame
        Columns ``user`` (int64), ``time`` (datetime64[ns, UTC]), ``lat``, ``lon``, sorted by (user, time).
    """
    cfg = config or SynthConfig()
    if cfg.users * cfg.weeks > _MAX_IN_MEMORY_USER_WEEKS:
        raise ParameterError(f"{cfg.users:,} users x {cfg.weeks} weeks is too big for one table in memory (limit "
                             f"{_MAX_IN_MEMORY_USER_WEEKS:,} user-weeks); write it in chunks to a folder "
                             "(write_city_chunked, or synth --out DIR).")
    rng = np.random.default_rng(rng)
    return _simulate(cfg, rng, _city(cfg, rng), int(cfg.users), 0)


VENUE_INDEX_MODULE = "odcore.data.venues"
"""The module of the venues' nearest-neighbour index (scipy's k-d tree), imported when a city is generated: loading
this module (the dashboard does, for its synthetic-city control) keeps scipy out of memory."""


def _city(cfg: SynthConfig, rng: np.random.Generator) -> tuple:
    """Space shared by every user: sub-centres, venues (km offsets from the centre), their popularity and index."""
    subs = _subcentres(cfg, rng)
    e = cfg.extent_km
    venues = _mixture(cfg.n_venues, cfg, subs, w_core=0.45, core_scale=e / 20, sub_scale=e / 40, w_spread=0.15,
                      rng=rng)
    v_pop = rng.pareto(1.0, cfg.n_venues) + 1.0              # Zipf-like popularity
    return subs, venues, v_pop, importlib.import_module(VENUE_INDEX_MODULE).venue_index(venues)


def _simulate(cfg: SynthConfig, rng: np.random.Generator, city: tuple, U: int, first_user: int) -> pd.DataFrame:
    """Traces of ``U`` users (ids from ``first_user``) living in ``city``."""
    subs, venues, v_pop, tree = city
    e = cfg.extent_km
    H = 168 * int(cfg.weeks)
    K = _MAX_PLACES

    # --- homes, workplaces (km offsets from the centre) --------------------------------------------------------
    homes = _mixture(U, cfg, subs, w_core=0.50, core_scale=e / 10, sub_scale=e / 25, w_spread=0.10, rng=rng)
    works = _mixture(U, cfg, subs, w_core=0.55, core_scale=e / 20, sub_scale=e / 40, w_spread=0.10, rng=rng)

    places = np.zeros((U, K, 2))
    places[:, 0] = homes
    places[:, 1] = works
    visits = np.zeros((U, K), dtype=np.float32)            # preferential-return weights (venue slots)
    n_known = np.full(U, 2, dtype=np.int64)                 # slots in use (home, work)

    # --- personal schedules (regularity) ------------------------------------------------------------------------
    commuter = rng.random(U) < cfg.commuter_share
    p_work = rng.beta(12, 1.5, U)                           # chance of going to work on a weekday
    dep = np.clip(np.rint(rng.normal(8.0, 1.0, U)), 5, 11).astype(np.int64)
    dur = np.clip(np.rint(rng.normal(9.0, 1.0, U)), 5, 12).astype(np.int64)
    wake = np.clip(np.rint(rng.normal(7.5, 1.0, U)), 5, 10).astype(np.int64)
    bed = np.clip(np.rint(rng.normal(23.0, 1.0, U)), 21, 26).astype(np.int64)   # 24, 25 = after midnight
    p_out = np.clip(cfg.outing_rate * np.exp(cfg.outing_sigma * rng.standard_normal(U)), 0.005, 0.7)
    p_lunch = rng.beta(1.5, 5, U)
    p_chain = np.clip(rng.beta(2, 5, U) + 0.6 * p_out, 0, 0.9)   # active people chain more
    p_stop = rng.beta(1.5, 4, U)                            # errand on the way to work (school, gym, coffee)

    pos = np.zeros((U, H), dtype=np.int8)                   # place slot per hour
    cur = np.zeros(U, dtype=np.int64)                       # current slot (home)
    stay = np.zeros(U, dtype=np.int64)                      # remaining outing hours

    def destinations(idx: np.ndarray, origin_xy: np.ndarray) -> np.ndarray:
        """Exploration / preferential return (Song et al. 2010) for users ``idx``; returns slots."""
        n = idx.size
        slots = np.empty(n, dtype=np.int64)
        known_venues = n_known[idx] - 2
        p_new = cfg.rho * np.maximum(n_known[idx] - 1, 1).astype(float) ** (-cfg.gamma)
        explore = (rng.random(n) < p_new) | (known_venues == 0)
        explore &= n_known[idx] < K
        # preferential return: slot with probability ~ visits
        ret = np.flatnonzero(~explore)
        if ret.size:
            w = visits[idx[ret]]
            cw = np.cumsum(w, axis=1)
            r = rng.random(ret.size) * cw[:, -1]
            slots[ret] = np.argmax(cw > r[:, None], axis=1)
        exp_ = np.flatnonzero(explore)
        if exp_.size:
            d = _truncated_power_law(exp_.size, cfg, rng)
            a = rng.uniform(0, 2 * np.pi, exp_.size)
            target = origin_xy[exp_] + np.stack([d * np.cos(a), d * np.sin(a)], axis=1)
            _, nn = tree.query(target, k=6)
            wpop = v_pop[nn]
            cwp = np.cumsum(wpop, axis=1)
            pick = np.argmax(cwp > (rng.random(exp_.size) * cwp[:, -1])[:, None], axis=1)
            v = nn[np.arange(exp_.size), pick]
            ui = idx[exp_]
            s = n_known[ui]
            places[ui, s] = venues[v]
            n_known[ui] = s + 1
            slots[exp_] = s
        visits[idx, slots] += 1.0
        return slots

    for h in range(H):
        day, hd = divmod(h, 24)
        dow = day % 7
        if hd == 0:
            goes = commuter & (dow < 5) & (rng.random(U) < p_work)
            dep_d = dep + (rng.random(U) < 0.2) * rng.choice([-1, 1], U)
            ret_d = dep_d + dur + (rng.random(U) < 0.25) * rng.choice([-1, 1], U)
            lunch_d = rng.random(U) < p_lunch
            stop_d = rng.random(U) < p_stop
        # awake: wake <= hd < bed (bed may pass midnight: hours 0/1 of the next day count as "before bed")
        awake = (hd >= wake) & ((hd < bed) | (bed > 24)) | ((bed > 24) & (hd < bed - 24))
        at_work_time = goes & (hd >= dep_d) & (hd < ret_d)
        lunch_time = at_work_time & ((lunch_d & (hd == 12)) | (stop_d & (hd == dep_d)))
        new = cur.copy()
        # sleep: home
        new[~awake] = 0
        # working hours: at work (a lunch outing of one hour at 12:00)
        w_idx = np.flatnonzero(awake & at_work_time & ~lunch_time)
        new[w_idx] = 1
        stay[w_idx] = 0
        l_idx = np.flatnonzero(awake & lunch_time)
        if l_idx.size:   # lunch near work, errand on the way (from where the user is)
            new[l_idx] = destinations(l_idx, places[l_idx, np.where(hd == 12, 1, cur[l_idx])])
            stay[l_idx] = 0
        # free waking hours
        free = awake & ~at_work_time
        on_outing = free & (cur >= 2) & (stay > 0)
        stay[on_outing] -= 1
        ended = free & (cur >= 2) & (stay == 0) & ~on_outing
        chain = ended & (rng.random(U) < p_chain)
        go_home = ended & ~chain
        new[go_home] = 0
        start = free & (cur < 2) & ~on_outing & (rng.random(U) < p_out)
        new[free & (cur == 1) & ~start] = 0                 # after work: home unless an outing starts
        need = np.flatnonzero(chain | start)
        if need.size:
            new[need] = destinations(need, places[need, cur[need]])
            stay[need] = rng.integers(0, 3, need.size)      # 1-3 hours at the venue
        cur = new
        pos[:, h] = cur

    # --- records: first and last hour of every stay ---------------------------------------------------------
    change_prev = np.ones((U, H), dtype=bool)
    change_prev[:, 1:] = pos[:, 1:] != pos[:, :-1]
    change_next = np.ones((U, H), dtype=bool)
    change_next[:, :-1] = pos[:, :-1] != pos[:, 1:]
    keep = change_prev | change_next
    uu, hh = np.nonzero(keep)                              # sorted by (user, hour)
    slot = pos[uu, hh].astype(np.int64)
    xy = places[uu, slot]
    lat0, lon0 = float(cfg.center[0]), float(cfg.center[1])
    lat = lat0 + xy[:, 1] / _KM_PER_DEG
    lon = lon0 + xy[:, 0] / (_KM_PER_DEG * math.cos(math.radians(lat0)))
    # hour starts: local wall clock -> UTC
    local = pd.date_range(pd.Timestamp(cfg.start), periods=H, freq="h").as_unit("ns")
    if cfg.tz.upper() == "UTC":
        hour_ns = local.asi8
    else:
        hour_ns = local.tz_localize(cfg.tz, ambiguous=True, nonexistent="shift_forward").tz_convert("UTC").as_unit("ns").asi8
    sec = 60 * rng.integers(0, 60, uu.size)                 # a random minute within the hour
    t_ns = hour_ns[hh] + sec * 1_000_000_000
    time = pd.DatetimeIndex(t_ns.view("datetime64[ns]")).tz_localize("UTC")
    return pd.DataFrame({USER: uu.astype(np.int64) + int(first_user), TIME: time, LAT: np.round(lat, 5),
                         LON: np.round(lon, 5)})


def _arrow_table(df: pd.DataFrame):
    # Seconds resolution + delta encoding keep the time column small (it dominates the file otherwise).
    return pa.table({
        USER: pa.array(df[USER].to_numpy(np.int64 if df[USER].max() >= 2**31 else np.int32)),
        TIME: pa.array(df[TIME].to_numpy(dtype="datetime64[ns]").astype("datetime64[s]"), pa.timestamp("s", tz="UTC")),
        LAT: pa.array(df[LAT].to_numpy()),
        LON: pa.array(df[LON].to_numpy()),
    })


# A chunked city folder holds this hidden manifest (the list of its part files): a later run may replace such a
# folder whole, and refuses any other non-empty folder (loaders skip names that start with ".").
SYNTH_MANIFEST = ".odcore-synth.json"


def is_synth_folder(folder) -> bool:
    """True when ``folder`` holds exactly what :func:`write_city_chunked` wrote there (its manifest and parts)."""
    p = Path(folder)
    try:
        files = json.loads((p / SYNTH_MANIFEST).read_text(encoding="utf-8"))["files"]
        present = {e.name for e in p.iterdir()}
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return isinstance(files, list) and present <= {SYNTH_MANIFEST, *map(str, files)}


def write_city_chunked(folder, config: SynthConfig | None = None, seed: int = DEFAULT_SAMPLE_SEED, *,
                       chunk_users: int = 200_000) -> dict:
    """Generate a big city in chunks of users and write one Parquet file per chunk (``part-00000.parquet`` ...).

    Memory stays that of one chunk (~1.5 KB per user-week of the chunk), so 10 million users fit on a laptop. The
    city (sub-centres, venues) is drawn once from ``seed``; chunk ``i`` then simulates its users with the generator
    ``default_rng([seed, i])``, so the output depends only on (config, seed, chunk_users), and the files read as one
    table (a folder of Parquet files, as ``--input`` and the engines accept it).

    All or nothing (:func:`odcore.paths.atomic_folder`): the parts are written into a hidden folder beside
    ``folder`` that becomes ``folder`` only when the last part is written, so a run that is stopped leaves no
    folder of some of the users. ``folder`` must be new, empty, or an earlier output of this function (it is then
    replaced whole); a folder holding other files is refused and left as it was.

    Returns ``{"files", "rows", "users"}``.
    """
    cfg = config or DEFAULT_SAMPLE_CONFIG
    if int(chunk_users) < 1:
        raise ParameterError(f"chunk_users must be >= 1, got chunk_users={chunk_users}.")
    out = Path(folder)
    rows = 0
    names = []
    with atomic_folder(out, is_synth_folder, what=f"synth --out {out}") as tmp:
        city = _city(cfg, np.random.default_rng(seed))
        for i, first in enumerate(range(0, int(cfg.users), int(chunk_users))):
            n = min(int(chunk_users), int(cfg.users) - first)
            df = _simulate(cfg, np.random.default_rng([int(seed), i]), city, n, first)
            name = f"part-{i:05d}.parquet"
            pq.write_table(_arrow_table(df), str(tmp / name), compression="zstd", compression_level=3,
                           use_dictionary=[LAT, LON], column_encoding={USER: "DELTA_BINARY_PACKED",
                                                                       TIME: "DELTA_BINARY_PACKED"},
                           row_group_size=1 << 20)
            rows += len(df)
            names.append(name)
            del df
        (tmp / SYNTH_MANIFEST).write_text(json.dumps({"files": names, "rows": rows, "users": int(cfg.users),
                                                      "seed": int(seed), "chunk_users": int(chunk_users)}),
                                          encoding="utf-8")
    return {"files": [str(out / n) for n in names], "rows": rows, "users": int(cfg.users)}


def write_sample(path, config: SynthConfig | None = None, seed: int = DEFAULT_SAMPLE_SEED) -> pd.DataFrame:
    """Generate a city and write it as zstd-compressed Parquet (used for ``sample_data/``)."""
    df = generate_city(config or DEFAULT_SAMPLE_CONFIG, seed)
    table = _arrow_table(df)
    pq.write_table(table, str(path), compression="zstd", compression_level=19, use_dictionary=[USER, LAT, LON],
                   column_encoding={TIME: "DELTA_BINARY_PACKED"}, row_group_size=1 << 22)
    return df
