"""Shared test fixtures: the real-data directory, which must exist in CI."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _embedding_cache(tmp_path_factory: Any) -> Any:
    """The sentence embeddings' disk cache (cdgt_keras.text_embedding) in the session's temporary directory, not
    the user's ~/.cache."""
    old = os.environ.get("CDGT_CACHE_DIR")
    os.environ["CDGT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cdgt-cache"))
    yield
    if old is None:
        os.environ.pop("CDGT_CACHE_DIR", None)
    else:
        os.environ["CDGT_CACHE_DIR"] = old


def in_ci() -> bool:
    """Whether the tests run in CI (CI=true), where what they need must exist: a missing piece fails, not skips."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


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
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return path


def built_kernel(getter: Any) -> Any:
    """cdgt's fused op that `getter` (from cdgt_keras.kernels) returns; it must build in CI (which has g++: the fast
    road is tested there, not skipped), and locally its absence skips the test."""
    from cdgt_keras import kernels

    op = getter()
    if op is None:
        message = f"the fused kernels did not build: {kernels.kernel_status()}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return op


def write_debian_catalogue(folder: Path, n: int = 40) -> Path:
    """A small apt catalogue in `folder`: Packages.lz4 (tags on 30 of n, dependencies on 2/3) + Translation-en."""
    import lz4.frame

    folder.mkdir(parents=True)
    packages, translations = [], []
    for i in range(n):
        tags = ", ".join(f"t::{j}" for j in range(i % 4))
        deps = f"libc6 (>= 2), lib{i % 5}:any | other" if i % 3 != 2 else ""  # every split has some
        md5 = f"m{i}"
        packages.append(
            f"Package: p{i}\nDepends: {deps}\nDescription: short {i}\nDescription-md5: {md5}\n"
            + (f"Tag: {tags}\n" if tags else "")
        )
        translations.append(f"Package: p{i}\nDescription-md5: {md5}\nDescription-en: short {i}\n long {i}\n")
    translations.append("Package: gone\nDescription-md5: zz\nDescription-en: x\n y\n")
    with lz4.frame.open(folder / "Packages.lz4", "wt") as handle:
        handle.write("\n".join(packages))
    (folder / "Translation-en").write_text("\n".join(translations))
    return folder


@pytest.fixture
def debian_catalogue(tmp_path: Path) -> Path:
    """`write_debian_catalogue` in tmp_path/apt."""
    return write_debian_catalogue(tmp_path / "apt")
