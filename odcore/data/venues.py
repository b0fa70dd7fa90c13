"""The synthetic city's venues indexed for nearest-neighbour queries (scipy's k-d tree): an explorer picks among
the six venues nearest to where they head (:mod:`odcore.data.synth`)."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree


def venue_index(venues: np.ndarray) -> cKDTree:
    """A k-d tree over the venues' ``(x, y)`` km offsets; ``query(points, k=6)`` gives the nearest six."""
    return cKDTree(venues)
