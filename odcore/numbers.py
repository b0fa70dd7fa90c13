"""How every number a person reads is written: one function for counts and parameters, one for chances.

Pages, cards, the guarantee sheets, the designer, the audit and the command line's text all write numbers through
these two functions, so the same value reads the same everywhere.
"""

from __future__ import annotations

import math

__all__ = ["MAX_EXTRA_DIGITS", "expected_count_text", "number_text", "percent_text"]

MAX_EXTRA_DIGITS = 3
"""Decimals :func:`percent_text` may add to tell a chance below 1 from 100 % (or above 0 from 0 %); beyond that it
writes "> 99.9999 %" rather than a dozen decimals."""


def number_text(x) -> str:
    """Compact human number (a parameter such as ε or δ, or a count): thousands separators for whole numbers, one
    decimal from 1,000, three significant digits in scientific notation below 0.001, else 3 significant digits;
    "–" for none. An expected number of things is written by :func:`expected_count_text`.

    >>> number_text(46333), number_text(0.6612), number_text(2402.4), number_text(1e-6), number_text(None)
    ('46,333', '0.661', '2,402.4', '1.00e-06', '–')
    """
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, bool):
        x = int(x)
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    if abs(x) >= 1000:
        return f"{x:,.1f}"
    if abs(x) < 1e-3 and x != 0:
        return f"{x:.2e}"
    return f"{x:.3g}"


def percent_text(p, digits: int = 1) -> str:
    """A probability as a percentage with ``digits`` decimals; up to :data:`MAX_EXTRA_DIGITS` more where ``digits``
    would round a value below 1 up to 100 % (or one above 0 down to 0 %), and beyond that "> 99.9999 %"
    ("< 0.0001 %"): never "100 %" for a chance below 1, never a dozen decimals.

    >>> percent_text(0.7054), percent_text(0.99952), percent_text(0.9999996), percent_text(1.0)
    ('70.5 %', '99.95 %', '> 99.9999 %', '100.0 %')
    >>> percent_text(1 - 1e-15), percent_text(3e-9), percent_text(0.0)
    ('> 99.9999 %', '< 0.0001 %', '0.0 %')
    """
    if p is None or not math.isfinite(p):
        return "–"
    p = float(p)
    d = digits
    while (p < 1 and round(100 * p, d) >= 100) or (p > 0 and round(100 * p, d) <= 0):
        if d >= digits + MAX_EXTRA_DIGITS:
            edge = 10.0 ** -d
            return f"> {100 - edge:.{d}f} %" if p > 0.5 else f"< {edge:.{d}f} %"
        d += 1
    return f"{100 * p:.{d}f} %"


def expected_count_text(x) -> str:
    """An expected number of things (pairs, people) as a reader counts them: one decimal, thousands separators, and
    "< 0.1" for a positive expectation that one decimal would write as 0 (never ``7.3e-06`` pairs).

    >>> expected_count_text(11.54), expected_count_text(7.3e-06), expected_count_text(0.0), expected_count_text(2402.44)
    ('11.5', '< 0.1', '0', '2,402.4')
    """
    if x is None or not math.isfinite(float(x)):
        return "–"
    x = float(x)
    if x == 0:
        return "0"
    if 0 < x < 0.05:
        return "< 0.1"
    return f"{x:,.1f}"
