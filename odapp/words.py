"""Numbers in words, for readers who are not statisticians (pure presentation, no streamlit)."""

from __future__ import annotations

import math


def probability_words(p: float) -> str:
    """Plain-language reading of an attacker's success probability or posterior (0..1).

    >>> probability_words(0.5)
    'a coin flip'
    >>> probability_words(0.954)
    'very likely right'
    >>> probability_words(0.9999)
    'near-certain'
    """
    if p is None or not math.isfinite(p):
        return "undefined"
    if p >= 0.99:
        return "near-certain"
    if p >= 0.9:
        return "very likely right"
    if p >= 0.7:
        return "more often right than wrong"
    if p > 0.55:
        return "somewhat better than a coin flip"
    if p >= 0.45:
        return "a coin flip"
    if p >= 0.1:
        return "unlikely"
    return "very unlikely"


def epsilon_words(epsilon: float) -> str:
    """Where an ε sits on the scale used in the literature ("as little as 0.01 to as much as 7", Houssiau et al.).

    >>> epsilon_words(0.66)
    'within the usual range (0.01 to 7)'
    >>> epsilon_words(46.2)
    'far outside the usual range (0.01 to 7): little formal protection'
    """
    if not math.isfinite(epsilon):
        return "no formal protection"
    if epsilon <= 1:
        return "within the usual range (0.01 to 7)"
    if epsilon <= 7:
        return "at the weak end of the usual range (0.01 to 7)"
    if epsilon <= 20:
        return "outside the usual range (0.01 to 7): weak protection"
    return "far outside the usual range (0.01 to 7): little formal protection"


def pct(p: float, digits: int = 1) -> str:
    """``0.7054 -> '70.5 %'``.

    >>> pct(0.7054)
    '70.5 %'
    """
    return f"{100 * p:.{digits}f} %"


def num(x: float) -> str:
    """Compact human number: thousands separators for integers, 3 significant digits otherwise.

    >>> num(46333)
    '46,333'
    >>> num(0.6612)
    '0.661'
    >>> num(2402.4)
    '2,402.4'
    """
    if x is None:
        return "–"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    if abs(x) >= 1000:
        return f"{x:,.1f}"
    if abs(x) < 1e-3 and x != 0:
        return f"{x:.2e}"
    return f"{x:.3g}"
