"""The configuration behind a chart as JSON that ``python -m odcore <command> --config FILE.json`` accepts.

Keys are the command's flag names in snake_case (``--max-pairs`` -> ``max_pairs``); the CLI rejects unknown keys
and ignores the informative ``dataset`` key. Loader keys (``input``, ``format``, ``tz``, ``time_offset``, ``bbox``)
make the CLI read the same traces the same way as the app (the app never clips with a bounding box).
"""

from __future__ import annotations

import shlex

from odapp.data.loading import Loaded
from odapp.data.zones_ui import export_spec
from odapp.shared.state import Settings


def _dataset(s: Settings, loaded: Loaded) -> dict:
    """Informative ``dataset`` key (ignored by the CLI); ``make`` recreates a synthesised city's input file."""
    d = {"label": s.dataset.label, "id": s.dataset.id}
    if "_make" in loaded.cli:
        d["make"] = loaded.cli["_make"]
    return d


def loader_keys(loaded: Loaded) -> dict:
    """``input``, ``format``, ``tz``, ``time_offset``, ``bbox`` (keys starting with ``_`` are not flags)."""
    return {k: v for k, v in loaded.cli.items() if not k.startswith("_")}


def zone_keys(s: Settings) -> dict:
    """``cell_km2`` for square cells, ``zones`` (an H3 spec or the zone file's path) otherwise."""
    if s.zones is None:
        return {"cell_km2": s.cell_km2}
    return {"zones": export_spec(s.zones)}


def release_config(s: Settings, loaded: Loaded) -> dict:
    """``python -m odcore release --config FILE.json --out DIR``."""
    cfg = {**loader_keys(loaded), **zone_keys(s), "epsilon": s.epsilon, "threshold": s.threshold,
           "mode": s.mode, "week": s.week, "seed": s.seed, "dataset": _dataset(s, loaded)}
    if s.mode == "user_level":
        cfg["max_pairs"] = s.max_pairs
    return cfg


def budget_config(s: Settings, *, trips: int, weeks: int, delta: float, total_interval: float = 1e-3) -> dict:
    """``python -m odcore budget --config FILE.json``."""
    cfg = {"epsilon": s.epsilon, "threshold": s.threshold, "trips": int(trips), "weeks": int(weeks),
           "delta": float(delta), "mode": s.mode, "total_interval": float(total_interval)}
    if s.mode == "user_level":
        cfg["max_pairs"] = s.max_pairs
    return cfg


def attack_curve_config(s: Settings, *, k_max: int, prior: float, monte_carlo: int | None) -> dict:
    """``python -m odcore attack-curve`` flags."""
    cfg = {"epsilon": s.epsilon, "k_max": int(k_max), "prior": float(prior), "mode": s.mode}
    if s.mode == "user_level":
        cfg["max_pairs"] = s.max_pairs
    if monte_carlo:
        cfg.update({"monte_carlo": int(monte_carlo), "seed": s.seed})
    return cfg


def user_risk_config(s: Settings, loaded: Loaded, *, user: str | None = None) -> dict:
    """``python -m odcore user-risk`` flags (the app's population view uses resolution 16 without
    extrapolation, the CLI's ``--fast``)."""
    cfg = {**loader_keys(loaded), **zone_keys(s), "epsilon": s.epsilon, "threshold": s.threshold,
           "mode": s.mode, "week": s.week, "seed": s.seed, "fast": True, "dataset": _dataset(s, loaded)}
    if s.mode == "user_level":
        cfg["max_pairs"] = s.max_pairs
    if user is not None:
        cfg["user"] = user
    return cfg


def knock_config(k, s: Settings, loaded: Loaded) -> dict:
    """``python -m odcore knock`` flags of a :class:`odcore.knock.KnockConfig`."""
    cfg = {**loader_keys(loaded), "prior": k.prior.value, "m": k.m, "alpha": k.alpha, "targets": k.targets,
           "classifiers": ",".join(c.value for c in k.classifiers), "selection": k.selection.value,
           "n_train": k.n_train, "n_test": k.n_test, "seed": k.seed, "dataset": _dataset(s, loaded)}
    if k.defence is not None:
        cfg.update({"defence": k.defence.value, "epsilon": k.epsilon, "delta": k.delta, "kappa": k.kappa,
                    "clip": k.clip.value, "train_on_noisy": bool(k.train_on_noisy)})
    return cfg


def design_config(s: Settings, loaded: Loaded, goal, *, max_pairs: int | None, tune: bool = False) -> dict:
    """``python -m odcore design`` flags of a :class:`odcore.privacy.design.Goal` on the loaded week."""
    cfg = {**loader_keys(loaded), "cell_km2": s.cell_km2, "week": s.week, "seed": s.seed, "goal": goal.kind.value,
           "target_delta": goal.delta, "weeks": goal.weeks, "dataset": _dataset(s, loaded)}
    if tune and max_pairs is None:
        cfg["tune"] = True
    if goal.kind.value == "attack":
        cfg.update({"known_trips": goal.known_trips, "success": goal.success})
    elif goal.kind.value in ("tpr", "advantage", "posterior"):
        cfg.update({goal.kind.value: goal.risk, "fpr": goal.fpr, "prior": goal.prior, "attacker": goal.attacker})
        if goal.attacker == "known":
            cfg["known_trips"] = goal.known_trips
    else:
        cfg["target_epsilon"] = goal.epsilon
    if max_pairs is not None:
        cfg["max_pairs"] = int(max_pairs)
    return cfg


def command_line(command: str, config: dict) -> str:
    """The same settings as explicit flags: ``python -m odcore <command> --flag value ...`` (preceded by the
    ``synth`` command that recreates a synthesised city, from ``config["dataset"]["make"]``)."""
    make = (config.get("dataset") or {}).get("make")
    parts = [make, "&&"] if make else []
    parts += ["python -m odcore", command]
    for k, v in config.items():
        if k == "dataset" or v is None or v is False:
            continue
        flag = "--" + k.replace("_", "-")
        if isinstance(v, (list, tuple)):
            parts.append(" ".join([flag, *(shlex.quote(str(x)) for x in v)]))
        else:
            parts.append(flag if v is True else f"{flag} {shlex.quote(str(v))}")
    if command == "release":
        parts.append("--out release_out")
    return " ".join(parts)


COMMANDS = {
    "release": "python -m odcore release --config {file} --out release_out/",
    "budget": "python -m odcore budget --config {file}",
    "attack-curve": "python -m odcore attack-curve --config {file} --json",
    "user-risk": "python -m odcore user-risk --config {file} --json",
    "knock": "python -m odcore knock --config {file} --json",
    "design": "python -m odcore design --config {file} --json",
    "zones-compare": "python -m odcore zones-compare --config {file}",
}
"""Every subcommand reads the exported JSON with ``--config`` (flags given on the command line win)."""
