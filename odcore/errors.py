"""One exception family for domain failures.

Pages catch :class:`ODCoreError` and show ``st.error``; the CLI prints the message and exits 2.
"""

from __future__ import annotations

import math


class ODCoreError(Exception):
    """Base class of every error the engine raises on purpose."""


class ParameterError(ODCoreError, ValueError):
    """A parameter is out of range; the message names the parameter, its value and what is expected."""


class MissingBrowserError(ODCoreError, RuntimeError):
    """PNG/SVG/PDF export needs a local Chrome or Chromium (kaleido draws with it) and none was found."""


class ImageExportError(ODCoreError, RuntimeError):
    """The Chrome/Chromium that draws PNG/SVG/PDF images did not start, stopped, or gave no image in time."""


class AggregatesOnlyError(ODCoreError, LookupError):
    """A per-person table was asked of OD data that holds aggregates only (the Spark engine's user-level path brings
    no per-person table to the driver); the message names what to use or do instead."""


class TraceFormatError(ODCoreError, ValueError):
    """An input file cannot be read as traces.

    Parameters
    ----------
    message:
        What is wrong and what is expected.
    file, row, column:
        Where it is wrong, when known. ``row`` is 1-based as a person counts lines of the file
        (header excluded for files with a header).
    """

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 column: str | None = None) -> None:
        self.file = file
        self.row = row
        self.column = column
        where = []
        if file is not None:
            where.append(f"file {file!s}")
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Return ``float(value)`` or raise :class:`ParameterError` naming ``name``.

    >>> check_positive("epsilon", 0.66)
    0.66
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number, got {name}={value!r}.") from None
    if v != v:  # NaN
        raise ParameterError(f"{name} must be a number, got {name}=nan.")
    if v == float("inf"):
        raise ParameterError(f"{name} must be finite, got {name}=inf.")
    if (v < 0) if allow_zero else (v <= 0):
        bound = ">= 0" if allow_zero else "> 0"
        raise ParameterError(f"{name} must be {bound}, got {name}={value!r}.")
    return v


def check_int(name: str, value, *, minimum: int = 0) -> int:
    """Return ``int(value)`` when it is a whole number >= ``minimum``, else raise :class:`ParameterError` naming it.

    Booleans are refused; ``3.0`` is accepted as 3.

    >>> check_int("max_pairs", 10.0, minimum=1)
    10
    >>> check_int("k_max", -1)
    Traceback (most recent call last):
    ...
    odcore.errors.ParameterError: k_max must be an integer >= 0, got k_max=-1.
    """
    msg = f"{name} must be an integer >= {minimum}, got {name}={value!r}."
    if isinstance(value, bool):
        raise ParameterError(msg)
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ParameterError(msg) from None
    if not (f == f and abs(f) != float("inf")) or f < minimum or f != int(f):
        raise ParameterError(msg)
    return int(f)


def coerce_enum(obj: object, name: str, enum: type) -> None:
    """Replace the frozen dataclass field ``obj.<name>`` by ``enum(value)``, or raise :class:`ParameterError`
    naming the field, the value and the choices (for ``__post_init__`` of configs whose choices are str enums).

    >>> from dataclasses import dataclass
    >>> from enum import StrEnum
    >>> class Colour(StrEnum):
    ...     RED = "red"
    >>> @dataclass(frozen=True)
    ... class C:
    ...     colour: str = "red"
    ...     def __post_init__(self):
    ...         coerce_enum(self, "colour", Colour)
    >>> C().colour is Colour.RED
    True
    >>> C("blue")
    Traceback (most recent call last):
    ...
    odcore.errors.ParameterError: colour must be one of ['red'], got colour='blue'.
    """
    value = getattr(obj, name)
    try:
        object.__setattr__(obj, name, enum(value))
    except ValueError:
        raise ParameterError(f"{name} must be one of {[e.value for e in enum]}, got {name}={value!r}.") from None


def check_prob(name: str, value, *, open_low: bool = True) -> float:
    """Return ``float(value)`` when it is a probability in (0, 1) (``[0, 1)`` with ``open_low=False``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a probability in (0, 1), got {name}={value!r}.") from None
    if not (0 < v < 1) if open_low else not (0 <= v < 1):
        bound = "(0, 1)" if open_low else "[0, 1)"
        raise ParameterError(f"{name} must be in {bound}, got {name}={value!r}.")
    return v


def check_threshold(threshold) -> float:
    """Return the threshold τ as a float when it is a finite count >= 1."""
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        raise ParameterError(f"threshold must be a number >= 1, got threshold={threshold!r}.") from None
    if not math.isfinite(t) or t < 1:
        raise ParameterError(f"threshold must be a finite number >= 1 (a count of users), got threshold={threshold!r}.")
    return t


def check_max_pairs(max_pairs) -> int:
    """Return the per-person pair cap m as an int >= 1."""
    return check_int("max_pairs", max_pairs, minimum=1)
