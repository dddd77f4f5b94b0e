"""Shared test fixtures: the real-data directory, which must exist in CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _data_dir() -> Path:
    return Path(os.environ.get("CDGT_DATA_DIR", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data sets (CDGT_DATA_DIR, default ../shared/data).

    Locally a missing directory skips the test; in CI (CI=true) it fails, because CI must run them.
    """
    path = _data_dir()
    if not path.is_dir():
        message = f"real data not found at {path} (set CDGT_DATA_DIR)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return path
