"""Where bundled and shared data live."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DATA_DIR = REPO_ROOT / "sample_data"
# ../shared/data beside the repository (the real datasets; never copied into the repo).
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
