"""Numbers in words, for readers who are not statisticians (pure presentation, no streamlit)."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np

from odcore.numbers import number_text, percent_text  # the guarantee sheet writes numbers the same way
from odcore.paths import REPO_ROOT
from odcore.privacy.release import release_probability


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


NBSP = "\u00a0"
USUAL_RANGE = f"(0.01{NBSP}to{NBSP}7)"
"""The literature's range of ε, one unit on a line (no-break spaces: "(0.01 to" never ends a line without "7)")."""


def epsilon_words(epsilon: float) -> str:
    """Where an ε sits on the scale used in the literature ("as little as 0.01 to as much as 7", Houssiau et al.).

    >>> print(epsilon_words(0.66).replace(NBSP, " "))
    within the usual range (0.01 to 7)
    >>> print(epsilon_words(46.2).replace(NBSP, " "))
    far outside the usual range (0.01 to 7): little formal protection
    """
    if not math.isfinite(epsilon):
        return "no formal protection"
    if epsilon <= 1:
        return f"within the usual range {USUAL_RANGE}"
    if epsilon <= 7:
        return f"at the weak end of the usual range {USUAL_RANGE}"
    if epsilon <= 20:
        return f"outside the usual range {USUAL_RANGE}: weak protection"
    return f"far outside the usual range {USUAL_RANGE}: little formal protection"


def pct(p: float, digits: int = 1) -> str:
    """``0.7054 -> '70.5 %'``; never rounds a value below 1 up to 100 % (:func:`odcore.numbers.percent_text`,
    which the guarantee sheet uses too).

    >>> pct(0.7054), pct(0.99952)
    ('70.5 %', '99.95 %')
    """
    return percent_text(p, digits)


# Characters that start Markdown, HTML, maths or a Streamlit directive (commas, semicolons, slashes, quotes and
# question marks stay as they are: the zero-width breaks below keep "://" from being linked).
_MD_SPECIAL = re.compile(r"[\\`*_{}\[\]()#+\-.!|<>~$:@&^=%]")


def plain(text) -> str:
    """``text`` (a name from the data: a file, a zone, a user id) for Streamlit's Markdown, so it shows as the
    characters it is, never as a link, an image, a colour directive, maths or HTML: every character that could start
    one becomes a numeric character reference (``&#58;`` for ``:``), and a zero-width space follows every ``:`` and
    ``@`` and precedes every ``.``: the autolinks (``http://…``, ``www.…``, ``a@b.c``) and Streamlit's
    ``:colour[…]`` directives are found in the text after those references are decoded, and a backslash escape does
    not stop them either. Line breaks become spaces.

    >>> plain("![b](http://x/b.png)")
    '&#33;&#91;b&#93;&#40;http&#58;&#8203;//x/b&#8203;&#46;png&#41;'
    """
    def ref(m: re.Match) -> str:
        c = m.group(0)
        return {":": "&#58;&#8203;", "@": "&#64;&#8203;", ".": "&#8203;&#46;"}.get(c, f"&#{ord(c)};")

    return _MD_SPECIAL.sub(ref, " ".join(str(text).splitlines()))


def chart_text(text) -> str:
    """``text`` (a name from the data) for a Plotly figure's titles, tick labels, annotations and hover labels, which
    Plotly draws as a small HTML (``<a href>``, ``<b>``, ``<br>``, ``<span style>``): ``&``, ``<`` and ``>`` become
    character references, which Plotly shows as the characters. Line breaks become spaces.

    >>> chart_text('<a href="http://x/">z</a> & co')
    '&lt;a href="http://x/"&gt;z&lt;/a&gt; &amp; co'
    """
    return html.escape(" ".join(str(text).splitlines()), quote=False)


def num(x: float) -> str:
    """Compact human number: thousands separators for integers, 3 significant digits otherwise.

    >>> num(46333)
    '46,333'
    >>> num(0.6612)
    '0.661'
    >>> num(2402.4)
    '2,402.4'
    """
    return number_text(x)


def sci(x: float, spec: str = ".1e") -> str:
    """``x`` formatted by ``spec`` with a true minus sign in its exponent: a browser breaks a line after the hyphen of
    "4.7e-07" (read "4.7e-" then "07"), never inside "4.7e−07".

    >>> sci(4.7e-07), sci(0.5, ".2g"), sci(1e-6, ".0e")
    ('4.7e−07', '0.5', '1e−06')
    """
    return format(x, spec).replace("e-", "e\u2212")


def coord(lat: float, lon: float, digits: int = 4) -> str:
    """A point as degrees with hemispheres (4 decimals ≈ 11 m).

    >>> coord(37.77493, -122.41942)
    '37.7749° N, 122.4194° W'
    """
    if lat is None or lon is None or lat != lat or lon != lon:
        return "–"
    return f"{abs(lat):.{digits}f}° {'N' if lat >= 0 else 'S'}, {abs(lon):.{digits}f}° {'E' if lon >= 0 else 'W'}"


def empty_release_advice(true_counts, threshold: float, epsilon: float, sensitivity: float = 1.0) -> str:
    """Why a week's release publishes nothing, and what to change (markdown).

    >>> print(empty_release_advice([3, 32, 5], 100, 0.66))  # doctest: +ELLIPSIS
    **Nothing is published this week.** The busiest pair has 32 people, and a pair is published only if its noisy count reaches 100: ...
    """
    tc = np.asarray(true_counts, dtype=float)
    if not len(tc):
        return ("**No trips this week**, so there is nothing to release. Pick another week in the sidebar, or load "
                "data with more people or a longer time span.")
    top = float(tc.max())
    p = float(release_probability(top, epsilon, threshold, sensitivity))
    return (f"**Nothing is published this week.** The busiest pair has {num(int(top))} people, and a pair is "
            f"published only if its noisy count reaches {num(threshold)}: the chance for that pair is {p:.2g}. "
            f"To see flows: lower the threshold towards {num(int(top))} (above the curves), use larger grid cells (more "
            "people per pair), pick a busier week, load data with more people, or switch the map to "
            "**Raw counts** to see what was there before suppression.")


def single_case_note(users: int, weeks: int) -> str | None:
    """A note when the data are degenerate for a page (one user or one week), else None."""
    if users <= 1:
        return ("Only **one person** is in the data: every count is 0 or 1, so nothing can reach a threshold of "
                "several people and every published number would be about that one person. Load data with more "
                "people (or synthesise a city) to see the release work.")
    if weeks <= 1:
        return ("The data cover **one week**: the week player and anything over several weeks show that single "
                "week only.")
    return None


# ---- the two units of protection, in one place ------------------------------------------------------------------

UNIT_WORDS = {"per_metric": "per count", "user_level": "per person and week"}
"""How the guarantee unit is said everywhere (labels, headlines, chart titles, exports)."""

UNIT_COVERS = {
    "per_metric": "one trip of one person in one week (did this person go from A to B?)",
    "user_level": "everything one person does in a week (is this person in the data at all?)",
}


def unit_words(mode: str) -> str:
    """``'per count'`` or ``'per person and week'``.

    >>> unit_words("user_level")
    'per person and week'
    """
    return UNIT_WORDS[mode]


def epsilon_label(mode: str) -> str:
    """Label of the ε setting in the sidebar.

    >>> epsilon_label("per_metric")
    'ε (privacy parameter per count)'
    """
    return f"ε (privacy parameter {UNIT_WORDS[mode]})"


def short_path(path) -> str:
    """A data file as a reader needs it: relative to the repository (or ``../shared``), else its name only;
    never the machine's absolute path.

    >>> from odcore.paths import REPO_ROOT
    >>> short_path(REPO_ROOT / "sample_data" / "synthetic_city.parquet")
    'sample_data/synthetic_city.parquet'
    >>> short_path("/home/someone/private/trips.csv")
    'trips.csv'
    >>> short_path("Bundled synthetic city")
    'Bundled synthetic city'
    """
    text = str(path)
    p = Path(text)
    if not p.is_absolute():
        return text
    for root, prefix in ((REPO_ROOT, ""), (REPO_ROOT.parent, "../")):
        try:
            return prefix + p.relative_to(root).as_posix()
        except ValueError:
            continue
    return p.name


def comparison_label(text: str) -> str:
    """A row, label or curve of the per-count release shown beside the per-person one: named as the comparison.

    >>> comparison_label("one count (per metric)")
    'comparison, per count: one count (per metric)'
    """
    return f"comparison, {UNIT_WORDS['per_metric']}: {text}"


def bound_label(mode: str) -> str:
    """The label of e^ε/(1+e^ε), the most an ε-DP release lets an attacker be right, in the unit's words.

    >>> bound_label("per_metric"), bound_label("user_level")
    ('Bound promised (one trip)', "Bound promised (a person's whole week)")
    """
    return "Bound promised (one trip)" if mode == "per_metric" else "Bound promised (a person's whole week)"


AREAS_WORD = "areas"
"""Knock Knock's regions of interest, said one way on every page: the grid's areas, not counting the "elsewhere"
slot of points outside the grid."""
