"""The package's metadata agrees with requirements.txt and with the folders it ships."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from odcore.paths import REPO_ROOT


def _names(reqs: list[str]) -> dict[str, str]:
    return {re.split(r"[<>=\[ ]", r, maxsplit=1)[0].lower(): r.replace(" ", "") for r in reqs}


def _pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_dependencies_are_requirements_txt_and_spark_is_an_extra():
    lines = [ln.split("#")[0].strip() for ln in (REPO_ROOT / "requirements.txt").read_text().splitlines()]
    reqs = _names([ln for ln in lines if ln and not ln.startswith("-")])
    proj = _pyproject()["project"]
    assert _names(proj["dependencies"]) == reqs
    assert "pyspark" not in reqs                                   # `make run` does not install Spark
    assert "pyspark" in _names(proj["optional-dependencies"]["spark"])
    dev = (REPO_ROOT / "requirements-dev.txt").read_text()
    assert re.search(r"^pyspark>=", dev, re.M)                     # the tests still compare the Spark engine
    assert proj["scripts"]["odlab"] == "odcore.cli:main"


def test_every_package_folder_is_shipped_with_the_bundled_city():
    st = _pyproject()["tool"]["setuptools"]
    found = sorted(".".join(p.parent.relative_to(REPO_ROOT).parts) for top in ("odcore", "odapp", "odserve")
                   for p in (REPO_ROOT / top).rglob("__init__.py"))
    assert sorted(x for x in st["packages"] if x != "odcore.sample_data") == found
    data = st["package-dir"]["odcore.sample_data"]
    for f in _pyproject()["tool"]["setuptools"]["package-data"]["odcore.sample_data"]:
        assert (REPO_ROOT / data / f).is_file(), f
    assert Path(REPO_ROOT / "sample_data" / "synthetic_city.parquet").stat().st_size > 1_000_000


def test_spark_engine_without_pyspark_says_how_to_install_it(monkeypatch):
    import importlib.util

    import pandas as pd
    import pytest

    from odcore.errors import ParameterError
    from odcore.od.engines import build_od

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a))
    df = pd.DataFrame({"user": [1, 1], "time": pd.to_datetime([0, 3600], unit="s", utc=True), "lat": [0.0, 0.1],
                       "lon": [0.0, 0.1]})
    with pytest.raises(ParameterError, match=r"odlab\[spark\]"):
        build_od(df, engine="spark")
