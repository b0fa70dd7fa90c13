"""Where the data lives: dense regions (clusters of users' home places) and the local time zone of a place.

A trace set that spans more than a metropolitan area (a worldwide check-in set) gives no usable OD grid as a whole:
at 1.3 km² a continent is millions of cells, and most of them are empty. :func:`find_regions` lists the dense
regions, each a cluster of users' *home cells* (the 0.1° cell where a user has most rows), with its user count and a
bounding box, densest first; the loader focuses on the densest by default (``region="auto"``).

:func:`zone_of_box` names the IANA time zone at the centre of a box (offline, with ``tzfpy``), so hours and weeks
are cut at local midnight without the person naming the zone.

>>> import numpy as np
>>> u = np.r_[np.zeros(5, int), np.ones(5, int), np.full(5, 2)]
>>> lat = np.r_[np.full(10, 30.27), np.full(5, 40.71)]
>>> lon = np.r_[np.full(10, -97.74), np.full(5, -74.0)]
>>> [(r.rank, r.users) for r in find_regions(u, lat, lon)]
[(1, 2), (2, 1)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from tzfpy import get_tz

from odcore.errors import ParameterError

__all__ = ["METRO_KM", "Region", "box_km", "find_regions", "home_cells", "pick_region", "regions_of_homes", "spans_metro",
           "zone_of_box"]

METRO_KM = 150.0
"""A box taller or wider than this spans more than a metropolitan area (then the loader looks for regions)."""
HOME_CELL_DEG = 0.1
"""Side of the cells (degrees, about 11 km) in which a user's home is the most used one."""
REGION_RADIUS_KM = 40.0
"""Home cells within this distance of a region's densest cell join the region."""
MAX_REGIONS = 12


def box_km(box) -> tuple[float, float]:
    """(height, width) in km of a :class:`odcore.data.traces.BBox` (width at its middle latitude)."""
    s, w, n, e = box.as_tuple()
    mid = math.radians((s + n) / 2)
    return (n - s) * 111.2, (e - w) * 111.2 * max(math.cos(mid), 0.01)


def spans_metro(box) -> bool:
    """True when ``box`` is taller or wider than :data:`METRO_KM`."""
    return max(box_km(box)) > METRO_KM


@dataclass(frozen=True)
class Region:
    """A dense region: rank (1 = most users), users whose home is in it, centre, box and local time zone."""

    rank: int
    users: int
    lat: float
    lon: float
    bbox: tuple[float, float, float, float]   # south, west, north, east
    tz: str

    def label(self) -> str:
        return f"#{self.rank}: {self.users:,} users around {self.lat:.2f}, {self.lon:.2f} ({self.tz})"

    def as_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "users": self.users, "lat": self.lat, "lon": self.lon, "bbox": list(self.bbox),
                "tz": self.tz}


def find_regions(user: np.ndarray, lat: np.ndarray, lon: np.ndarray, *, max_regions: int = MAX_REGIONS,
                 radius_km: float = REGION_RADIUS_KM) -> list[Region]:
    """Dense regions of the users' home cells, most users first.

    Each user's home is the :data:`HOME_CELL_DEG` cell holding most of their rows (ties: the lower cell). Greedily,
    the cell with most homes seeds a region, every home cell within ``radius_km`` of it joins, and those cells leave
    the pool; this repeats up to ``max_regions`` times. A region's box covers its home cells plus one cell on each
    side (visitors' points inside it are kept too).
    """
    return regions_of_homes(home_cells(user, lat, lon), max_regions=max_regions, radius_km=radius_km)


def home_cells(user: np.ndarray, lat: np.ndarray, lon: np.ndarray) -> pd.DataFrame:
    """Each user's home: ``DataFrame[u, i, j]``, the :data:`HOME_CELL_DEG` cell (row ``i``, column ``j``) holding
    most of their rows (ties: the lower cell). A user's home needs only that user's rows, so the homes of disjoint
    sets of users (a streamed folder's groups of files) can be concatenated."""
    user = np.asarray(user)
    ci = np.floor(np.asarray(lat, np.float64) / HOME_CELL_DEG).astype(np.int64)
    cj = np.floor(np.asarray(lon, np.float64) / HOME_CELL_DEG).astype(np.int64)
    t = pd.DataFrame({"u": user, "i": ci, "j": cj}).value_counts(sort=False).reset_index(name="n")
    t = t.sort_values(["u", "n", "i", "j"], ascending=[True, False, True, True], kind="stable")
    return t.drop_duplicates("u", keep="first")[["u", "i", "j"]]


def regions_of_homes(homes: pd.DataFrame, *, max_regions: int = MAX_REGIONS,
                     radius_km: float = REGION_RADIUS_KM) -> list[Region]:
    """:func:`find_regions` of the users' homes (:func:`home_cells`)."""
    cells = homes.groupby(["i", "j"], sort=True).size().reset_index(name="users")
    ci, cj, cu = cells["i"].to_numpy(), cells["j"].to_numpy(), cells["users"].to_numpy()
    clat = (ci + 0.5) * HOME_CELL_DEG
    clon = (cj + 0.5) * HOME_CELL_DEG
    left = np.ones(len(cells), bool)
    out: list[Region] = []
    while left.any() and len(out) < max_regions:
        idx = np.flatnonzero(left)
        seed = idx[np.argmax(cu[idx])]
        dy = (clat[idx] - clat[seed]) * 111.2
        dx = (clon[idx] - clon[seed]) * 111.2 * math.cos(math.radians(clat[seed]))
        mem = idx[np.hypot(dx, dy) <= radius_km]
        left[mem] = False
        w = cu[mem].astype(np.float64)
        c_lat, c_lon = float(np.average(clat[mem], weights=w)), float(np.average(clon[mem], weights=w))
        box = (round(max(float(ci[mem].min() - 1) * HOME_CELL_DEG, -90.0), 6),
               round(max(float(cj[mem].min() - 1) * HOME_CELL_DEG, -180.0), 6),
               round(min(float(ci[mem].max() + 2) * HOME_CELL_DEG, 90.0), 6),
               round(min(float(cj[mem].max() + 2) * HOME_CELL_DEG, 180.0), 6))
        out.append(Region(rank=0, users=int(cu[mem].sum()), lat=round(c_lat, 4), lon=round(c_lon, 4), bbox=box,
                          tz=zone_at(c_lat, c_lon)))
    out.sort(key=lambda r: (-r.users, r.lat, r.lon))
    return [Region(rank=k + 1, users=r.users, lat=r.lat, lon=r.lon, bbox=r.bbox, tz=r.tz) for k, r in enumerate(out)]


def pick_region(regions: list[Region], spec: Any) -> Region:
    """The region named by ``spec``: ``"auto"`` (the densest) or its 1-based rank."""
    if not regions:
        raise ParameterError("no region found in the data.")
    if isinstance(spec, str) and spec.strip().lower() == "auto":
        return regions[0]
    try:
        k = int(spec)
    except (TypeError, ValueError):
        raise ParameterError(f"region must be 'auto', 'all', a rank 1..{len(regions)} or S,W,N,E, got "
                             f"region={spec!r}.") from None
    if not 1 <= k <= len(regions):
        raise ParameterError(f"region must be a rank 1..{len(regions)} (the data has {len(regions)} region(s)), "
                             f"got region={spec!r}.")
    return regions[k - 1]


def zone_at(lat: float, lon: float) -> str:
    """The IANA zone at a point (``tzfpy``, offline); ``UTC`` at sea (an ``Etc/`` zone) ."""
    z = get_tz(float(lon), float(lat))
    return "UTC" if not z or z.startswith("Etc/") else z


def zone_of_box(box) -> str:
    """:func:`zone_at` the centre of a :class:`odcore.data.traces.BBox` (the data's local zone, per region)."""
    s, w, n, e = box.as_tuple()
    return zone_at((s + n) / 2, (w + e) / 2)
