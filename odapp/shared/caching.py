"""How the app caches: every ``st.cache_*`` wrapper of the pages' folders is keyed on small things (dataset id,
frozen configs, seed), through :data:`cache_resource` and :data:`cache_data`.

Large objects are passed as ``_``-prefixed arguments, which Streamlit does not hash: the dataset id already says
which data they are. Heavy tables use ``st.cache_resource``: ``st.cache_data`` would unpickle a copy on every rerun
(~0.2 s for a week's release of the bundled sample), too slow for a slider to redraw within 300 ms. Their results
are shared and must be treated as read-only by the pages (pandas copy-on-write makes accidental writes local).
Small results use ``st.cache_data``. Nothing in a cached function reads a global.

The frozen configs are hashed by their fields' ``repr`` (:func:`config_key`): Streamlit's own way for a dataclass
(``dataclasses.asdict``, then every value) took ~0.1 ms a config, and a press on the OD release page hashes them
some twenty times.
"""

from __future__ import annotations

import dataclasses
import functools

import streamlit as st

from odapp.data import disk_cache


def config_key(config) -> str:
    """The cache key of a frozen config dataclass: its type and the ``repr`` of every field, in order (the fields
    are numbers, strings, None and enums, whose ``repr`` tells every value apart)."""
    return type(config).__qualname__ + repr(tuple(getattr(config, f.name) for f in dataclasses.fields(config)))


# by fully qualified name, so that the engine's modules are imported only when a page uses them
CONFIG_TYPES = ("odcore.od.oddata.ODConfig", "odcore.privacy.release.ReleaseConfig")
HASH_FUNCS = dict.fromkeys(CONFIG_TYPES, config_key)


cache_resource = functools.partial(st.cache_resource, hash_funcs=HASH_FUNCS)


cache_data = functools.partial(st.cache_data, hash_funcs=HASH_FUNCS)


def kept(kind: str, build, *args, **kwargs):
    """``build(*args, **kwargs)``, kept on disk between launches (:func:`odapp.data.disk_cache.disk_cached`, keyed on the
    ``repr`` of the arguments): only for results that depend on numbers alone, not on any data (the privacy-loss
    tables take seconds and are the same on every server, for every person)."""
    return disk_cache.disk_cached(kind, repr((args, sorted(kwargs.items()))), lambda: build(*args, **kwargs))


def live_json(tables):
    """A :mod:`odcore.privacy.live` table builder whose tables come back as the browser reads them."""
    return lambda *args: {k: t.to_json() for k, t in tables(*args).items()}
