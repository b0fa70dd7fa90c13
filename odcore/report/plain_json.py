"""Reports as plain JSON: the summaries the command line prints and writes, the design report the dashboard caches.

numpy scalars and arrays become Python numbers and lists, NaN and infinities (undefined figures, e.g. nothing
published) become null, dates their ISO text and string enums their value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["jsonable"]


def jsonable(o: Any) -> Any:
    """Plain JSON types; NaN and infinities (undefined figures, e.g. nothing published) become null."""
    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if isinstance(o, np.ndarray):
        return [jsonable(v) for v in o.tolist()]
    if isinstance(o, (bool, np.bool_)):
        return bool(o)
    if isinstance(o, (int, np.integer)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        f = float(o)
        return f if math.isfinite(f) else None
    if o is None or isinstance(o, str):
        return o
    if hasattr(o, "isoformat"):
        return o.isoformat()
    if hasattr(o, "value") and isinstance(o.value, str):  # str enums
        return o.value
    return str(o)
