"""CSV that is safe to open in a spreadsheet: every CSV the lab writes goes through :func:`write_csv`.

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return as a formula
(CSV injection). Names and ids come from the data (zone names, user ids), so :func:`neutralise` puts a single
quote before such a text cell, the rule of the OWASP "CSV Injection" page; numbers (numeric columns, and text
that is a plain number such as ``-3.5``) stay numbers.

References
----------
OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

__all__ = ["FORMULA_START", "csv_text", "is_risky", "neutralise", "safe_frame", "write_csv"]

# The characters a spreadsheet reads as the start of a formula (OWASP).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def is_risky(text: str) -> bool:
    """Whether a spreadsheet could run ``text`` as a formula (starts with a formula character, not a plain number).

    >>> [is_risky(s) for s in ("=1+1", "@SUM(1)", "-3.5", "-2+3", "Camden", "\\tx")]
    [True, True, False, True, False, True]
    """
    return text.startswith(FORMULA_START) and _PLAIN_NUMBER.fullmatch(text) is None


def neutralise(value):
    """``value`` with a leading ``'`` if it is text a spreadsheet would run as a formula; anything else unchanged.

    >>> neutralise("=HYPERLINK(\\"http://x\\")"), neutralise("Camden"), neutralise(-1.5)
    ('\\'=HYPERLINK("http://x")', 'Camden', -1.5)
    """
    if isinstance(value, str) and is_risky(value):
        return "'" + value
    return value


def safe_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells and column names are neutralised (numeric columns are left as they are)."""
    out = df.copy()
    for col in out.columns:
        s = out[col]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_datetime64_any_dtype(s) or pd.api.types.is_bool_dtype(s):
            continue
        if isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype(object)
        vals = s.to_numpy(dtype=object)
        risky = np.fromiter((isinstance(v, str) and is_risky(v) for v in vals), dtype=bool, count=len(vals))
        if risky.any():
            vals = vals.copy()
            vals[risky] = ["'" + v for v in vals[risky]]
            out[col] = pd.Series(vals, index=out.index, dtype=object)
    out.columns = [neutralise(c) if isinstance(c, str) else c for c in out.columns]
    return out


def _has_lone_cr(df: pd.DataFrame) -> bool:
    for col in df.columns:
        s = df[col]
        if s.dtype == object and s.map(lambda v: isinstance(v, str) and "\r" in v).any():
            return True
    return False


def write_csv(df: pd.DataFrame, target: str | Path | IO[str], *, first_line: str | None = None, **kwargs) -> None:
    """Write ``df`` as CSV (no index) with every cell neutralised; ``first_line`` (e.g. a "do not share" notice) is
    written before the header as a ``#`` comment line (``pd.read_csv(..., comment="#")`` skips it)."""
    kwargs.setdefault("index", False)
    safe = safe_frame(df)
    if _has_lone_cr(safe):
        # pandas quotes a cell holding "\n" but not one holding a lone "\r", which other readers take for a line
        # end: then every text cell is quoted
        kwargs.setdefault("quoting", csv.QUOTE_NONNUMERIC)
    if first_line is None:
        safe.to_csv(target, **kwargs)
        return
    line = "# " + " ".join(first_line.split()) + "\n"
    if isinstance(target, (str, Path)):
        comp = kwargs.pop("compression", "infer")
        buf = io.StringIO()
        buf.write(line)
        safe.to_csv(buf, **kwargs)
        text = buf.getvalue()
        if comp == "gzip" or (comp == "infer" and str(target).endswith(".gz")):
            Path(target).write_bytes(gzip.compress(text.encode("utf-8")))
        else:
            Path(target).write_text(text, encoding="utf-8")
    else:
        target.write(line)
        safe.to_csv(target, **kwargs)


def csv_text(df: pd.DataFrame, *, first_line: str | None = None) -> str:
    """:func:`write_csv` into a string (the app's downloads)."""
    buf = io.StringIO()
    write_csv(df, buf, first_line=first_line)
    return buf.getvalue()
