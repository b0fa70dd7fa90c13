"""AppTest: a worldwide / country-wide check-in set opens on its densest region, its local time and its busiest
week, and the OD release page draws flows without any setting touched."""

from __future__ import annotations

import io
import zipfile

import pytest
from streamlit.testing.v1 import AppTest

from odapp.data.loading import UploadOptions, apply_upload
from odapp.shared.state import K_SOURCE, K_WEEK, DataSource
from odcore.paths import REPO_ROOT
from tests.app.map_element import decks


def zip_folder(folder) -> bytes:
    """The files of ``folder`` as a zip archive's bytes (an upload of a folder)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(folder.iterdir()):
            z.write(f, f.name)
    return buf.getvalue()


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.parametrize(("folder", "zone", "place"), [
    ("gowalla_liu2017_1k", "America/Chicago", "30.26, -97.75"),        # Austin
    ("foursquare_us_liu2017_5k", "America/New_York", "40.74, -73.96"),  # New York
])
def test_checkin_set_opens_on_its_densest_region_and_busiest_week(shared_data, folder, zone, place):
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=600)
    at.run()
    state: dict = {}
    # only the README's 8-hour correction is set, as a person following it would
    assert apply_upload(state, zip_folder(shared_data / folder), f"{folder}.zip", UploadOptions(time_offset_s=28800))
    for k, v in state.items():
        at.session_state[k] = v
    at.session_state[K_SOURCE] = DataSource.UPLOAD.value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    side = " ".join(c.value for c in at.sidebar.caption)
    assert "Region #1 of" in side
    assert place in side
    assert f"Local time: {zone}" in side
    assert "is the busiest" in side
    assert "(shown by default)" in side
    week = at.session_state[K_WEEK]
    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.session_state[K_WEEK] == week
    drawn = 0
    for deck in decks(at):
        for layer in deck.get("layers", []):
            if layer.get("@@type") == "ArcLayer" or "suppressed" in str(layer.get("id", "")):
                drawn = max(drawn, len(layer.get("data", [])))
    assert drawn >= 50, drawn     # flows on the map (published arcs, or the suppressed ones side by side)
