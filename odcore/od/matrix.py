"""A week of OD counts as a sparse matrix (scipy.sparse), for linear algebra on the flows; counting itself never
needs scipy."""

from __future__ import annotations

from scipy import sparse

from odcore.constants import COUNT, DESTINATION, ORIGIN
from odcore.od.oddata import ODData


def week_matrix(od: ODData, w: int) -> sparse.coo_matrix:
    """Week ``w`` of ``od`` as a ``scipy.sparse.coo_matrix`` of shape (n_cells, n_cells) indexed by zone ids."""
    c = od.week_counts(w)
    n = od.grid.n_cells
    return sparse.coo_matrix((c[COUNT].to_numpy(), (c[ORIGIN].to_numpy(), c[DESTINATION].to_numpy())), shape=(n, n))
