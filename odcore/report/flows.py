"""Flow-map geometry and structure, shared by the dashboard's map and the exported figure (pure numpy/pandas).

How a flow map stays readable (the approach of flowmap.blue / flowmap.gl, Boyandin 2022, and kepler.gl's flow layer):
flows are directed curved arrows whose width and colour grow with the count, A→B and B→A bend to opposite sides;
locations are circles sized by their totals (out, in, within); when most of the largest flows are too short to read
at the first view, nearby zones are merged into clusters (:func:`cluster_zones`) and the flows between clusters are
drawn instead (flows inside a cluster become part of its "within" total). Summing published noisy counts is
post-processing of the release: it costs no privacy.

Everything is in a local equirectangular projection in km (:func:`project`), fine at city scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

KM_PER_DEG_LAT = 110.574
KM_PER_DEG_LON_EQUATOR = 111.320
TILE_PX = 512                  # deck.gl's world is 512·2^zoom px wide
N_CLASSES = 4                  # count classes of the flows (width and colour)
BEND = 0.16                    # control point offset of a flow's curve, × its length, to the right of travel
SCREEN_MAP_PX = (580, 460)     # the OD release page's narrowest map (a 1024 px window, sidebar open): its level


@dataclass(frozen=True)
class Projection:
    """Local equirectangular projection about ``(lon0, lat0)``: x, y in km."""

    lon0: float
    lat0: float

    @property
    def kx(self) -> float:
        return KM_PER_DEG_LON_EQUATOR * math.cos(math.radians(self.lat0))

    def xy(self, lon, lat) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(lon, float) - self.lon0) * self.kx, (np.asarray(lat, float) - self.lat0) * KM_PER_DEG_LAT

    def lonlat(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(x, float) / self.kx + self.lon0, np.asarray(y, float) / KM_PER_DEG_LAT + self.lat0


def project(lon, lat) -> Projection:
    """The projection centred on the points' box."""
    lon, lat = np.asarray(lon, float), np.asarray(lat, float)
    if not np.isfinite(lon).any():
        return Projection(0.0, 0.0)
    return Projection(float((np.nanmin(lon) + np.nanmax(lon)) / 2), float((np.nanmin(lat) + np.nanmax(lat)) / 2))


@dataclass(frozen=True)
class View:
    """A flat web-mercator view: centre, zoom, and how many km one screen pixel is at its centre."""

    lat: float
    lon: float
    zoom: float

    @property
    def km_per_px(self) -> float:
        return 360 / (TILE_PX * 2 ** self.zoom) * KM_PER_DEG_LON_EQUATOR * math.cos(math.radians(self.lat))


def fit_view(lon_min: float, lon_max: float, lat_min: float, lat_max: float, *, width_px: int, height_px: int,
             pad_px: int = 24, max_zoom: float = 16) -> View:
    """The largest zoom at which the box fits inside a ``width_px`` × ``height_px`` map with ``pad_px`` to spare
    on every side, no pitch. Web mercator: at zoom z the world is 512·2^z px wide and a latitude φ sits at
    y = ln tan(π/4 + φ/2) · 512·2^z / 2π."""
    if not all(map(math.isfinite, (lon_min, lon_max, lat_min, lat_max))):
        return View(0.0, 0.0, 1.0)

    def merc(p):
        return math.log(math.tan(math.pi / 4 + math.radians(max(min(p, 85.0), -85.0)) / 2))

    w, h = max(width_px - 2 * pad_px, 40), max(height_px - 2 * pad_px, 40)
    dlon = max(lon_max - lon_min, 1e-5)
    dy = max(merc(lat_max) - merc(lat_min), 1e-7)
    z = min(math.log2(w * 360 / (TILE_PX * dlon)), math.log2(h * 2 * math.pi / (TILE_PX * dy)), max_zoom)
    yc = (merc(lat_max) + merc(lat_min)) / 2
    lat_c = math.degrees(2 * math.atan(math.exp(yc)) - math.pi / 2)
    return View(lat=lat_c, lon=(lon_min + lon_max) / 2, zoom=max(z, 0.5))


def zone_size_km(polygons, proj: Projection) -> float:
    """√(median zone area) in km: the side of a typical zone (squares, hexagons or a zone file's polygons)."""
    areas = []
    for q in polygons:
        a = np.asarray(q, float)
        if len(a) < 3:
            continue
        x, y = proj.xy(a[:, 0], a[:, 1])
        areas.append(0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))))
    return math.sqrt(float(np.median(areas))) if areas else 1.0


def cluster_zones(x: np.ndarray, y: np.ndarray, weight: np.ndarray, radius: float, tree=None) -> np.ndarray:
    """Cluster id of each zone: the heaviest zone not yet taken starts a cluster and takes every zone not yet taken
    within ``radius`` (km) of it, and so on (greedy, deterministic: ties by position in the input); then the same
    once more on the clusters' weighted centres, so that two clusters whose centres ended up closer than ``radius``
    (a sliver left at a larger cluster's edge) become one. ``radius`` 0 keeps every zone on its own. Ids are
    0..k-1. ``tree``: a ``scipy.spatial.cKDTree`` of the points, when the caller tries several radii."""
    lab = greedy_clusters(x, y, weight, radius, tree)
    if radius <= 0 or not len(lab):
        return lab
    k = int(lab.max()) + 1
    w = np.bincount(lab, weight, minlength=k).astype(float)
    n = np.bincount(lab, minlength=k)
    safe = np.where(w > 0, w, 1.0)
    cx = np.where(w > 0, np.bincount(lab, weight * x, minlength=k) / safe, np.bincount(lab, x, minlength=k) / n)
    cy = np.where(w > 0, np.bincount(lab, weight * y, minlength=k) / safe, np.bincount(lab, y, minlength=k) / n)
    top = greedy_clusters(cx, cy, w, radius)
    _, out = np.unique(top[lab], return_inverse=True)
    return out.astype(np.int64)


def greedy_clusters(x: np.ndarray, y: np.ndarray, weight: np.ndarray, radius: float, tree=None) -> np.ndarray:
    """One greedy pass of :func:`cluster_zones` (each zone's neighbours found at once, in C; then plain lists: a
    seed's neighbours are few, and a numpy call per seed cost more than the loop)."""
    n = len(x)
    if radius <= 0 or n == 0:
        return np.arange(n, dtype=np.int64)
    pts = np.column_stack([x, y])
    if tree is None:
        tree = cKDTree(pts)
    near_all = tree.query_ball_point(pts, radius)
    label = [-1] * n
    k = 0
    for i in np.lexsort((np.arange(n), -np.asarray(weight, float))).tolist():
        if label[i] >= 0:
            continue
        for j in near_all[i]:
            if label[j] < 0:
                label[j] = k
        label[i] = k
        k += 1
    return np.array(label, dtype=np.int64)


def sum_pairs(o: np.ndarray, d: np.ndarray, c: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(o, d, sum of c)`` per distinct pair of ids below ``k`` (numpy: no pandas groupby on a hot path)."""
    key = np.asarray(o, np.int64) * k + np.asarray(d, np.int64)
    u, inv = np.unique(key, return_inverse=True)
    return u // k, u % k, np.bincount(inv, np.asarray(c, float), minlength=len(u))


def location_sums(origin: np.ndarray, destination: np.ndarray, count: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """:func:`location_totals` as a dict of arrays (no DataFrame on the map's hot path)."""
    o, d, c = (np.asarray(v) for v in (origin, destination, count))
    c = np.nan_to_num(c.astype(float))
    same = o == d
    out = np.bincount(o[~same], c[~same], minlength=n)
    inn = np.bincount(d[~same], c[~same], minlength=n)
    within = np.bincount(o[same], c[same], minlength=n)
    return {"out": out, "in": inn, "within": within, "total": out + inn + within}


def location_totals(origin: np.ndarray, destination: np.ndarray, count: np.ndarray, n: int) -> pd.DataFrame:
    """Per location id 0..n-1: the sum of ``count`` leaving it for another location (``out``), arriving from
    another (``in``) and staying within it (``within``), and ``total`` = out + in + within."""
    return pd.DataFrame(location_sums(origin, destination, count, n))


def aggregate(origin: np.ndarray, destination: np.ndarray, label_of: dict | pd.Series, columns: dict) -> pd.DataFrame:
    """Flows between zones summed to flows between clusters: ``label_of`` maps a zone id to its cluster; ``columns``
    ``{name: values}`` are summed; ``pairs`` counts the zone pairs in each. Returns ``o, d, pairs, *columns``."""
    lab = pd.Series(label_of) if isinstance(label_of, dict) else label_of
    o = lab.reindex(np.asarray(origin)).to_numpy()
    d = lab.reindex(np.asarray(destination)).to_numpy()
    df = pd.DataFrame({"o": o, "d": d, "pairs": 1, **{k: np.asarray(v, float) for k, v in columns.items()}})
    df = df.dropna(subset=["o", "d"])
    df[["o", "d"]] = df[["o", "d"]].astype(np.int64)
    return df.groupby(["o", "d"], as_index=False, sort=False).sum()


def class_bounds(lo: float, hi: float, k: int = N_CLASSES) -> np.ndarray:
    """``k + 1`` class edges from ``lo`` to ``hi`` (equal steps; one class when lo == hi)."""
    if not hi > lo:
        return np.array([lo, hi if hi > lo else lo + 1.0])
    return np.linspace(lo, hi, k + 1)


def classes(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Class index of each value (0 .. len(edges) - 2; the top edge belongs to the last class)."""
    k = len(edges) - 1
    return np.clip(np.searchsorted(edges, np.asarray(values, float), side="right") - 1, 0, k - 1)


def arrows(x0, y0, x1, y1, width, *, gap0=0.0, gap1=0.0, bend: float = BEND, head_len=None,
           n: int = 8) -> np.ndarray:
    """Curved arrows as polygons, shape (m, 2·n + 3, 2), in the coordinates of the inputs (km).

    Each flow is a quadratic Bézier curve from (x0, y0) to (x1, y1), its ends pulled in by ``gap0`` and ``gap1``
    (so it starts and ends at a location circle's edge), bulging to the right of travel by ``bend`` × length (A→B
    and B→A are two curves side by side); a body of ``width`` then a head ``head_len`` long (default 3 × width, at
    most 40 % of the curve) and twice the body's width, its tip on the end point. Vertices: the body's right side
    (n points), the head (right barb, tip, left barb), the body's left side back (n points)."""
    x0, y0, x1, y1, w = (np.atleast_1d(np.asarray(v, float)) for v in np.broadcast_arrays(x0, y0, x1, y1, width))
    g0, g1 = (np.broadcast_to(np.asarray(v, float), x0.shape) for v in (gap0, gap1))
    m = len(x0)
    if m == 0:
        return np.zeros((0, 2 * n + 3, 2))
    dx, dy = x1 - x0, y1 - y0
    L = np.hypot(dx, dy)
    Ls = np.where(L > 0, L, 1.0)
    ux, uy = dx / Ls, dy / Ls
    g0 = np.minimum(g0, 0.3 * L)
    g1 = np.minimum(g1, 0.3 * L)
    ax, ay = x0 + ux * g0, y0 + uy * g0
    bx, by = x1 - ux * g1, y1 - uy * g1
    ll = np.hypot(bx - ax, by - ay)
    w = np.minimum(w, 0.3 * ll)          # a short flow stays an arrow, not a blob
    cx, cy = (ax + bx) / 2 + bend * ll * uy, (ay + by) / 2 - bend * ll * ux   # (uy, -ux): right of travel
    hl = 3.0 * w if head_len is None else np.broadcast_to(np.asarray(head_len, float), x0.shape)
    hl = np.minimum(hl, 0.45 * ll)
    # the head's base: where the curve is hl from its end (the last piece of a gentle curve is nearly straight)
    th = np.clip(1 - hl / np.where(ll > 0, ll, 1.0), 0.05, 1.0)
    t = np.linspace(0, 1, n)[None, :] * th[:, None]

    def at(tt):
        px = (1 - tt) ** 2 * ax[:, None] + 2 * (1 - tt) * tt * cx[:, None] + tt ** 2 * bx[:, None]
        py = (1 - tt) ** 2 * ay[:, None] + 2 * (1 - tt) * tt * cy[:, None] + tt ** 2 * by[:, None]
        tx = 2 * (1 - tt) * (cx[:, None] - ax[:, None]) + 2 * tt * (bx[:, None] - cx[:, None])
        ty = 2 * (1 - tt) * (cy[:, None] - ay[:, None]) + 2 * tt * (by[:, None] - cy[:, None])
        tn = np.hypot(tx, ty)
        tn = np.where(tn > 0, tn, 1.0)
        return px, py, ty / tn, -tx / tn      # point and its right-hand normal

    px, py, nx, ny = at(t)
    half = (w / 2)[:, None]
    right = np.stack([px + nx * half, py + ny * half], axis=-1)
    left = np.stack([px - nx * half, py - ny * half], axis=-1)[:, ::-1]
    hb_x, hb_y, hn_x, hn_y = px[:, -1], py[:, -1], nx[:, -1], ny[:, -1]
    hw = w   # the head is twice the body's width
    head = np.stack([np.stack([hb_x + hn_x * hw, hb_y + hn_y * hw], axis=-1),
                     np.stack([bx, by], axis=-1),
                     np.stack([hb_x - hn_x * hw, hb_y - hn_y * hw], axis=-1)], axis=1)
    return np.concatenate([right, head, left], axis=1)


def circles(x, y, r, n: int = 16) -> np.ndarray:
    """Circles as polygons (m, n, 2)."""
    a = np.linspace(0, 2 * np.pi, n, endpoint=False)[None, :]
    x, y, r = (np.atleast_1d(np.asarray(v, float))[:, None] for v in np.broadcast_arrays(x, y, r))
    return np.stack([x + r * np.cos(a), y + r * np.sin(a)], axis=-1)


# Structure first (flowmap.blue's clustering, Boyandin 2022): the first view should show a legible number of places
# and arrows long enough to read; what "legible" is, in screen terms, does not depend on the city's size in km.
PLACES = (12, 60)    # a legible number of places at the first view (fewer when the data has fewer zones)
READ_PX = 28         # an arrow at least this long at the first view reads as an arrow
BLOB_PX = 14         # one shorter than this is a blob of ink between two circles
CROWD_PX = 24        # two places' centres closer than this: their circles touch or nearly
CLUSTER_PX = (0, 8, 11, 15, 20, 26, 34, 44, 58, 76)   # cluster radii tried, in px of the first view
NEAR_BEST = 0.8      # a level whose readable arrows (net of blobs) are this share of the best one's is good enough
AUTO_FLOWS = (20, 60)    # Top N "auto": at least this many flows (when there are), at most this many, and
AUTO_VOLUME = 0.8        # in between, the fewest of the largest that carry this share of the volume between places


def auto_top(counts: np.ndarray) -> int:
    """How many flows Top N "auto" draws of flows with these counts: the fewest of the largest that carry
    :data:`AUTO_VOLUME` of their volume, but at least ``AUTO_FLOWS[0]`` (or all there are) and at most
    ``AUTO_FLOWS[1]``: past a few dozen arrows a flow map is a ball of ink (detail on demand: raise Top N).

    >>> auto_top(np.full(300, 5.0)), auto_top(np.r_[1000.0, np.ones(99)]), auto_top(np.ones(7))
    (60, 20, 7)
    """
    c = np.sort(np.nan_to_num(np.asarray(counts, float)))[::-1]
    n = len(c)
    tot = float(c.sum())
    k = int(np.searchsorted(np.cumsum(c), AUTO_VOLUME * tot - 1e-9 * abs(tot)) + 1) if tot > 0 else n
    return int(min(n, max(k, AUTO_FLOWS[0]), AUTO_FLOWS[1]))


def fewest_places(n_zones: int) -> int:
    """The fewest places a merged level may leave of ``n_zones`` zones and still show structure: ``PLACES[0]``, or
    a third of the zones when they are few (at least 3)."""
    return int(min(PLACES[0], max(3, math.ceil(n_zones / 3))))


@dataclass(frozen=True)
class LevelScore:
    """How a cluster radius reads at the first view (:func:`level_scores`): ``radius`` (km), ``places``, ``flows``
    (drawn: the Top N between places), ``readable`` (of those, at least :data:`READ_PX` long), ``blobs`` (shorter
    than :data:`BLOB_PX`), ``crowded`` (places whose nearest neighbour is closer than :data:`CROWD_PX`: their
    circles touch), ``min_places`` (the fewest places that still show structure: ``PLACES[0]``, or a third of the
    zones when they are few)."""

    radius: float
    places: int
    flows: int
    readable: int
    blobs: int
    crowded: int = 0
    min_places: int = PLACES[0]

    @property
    def score(self) -> int:
        """Arrows that read, less those that do not (a blob counts twice: it also hides its circles), less the
        places crowded onto a neighbour."""
        return self.readable - (self.flows - self.readable) - self.blobs - self.crowded

    @property
    def legible(self) -> bool:
        """A number of places from :attr:`min_places` to ``PLACES[1]`` (or the zones themselves) and a positive
        :attr:`score`."""
        return (self.places >= self.min_places or self.radius == 0) and self.places <= PLACES[1] and self.score > 0


def level_scores(x: np.ndarray, y: np.ndarray, weight: np.ndarray, origin_idx: np.ndarray, dest_idx: np.ndarray,
                 count: np.ndarray, top_n: int | None, km_per_px: float, *, stop_at: float | None = None
                 ) -> list[LevelScore]:
    """:class:`LevelScore` of each radius of :data:`CLUSTER_PX` (in px at ``km_per_px``) in turn, up to the first
    that leaves fewer than ``PLACES[0]`` places once one was legible (a larger radius only merges more), two places,
    or, with ``stop_at``, the first legible one that scores at least ``stop_at``. ``top_n`` None: as many flows as :func:`auto_top` says.
    ``origin_idx``/``dest_idx`` index ``x, y``; ``weight`` orders the cluster seeds (:func:`cluster_zones`)."""
    out: list[LevelScore] = []
    count = np.asarray(count, float)
    least = fewest_places(len(x))
    tree, gap = None, 0.0
    if len(x) > 1:
        tree = cKDTree(np.column_stack([x, y]))
        gap = float(tree.query(tree.data, k=2)[0][:, 1].min())   # closer than this, no zone has a neighbour
    for r_px in CLUSTER_PX:
        r = r_px * km_per_px
        if 0 < r < gap:
            continue                     # merges nothing: the same as the zones themselves
        lab = cluster_zones(x, y, weight, r, tree)
        k = int(lab.max()) + 1 if len(lab) else 0
        w = np.bincount(lab, weight, minlength=k)
        safe = np.where(w > 0, w, 1)
        cxk = np.where(w > 0, np.bincount(lab, weight * x, minlength=k) / safe, 0.0)
        cyk = np.where(w > 0, np.bincount(lab, weight * y, minlength=k) / safe, 0.0)
        lo_, ld_ = lab[origin_idx], lab[dest_idx]
        between = lo_ != ld_
        po, pd_, pc = sum_pairs(lo_[between], ld_[between], count[between], max(k, 1))
        n = min(len(pc), auto_top(pc) if top_n is None else int(top_n))
        if len(pc) > n:
            top = np.argpartition(-pc, n - 1)[:n] if n else np.zeros(0, np.int64)
            po, pd_ = po[top], pd_[top]
        length = np.hypot(cxk[po] - cxk[pd_], cyk[po] - cyk[pd_]) / km_per_px
        crowded = 0
        if k > 1:
            near = cKDTree(np.column_stack([cxk, cyk])).query(np.column_stack([cxk, cyk]), k=2)[0][:, 1]
            crowded = int((near / km_per_px < CROWD_PX).sum())
        out.append(LevelScore(r, k, len(po), int((length >= READ_PX).sum()), int((length < BLOB_PX).sum()),
                              crowded, least))
        now = out[-1]
        best = max((s.score for s in out if s.legible), default=None)
        if (k <= 2 or not len(pc) or (k < least and best is not None)
                or (best is not None and now.legible and now.score < NEAR_BEST * best)   # past the best: only worse
                or (stop_at is not None and now.legible and now.score >= stop_at)):
            break
    return out


def choose_radius(x: np.ndarray, y: np.ndarray, weight: np.ndarray, origin_idx: np.ndarray,
                  dest_idx: np.ndarray, count: np.ndarray, top_n: int | None, km_per_px: float) -> float:
    """The cluster radius (km) of the first view, from :func:`level_scores`: the smallest of the radii that leave a
    legible number of places (:data:`PLACES`) with more readable arrows than blobs whose count of readable arrows
    net of blobs is within :data:`NEAR_BEST` of the best of them (merge no more than needed); if no radius is
    legible, the best net count of any radius tried (the smaller on a tie). So the level depends on the data's
    extent and density at the screen's scale, not on a fixed distance. 0 keeps every zone on its own."""
    # no level draws more than Top N arrows, so a legible one with NEAR_BEST of that many is the answer: stop there
    cap = AUTO_FLOWS[1] if top_n is None else int(top_n)
    scores = level_scores(x, y, weight, origin_idx, dest_idx, count, top_n, km_per_px, stop_at=NEAR_BEST * cap)
    legible = [s for s in scores if s.legible]
    if legible:
        top = max(s.score for s in legible)
        if scores[-1].legible and scores[-1].score >= NEAR_BEST * cap:
            top = max(top, cap)          # stopped at a level as good as any can be: that one
        return min(s.radius for s in legible if s.score >= NEAR_BEST * top)
    return max(scores, key=lambda s: (s.score, -s.radius)).radius if scores else 0.0


def place_radius_px(x: np.ndarray, y: np.ndarray, km_per_px: float, largest: float = 16.0,
                    least: float = 8.0) -> float:
    """The radius (px) of the largest place's circle: ``largest``, or less where places lie close (just over half
    the median distance from a place to its nearest neighbour, at least ``least``), so that neighbouring circles
    do not hide each other and the arrows between them."""
    if len(x) < 2 or not km_per_px > 0:
        return largest
    pts = np.column_stack([x, y])
    near = cKDTree(pts).query(pts, k=2)[0][:, 1] / km_per_px
    return float(np.clip(0.55 * np.median(near), least, largest))


def inside_polygons(pts: np.ndarray, polys: np.ndarray) -> np.ndarray:
    """``(k, m)``: whether each of ``k`` points lies inside each of ``m`` polygons ``(m, n, 2)`` (even-odd rule)."""
    a = polys[None]
    b = np.roll(polys, -1, axis=1)[None]
    px, py = pts[:, None, None, 0], pts[:, None, None, 1]
    dy = np.where(b[..., 1] != a[..., 1], b[..., 1] - a[..., 1], 1e-18)
    cross = ((a[..., 1] > py) != (b[..., 1] > py)) & (px < (b[..., 0] - a[..., 0]) * (py - a[..., 1]) / dy + a[..., 0])
    return (cross.sum(axis=-1) % 2) == 1


def clearance_px(x: np.ndarray, y: np.ndarray, polys: np.ndarray, km_per_px: float) -> np.ndarray:
    """For each point, the distance (px) to the nearest outline of the polygons ``(m, n, 2)`` (0 inside one)."""
    if not len(polys) or not len(x):
        return np.full(len(x), np.inf)
    a = polys[None]
    ab = np.roll(polys, -1, axis=1)[None] - a
    p = np.stack([np.asarray(x, float), np.asarray(y, float)], axis=-1)[:, None, None, :]
    t = np.clip(((p - a) * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-18), 0, 1)
    d = np.hypot(*(p - (a + t[..., None] * ab)).transpose(3, 0, 1, 2)).min(axis=2) / km_per_px
    d = np.where(inside_polygons(p[:, 0, 0, :], polys), 0.0, d)
    return d.min(axis=1)


def clear_radii(x: np.ndarray, y: np.ndarray, r_px: np.ndarray, make_arrows, km_per_px: float, *,
                least_px: float = 1.5, rounds: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Place circles that cover no arrow: each radius (px) at most the distance from the place's centre to the
    nearest arrow outline less 1 px (its own arrows included: they start and end at its edge), 0 (no circle) where
    that leaves less than ``least_px``. ``make_arrows(r_px)`` draws the arrows for radii ``r_px`` (their ends pulled
    in to the circles' edges); a smaller circle moves its arrows' ends, so it is drawn again, at most ``rounds``
    times, and the radii are checked once more against the arrows returned. Returns ``(radii, arrows)``."""
    r = np.asarray(r_px, float).copy()
    polys = make_arrows(r)
    for _ in range(rounds):
        cap = clearance_px(x, y, polys, km_per_px) - 1.0
        new = np.where(cap >= least_px, np.minimum(r, cap), 0.0)
        if np.allclose(new, r):
            return r, polys
        r = new
        polys = make_arrows(r)
    cap = clearance_px(x, y, polys, km_per_px) - 1.0
    return np.where(cap >= least_px, np.minimum(r, cap), 0.0), polys


def curves(x0, y0, x1, y1, *, gap0=0.0, gap1=0.0, bend: float = BEND, n: int = 17) -> tuple[np.ndarray, np.ndarray]:
    """The centre lines of :func:`arrows` (ends pulled in by ``gap0``/``gap1``, bulging right of travel): arrays
    ``(m, n)`` of x and y, for a figure that draws each flow as a line of a width in px and a head marker."""
    x0, y0, x1, y1 = (np.atleast_1d(np.asarray(v, float)) for v in np.broadcast_arrays(x0, y0, x1, y1))
    g0, g1 = (np.broadcast_to(np.asarray(v, float), x0.shape) for v in (gap0, gap1))
    dx, dy = x1 - x0, y1 - y0
    L = np.hypot(dx, dy)
    Ls = np.where(L > 0, L, 1.0)
    ux, uy = dx / Ls, dy / Ls
    g0, g1 = np.minimum(g0, 0.3 * L), np.minimum(g1, 0.3 * L)
    ax, ay = x0 + ux * g0, y0 + uy * g0
    bx, by = x1 - ux * g1, y1 - uy * g1
    ll = np.hypot(bx - ax, by - ay)
    cx, cy = (ax + bx) / 2 + bend * ll * uy, (ay + by) / 2 - bend * ll * ux
    t = np.linspace(0, 1, n)[None, :]
    px = (1 - t) ** 2 * ax[:, None] + 2 * (1 - t) * t * cx[:, None] + t ** 2 * bx[:, None]
    py = (1 - t) ** 2 * ay[:, None] + 2 * (1 - t) * t * cy[:, None] + t ** 2 * by[:, None]
    return px, py


@dataclass(frozen=True, eq=False)
class FlowPicture:
    """What a flow map draws, at the level chosen (:func:`flow_picture`).

    ``places``: one row per place (a zone, or nearby zones merged): ``x, y`` (km, :attr:`proj`), ``lon, lat``,
    ``members`` (its zone ids, heaviest first), ``out, in, within, total`` of the counts drawn. ``flows``: the
    ``top_n`` largest flows between places (``o, d`` index ``places``; ``count`` the value drawn, ``true_count``,
    ``noisy_count`` (published part), ``p_min, p_max`` (release probabilities of its pairs), ``released`` (any pair
    published), ``pairs``), largest first. ``suppressed``: the same for the pairs the threshold removed (``count``
    their true count; ``p`` the largest release probability) or None. ``radius``: km within which zones were merged
    (0: zones as they are). Zones that carry nothing drawn are no place. ``n_between``: how many flows between
    places there are at this level (``flows`` holds the largest ``top_n`` of them), ``volume_share``: the share of
    their summed count that ``flows`` carries; ``auto_top``: ``top_n`` was chosen by :func:`auto_top`. ``box``:
    ``(lon_min, lon_max, lat_min, lat_max)`` of the centroids of the zones that carry what is drawn (the 0.5th to
    99.5th percentile past 500 of them), what a first view must hold."""

    proj: Projection
    places: pd.DataFrame
    flows: pd.DataFrame
    suppressed: pd.DataFrame | None
    class_edges: np.ndarray
    radius: float
    n_zones: int
    n_between: int = 0
    volume_share: float = 1.0
    auto_top: bool = False
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def level_words(self, short: bool = False) -> str:
        """The level shown, in words for the legend (``short``: for a figure's subtitle)."""
        k = len(self.places)
        if self.radius > 0:
            if short:
                return f"nearby zones merged within {self.radius:.1f} km ({k:,} places)"
            return f"Level: nearby zones merged (within {self.radius:.1f} km): {k:,} places from {self.n_zones:,} zones"
        return f"zones as published ({self.n_zones:,} zones)" if short else \
            f"Level: zones as published ({self.n_zones:,} zones)"

    def shown_words(self) -> str:
        """Which flows are drawn, in words: "top 60 of 300 flows between places, 71 % of their volume" (all of
        them: "all 12 flows between places")."""
        n, m = len(self.flows), self.n_between
        if n >= m:
            return f"all {m:,} flow{'' if m == 1 else 's'} between places"
        return f"top {n:,} of {m:,} flows between places, {100 * self.volume_share:.0f} % of their volume"


def flow_picture(table: pd.DataFrame, centroids: pd.DataFrame, *, value: str, keep: np.ndarray, top_n: int | None,
                 min_count: float = 0.0, cell=None, km_per_px: float | None = None,
                 view_px: tuple[int, int] | None = None, with_suppressed: bool = False,
                 suppressed_on_places: bool = False) -> FlowPicture:
    """The flows of a release table to draw: the pairs where ``keep`` with ``value >= min_count`` (touching ``cell``
    if given), summed between places, the ``top_n`` largest kept (``top_n`` None or 0: as many as :func:`auto_top`
    says, structure first).

    With ``km_per_px`` (the first view's scale), or ``view_px`` (``(width, height)`` of a map whose first view is
    fitted to :attr:`FlowPicture.box`), and no ``cell``, nearby zones are merged as :func:`choose_radius` says;
    otherwise every zone is its own place. ``table``: a release table (``origin,
    destination, true_count, noisy_count, release_prob, released``); ``centroids``: ``cell, lat, lon``. Sums of
    published noisy counts are post-processing of the release. ``suppressed_on_places``: the places (and so the
    level and the first view) are those of the kept flows alone, and only the suppressed flows between two of them
    are kept (a side-by-side view: the same places on both maps)."""
    cent = centroids.drop_duplicates("cell")
    ids = cent["cell"].to_numpy()
    proj = project(cent["lon"], cent["lat"])
    zx, zy = proj.xy(cent["lon"], cent["lat"])
    order = np.argsort(ids, kind="stable")
    origin, destination = table["origin"].to_numpy(), table["destination"].to_numpy()

    def where(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The zone positions of the rows' origins and destinations, and whether both are known (only the rows
        asked for: a release table has every observed pair, a map draws a few hundred)."""
        if not len(ids):
            z = np.zeros(len(rows), np.int64)
            return z, z, np.zeros(len(rows), bool)
        out = []
        for col in (origin, destination):
            v = col[rows]
            i = order[np.searchsorted(ids, v, sorter=order).clip(max=len(ids) - 1)]
            out.append((i, ids[i] == v))
        return out[0][0], out[1][0], out[0][1] & out[1][1]

    touch = np.ones(len(table), bool) if cell is None else (origin == cell) | (destination == cell)
    values = table[value].to_numpy(dtype=float)
    rows = np.flatnonzero(np.asarray(keep, bool) & touch & (np.nan_to_num(values, nan=-np.inf) >= min_count))
    oi, di, ok = where(rows)
    rows, oi, di = rows[ok], oi[ok], di[ok]
    m = rows
    c = np.nan_to_num(values[rows])
    tot = location_sums(oi, di, c, len(ids))["total"]
    need = tot > 0                       # zones that carry a drawn count (or a suppressed flow): the places
    if with_suppressed:
        srows = np.flatnonzero(~table["released"].to_numpy(bool) & touch)
        so_z, sd_z, ok = where(srows)
        if suppressed_on_places:
            ok &= need[so_z] & need[sd_z]
        srows, so_z, sd_z = srows[ok], so_z[ok], sd_z[ok]
        need[so_z] = True
        need[sd_z] = True
    active = np.flatnonzero(need)
    ax_, ay_, aw = zx[active], zy[active], tot[active]
    at = np.full(len(ids), -1, dtype=np.int64)
    at[active] = np.arange(len(active))
    box = active_box(cent["lon"].to_numpy(float)[active], cent["lat"].to_numpy(float)[active])
    if km_per_px is None and view_px is not None and len(active):
        km_per_px = fit_view(*box, width_px=int(view_px[0]), height_px=int(view_px[1]), pad_px=34).km_per_px
    auto = not top_n
    radius = 0.0
    if km_per_px and cell is None and len(c):
        radius = choose_radius(ax_, ay_, aw, at[oi], at[di], c, None if auto else top_n, km_per_px)
    lab_a = cluster_zones(ax_, ay_, aw, radius)
    lab = np.full(len(ids), -1, dtype=np.int64)
    lab[active] = lab_a
    k = int(lab_a.max()) + 1 if len(lab_a) else 0
    wsum = np.bincount(lab_a, aw, minlength=k)
    n_in = np.maximum(np.bincount(lab_a, minlength=k), 1)
    safe = np.where(wsum > 0, wsum, 1)
    # a place's position: its zones' mean weighted by their totals (their plain mean when it carries nothing)
    px = np.where(wsum > 0, np.bincount(lab_a, aw * ax_, minlength=k) / safe,
                  np.bincount(lab_a, ax_, minlength=k) / n_in)
    py = np.where(wsum > 0, np.bincount(lab_a, aw * ay_, minlength=k) / safe,
                  np.bincount(lab_a, ay_, minlength=k) / n_in)
    members: list[list] = [[] for _ in range(k)]
    a_ids = ids[active].tolist()
    for z in np.lexsort((np.arange(len(active)), -aw)).tolist():
        members[lab_a[z]].append(a_ids[z])
    sub = table.iloc[m]
    rel = sub["released"].to_numpy(bool)
    key = lab[oi] * max(k, 1) + lab[di]
    u, inv = np.unique(key, return_inverse=True)
    n_u = len(u)
    # a published table alone has neither (odcore.report.figures.published_map_frames): NaN, never guessed
    p = sub["release_prob"].to_numpy(float) if "release_prob" in sub.columns else np.full(len(sub), np.nan)
    tc = sub["true_count"].to_numpy(float) if "true_count" in sub.columns else np.full(len(sub), np.nan)
    p_min, p_max = np.full(n_u, np.inf), np.full(n_u, -np.inf)
    np.fmin.at(p_min, inv, p)
    np.fmax.at(p_max, inv, p)
    p_min[np.isinf(p_min)], p_max[np.isinf(p_max)] = np.nan, np.nan
    agg = pd.DataFrame({
        "o": u // max(k, 1), "d": u % max(k, 1), "count": np.bincount(inv, c, n_u),
        "true_count": np.bincount(inv, tc, n_u),
        "noisy_count": np.bincount(inv, np.where(rel, sub["noisy_count"].to_numpy(float), 0.0), n_u),
        "p_min": p_min, "p_max": p_max, "released": np.bincount(inv, rel.astype(float), n_u) > 0,
        "pairs": np.bincount(inv, minlength=n_u)})
    loc = location_sums(agg["o"].to_numpy(), agg["d"].to_numpy(), agg["count"].to_numpy(), k)
    lon, lat = proj.lonlat(px, py)
    places = pd.DataFrame({"x": px, "y": py, "lon": lon, "lat": lat, "members": pd.Series(members, dtype=object),
                           **loc})
    b = np.flatnonzero(agg["o"].to_numpy() != agg["d"].to_numpy())
    bc = agg["count"].to_numpy()[b]
    if auto:   # the largest pairs of places, both ways: A→B and B→A side by side, or neither
        top_n = auto_top(bc)
        b = b[both_ways_order(agg["o"].to_numpy()[b], agg["d"].to_numpy()[b], bc, top_n)]
    else:
        b = b[np.argsort(-bc, kind="stable")][:int(top_n)]
    flows = agg.iloc[b].reset_index(drop=True)
    b_total = float(np.nan_to_num(bc).sum())
    share = float(np.nan_to_num(flows["count"].to_numpy()).sum()) / b_total if b_total > 0 else 1.0
    v = flows["count"].to_numpy()
    lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.0, 1.0)
    sup = None
    if with_suppressed:
        so_, sd_ = lab[so_z], lab[sd_z]
        s_t = table.iloc[srows]
        bt = so_ != sd_
        key = so_[bt] * max(k, 1) + sd_[bt]
        u, inv = np.unique(key, return_inverse=True)
        ps = np.full(len(u), -np.inf)
        np.maximum.at(ps, inv, s_t["release_prob"].to_numpy(float)[bt])
        sa = pd.DataFrame({"o": u // max(k, 1), "d": u % max(k, 1),
                           "count": np.bincount(inv, s_t["true_count"].to_numpy(float)[bt], len(u)), "p": ps,
                           "pairs": np.bincount(inv, minlength=len(u))})
        # as many as the published flows drawn (Top N); with none drawn, as many as Top N "auto" takes of these
        cap = int(top_n) if top_n else auto_top(sa["count"].to_numpy())
        top = np.argsort(-sa["count"].to_numpy(), kind="stable")[:cap]
        sup = sa.iloc[top].reset_index(drop=True)
    return FlowPicture(proj, places, flows, sup, class_bounds(lo, hi), radius, len(active), len(bc), share, auto,
                       box)


def both_ways_order(o: np.ndarray, d: np.ndarray, count: np.ndarray, n: int) -> np.ndarray:
    """Indices of the flows to draw, largest first, taking pairs of places whole: the pairs ``{A, B}`` in order of
    their two flows' summed count, each pair's flows together, until ``n`` flows are taken (``n + 1`` when the
    ``n``-th flow's way back would be left out).

    >>> both_ways_order(np.array([0, 1, 2, 0]), np.array([1, 0, 0, 2]), np.array([5.0, 4.0, 8.0, 0.5]), 2)
    array([0, 1])
    """
    o, d = np.asarray(o, np.int64), np.asarray(d, np.int64)
    c = np.nan_to_num(np.asarray(count, float))
    if not len(c):
        return np.zeros(0, np.int64)
    k = int(max(o.max(), d.max())) + 1
    key = np.minimum(o, d) * k + np.maximum(o, d)
    _, inv = np.unique(key, return_inverse=True)
    pair_total = np.bincount(inv, c)[inv]
    order = np.lexsort((np.arange(len(c)), -c, inv, -pair_total))
    n = min(int(n), len(c))
    if 0 < n < len(c) and inv[order[n]] == inv[order[n - 1]]:
        n += 1
    return order[:n]


def active_box(lon: np.ndarray, lat: np.ndarray, many: int = 500) -> tuple[float, float, float, float]:
    """``(lon_min, lon_max, lat_min, lat_max)`` of the points: the whole box for up to ``many`` points, else the
    0.5th to 99.5th percentile (a stray zone far out does not shrink the map)."""
    if not len(lon):
        return (0.0, 0.0, 0.0, 0.0)
    q = (0, 100) if len(lon) <= many else (0.5, 99.5)
    (a, b), (c, d) = np.nanpercentile(lon, q), np.nanpercentile(lat, q)
    return (float(a), float(b), float(c), float(d))
