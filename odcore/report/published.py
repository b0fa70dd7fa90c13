"""The published boundary: every file of a release that may leave the data holder is built here, from the published
table and the publisher's settings only.

What may be shared (:data:`PUBLISHED_FILES`): the published pairs (``published.csv``/``.parquet``: noisy counts of
the pairs that reached the threshold), their zones (``zones.geojson``), the public record and guarantee
(``release.json``, :func:`release_document`) and the public guarantee sheet (``guarantee_sheet.html``,
:func:`public_sheet`). None of them reads the data: a statistic the sheet needs (a typical person's unique trips a
week) is the publisher's stated assumption (:data:`TRIPS_ASSUMPTION_WORDS`), not the data's median; the number of
people, rows and the data's fingerprint are not published at all. Post-processing of the published table cannot
weaken the guarantee it carries (Dwork & Roth 2014, Prop. 2.1), so these files keep it.

What stays with the data holder (:data:`PRIVATE_RECORD`, :data:`PRIVATE_SHEET`, written only on request and named
do-not-share): the data's label and path, its content fingerprint, rows and people, the data's own median and
busiest person's trips, the number of observed and suppressed pairs (:func:`private_record`).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pandas as pd

from odcore.constants import PRIVATE_RECORD, PRIVATE_SHEET, PUBLISHED_FILES, PUBLISHED_KIND
from odcore.errors import ParameterError
from odcore.od.odtable import sha256_file
from odcore.privacy.accounting import BudgetConfig, budget, delta_parts
from odcore.report.plain_json import jsonable
from odcore.report.safe_csv import write_csv
from odcore.report.sheet import SEED_WORDS, budget_sheet, software_version
from odcore.space.zones import write_zone_geometry

__all__ = [
    "DO_NOT_SHARE_NOTICE",
    "PRIVATE_RECORD",
    "PRIVATE_SETTINGS",
    "PRIVATE_SHEET",
    "PUBLISHED_FILES",
    "PUBLISHED_KIND",
    "RELEASE_DEFAULTS",
    "TRIPS_ASSUMPTION_WORDS",
    "check_release",
    "document_text",
    "guarantee_part",
    "private_record",
    "private_sheet",
    "public_record",
    "public_settings",
    "public_sheet",
    "published_hashes",
    "published_weeks",
    "release_document",
    "settings_guarantee",
    "write_published",
]

PRIVATE_KIND = "odcore-private-record-do-not-share"
DO_NOT_SHARE_NOTICE = ("DO NOT SHARE: the data holder's record of this release. It holds exact figures of the data "
                       "(people, rows, content fingerprint, the data's own typical and busiest person, suppressed "
                       "pairs) that the published files leave out because they are not protected by the release's "
                       "guarantee. Share only the published folder.")

# Settings that say where the data and outputs are on this machine or hold the noise's secret: never published.
PRIVATE_SETTINGS = frozenset({"input", "dataset", "seed", "out", "analysis_out", "map", "map_top", "map_size",
                              "map_dpi", "config", "json", "counts_out", "zones_label"})

# The guarantee's publisher-side settings when a release is made without them (the app's published view): the
# command line's release defaults (--delta, --weeks, --trips), so the app's release.json reads as the command's.
RELEASE_DEFAULTS = {"delta": 1e-6, "weeks": 52, "trips": 70}

TRIPS_ASSUMPTION_WORDS = ("the publisher's assumption of a person's unique trips in a week (the trips setting), not "
                          "read from the data: the data's own median or busiest person would be an unprotected "
                          "statistic of it")


def public_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings a published file may name: all but :data:`PRIVATE_SETTINGS` and unset ones, in sorted order
    (the same settings give the same bytes whatever order they were given in)."""
    return {k: settings[k] for k in sorted(settings) if k not in PRIVATE_SETTINGS and settings[k] is not None}


def published_weeks(published: pd.DataFrame) -> list[dict[str, Any]]:
    """``[{"week", "start"}]`` of the weeks that carry a published pair (read from the published table)."""
    if not len(published):
        return []
    cols = ["week", "week_start"] if "week_start" in published.columns else ["week"]
    w = published[cols].drop_duplicates("week").sort_values("week")
    return [{"week": int(r[0]), "start": (str(r[1]) if len(r) > 1 else None)} for r in w.itertuples(index=False)]


def public_record(*, weeks: list[dict[str, Any]], zones: str, settings: dict[str, Any], trips: int | None,
                  written: str | None = None) -> dict[str, Any]:
    """The record a published file carries: which release it is (weeks published, zone system, public settings,
    software, time written) and the publisher's assumption of a person's trips. No figure of the data.

    ``weeks``: :func:`published_weeks` of the published table (or the week a page shows); ``zones``: the zone
    system's spec; ``settings``: the release's settings (:func:`public_settings` keeps the public ones)."""
    return {
        "dataset": "not named here: the data's label, size and fingerprint are in the data holder's private record",
        "weeks_published": list(weeks),
        "zones": str(zones),
        "settings": public_settings(settings),
        "assumptions": {} if trips is None else {"trips": int(trips), "trips_means": TRIPS_ASSUMPTION_WORDS},
        "seed": SEED_WORDS,
        "software": software_version(),
        "written": written or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def private_record(*, dataset: str | None, fingerprint: str | None, rows: int | None, users: int | None,
                   week_starts, weeks_with_trips, zones: str, settings: dict[str, Any],
                   unique_trips: dict[str, Any] | None = None, pairs_observed: int | None = None,
                   pairs_published: int | None = None) -> dict[str, Any]:
    """The data holder's record of a release (:data:`PRIVATE_RECORD`, do not share): the data's label or path, its
    content fingerprint, rows, people, weeks with trips, its own unique trips per person-week (median, busiest),
    observed and suppressed pairs, every setting but the seed."""
    starts = [str(w) for w in week_starts]
    cov = sorted(int(w) for w in weeks_with_trips)
    out = {
        "kind": PRIVATE_KIND,
        "notice": DO_NOT_SHARE_NOTICE,
        "dataset": None if dataset is None else str(dataset),
        "fingerprint": None if fingerprint is None else f"sha256:{fingerprint}",
        "rows": rows, "users": users,
        "weeks_covered": [{"week": w, "start": starts[w] if w < len(starts) else None} for w in cov],
        "zones": str(zones),
        "settings": {k: v for k, v in sorted(settings.items()) if k != "seed" and v is not None},
        "seed": SEED_WORDS,
        "software": software_version(),
        "written": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if unique_trips is not None:
        out["unique_trips_per_person_week"] = dict(unique_trips)
    if pairs_observed is not None:
        out["pairs"] = {"observed": int(pairs_observed), "published": pairs_published,
                        "suppressed": None if pairs_published is None else int(pairs_observed) - int(pairs_published)}
    return out


def guarantee_part(*, user_level: bool, delta_parts: dict[str, Any], budget: dict[str, Any]) -> dict[str, Any]:
    """The guarantee a release states (release.json's ``guarantee``): the unit, the δ split and, per person, the
    tight (ε, δ) per week and in total of ``budget`` (:func:`odcore.privacy.accounting.budget` at the assumed
    trips); per count, the (ε, δ) of a person of the assumed trips."""
    out = {"unit": "one person, all of their trips" if user_level else
           "one trip count (one person's presence in one pair in one week)", **delta_parts}
    if user_level:
        out.update({"epsilon_person_week": budget["epsilon_user_week_bounded_tight"],
                    "epsilon_person_total": budget["epsilon_user_total_bounded_tight"],
                    "delta_person_week": budget["delta_user_week_bounded_tight"],
                    "delta_person_total": budget["delta_user_total_bounded_tight"]})
    else:
        out.update({"trips_assumed": budget["trips"],
                    "epsilon_person_week": budget["epsilon_user_week_tight"],
                    "epsilon_person_total": budget["epsilon_user_total_tight"],
                    "delta_person_week": budget["delta_user_week_tight"],
                    "delta_person_total": budget["delta_user_total_tight"]})
    return out


def settings_guarantee(*, epsilon: float, threshold: float, mode: str, max_pairs: int | None,
                       delta: float = RELEASE_DEFAULTS["delta"], weeks: int = RELEASE_DEFAULTS["weeks"],
                       trips: int = RELEASE_DEFAULTS["trips"]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(delta_parts, budget)`` of a release's settings alone (the threshold as given): the δ split
    (:func:`odcore.privacy.accounting.delta_parts`) and the budget at the assumed ``trips``
    (:func:`odcore.privacy.accounting.budget`, δ = the Laplace part), for :func:`guarantee_part` and
    :func:`public_sheet`. Nothing here reads data."""
    user = mode == "user_level"
    parts = delta_parts(epsilon, delta, weeks, max_pairs=max_pairs if user else None, threshold=threshold,
                        trips=trips)
    b = budget(BudgetConfig(epsilon=epsilon, threshold=threshold, trips=trips, weeks=weeks,
                            max_pairs=max_pairs if user else None, delta=parts.laplace))
    return jsonable(parts.to_dict()), jsonable(b)


def release_document(published: pd.DataFrame, *, record: dict[str, Any], release: dict[str, Any],
                     guarantee: dict[str, Any]) -> dict[str, Any]:
    """``release.json``: what the published files are, the public record (:func:`public_record`), the release's
    settings (``release``: epsilon, threshold, mode, max_pairs, noise_scale) and its guarantee
    (:func:`guarantee_part`). ``pairs_published`` is read from the published table."""
    return {
        "kind": PUBLISHED_KIND,
        "what": "The published pairs of a Laplace + threshold release of weekly origin-destination counts: "
                "published.csv/.parquet hold only pairs whose noisy count reached the threshold, with their noisy "
                "count. Nothing about unpublished pairs, no true counts, no noise, no seed, no figure of the data.",
        "record": record,
        "release": {**release, "pairs_published": len(published)},
        "guarantee": guarantee,
        "columns": [str(c) for c in published.columns],
        "files": list(PUBLISHED_FILES),
    }


def document_text(doc: dict[str, Any]) -> str:
    """A record as JSON text (NaN and infinities as null; the same dict gives the same bytes)."""
    return json.dumps(jsonable(doc), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def public_sheet(budget: dict[str, Any], *, record: dict[str, Any], delta_parts: dict[str, Any] | None) -> str:
    """``guarantee_sheet.html``: :func:`odcore.report.sheet.budget_sheet` with the public record; per count, the
    person it describes has the assumed trips of ``budget["trips"]`` (:data:`TRIPS_ASSUMPTION_WORDS`)."""
    return budget_sheet(budget, record=record, delta_parts=delta_parts,
                        trips_words=f"{TRIPS_ASSUMPTION_WORDS}; busier people are less protected")


def private_sheet(budget: dict[str, Any], *, record: dict[str, Any], delta_parts: dict[str, Any] | None) -> str:
    """:data:`PRIVATE_SHEET`: the guarantee sheet with the data holder's record (people, rows, fingerprint) and,
    per count, the data's own typical person (``budget["trips"]`` is then the data's median); do not share."""
    return budget_sheet(budget, record=record, delta_parts=delta_parts, notice=DO_NOT_SHARE_NOTICE,
                        trips_words="the typical person of the data (its median); busier people are less protected")


def published_hashes(folder: str | Path) -> dict[str, str]:
    """``{file: sha256}`` of the :data:`PUBLISHED_FILES` in ``folder`` (the private record keeps them)."""
    return {f: sha256_file(Path(folder) / f) for f in PUBLISHED_FILES}


def check_release(published: str | Path, analysis: str | Path) -> dict[str, Any]:
    """The data holder's record (:data:`PRIVATE_RECORD` in ``analysis``) when it belongs to the published folder
    ``published``; :class:`~odcore.errors.ParameterError` naming both folders when they are of two runs (a run
    stopped between its two swaps, or a folder replaced by another run)."""
    pub, an = Path(published), Path(analysis)
    try:
        rec = json.loads((an / PRIVATE_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParameterError(f"{an}: no readable {PRIVATE_RECORD} ({exc}).") from None
    want = rec.get("published_sha256") if isinstance(rec, dict) else None
    try:
        have = published_hashes(pub)
    except OSError as exc:
        raise ParameterError(f"{pub}: not a whole published folder ({exc}).") from None
    if want != have:
        raise ParameterError(f"{an} and {pub} are of two different runs of release (the private record names other "
                             "published files): run release again with both --out and --analysis-out.")
    return rec


def write_published(folder: str | Path, published: pd.DataFrame, *, zones, cells, document: dict[str, Any],
                    sheet: str) -> None:
    """Write the :data:`PUBLISHED_FILES` into ``folder`` (a new folder that the caller swaps into place):
    ``published`` as CSV (spreadsheet-safe) and Parquet, the geometry of the zones ``cells`` of ``zones``,
    ``document`` (:func:`release_document`) and ``sheet`` (:func:`public_sheet`)."""
    folder = Path(folder)
    write_csv(published, folder / "published.csv")
    published.to_parquet(folder / "published.parquet", index=False)
    write_zone_geometry(zones, folder / "zones.geojson", cells)
    (folder / "release.json").write_text(document_text(document), encoding="utf-8")
    (folder / "guarantee_sheet.html").write_text(sheet, encoding="utf-8")
