"""Tests of the dashboard's pages (AppTest) and odapp."""

import importlib
import pkgutil

import odapp


def cache_modules() -> list:
    """Every ``cache`` module of the app's folders (each page's or feature's cached computations)."""
    return [importlib.import_module(m.name) for m in pkgutil.walk_packages(odapp.__path__, "odapp.")
            if m.name.endswith(".cache")]
