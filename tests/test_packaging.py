"""What `pip install .` puts into site-packages: `cdgt_keras` and the `cdgt` namespace, nothing generic.

The top-level folders (pipeline/, components/, serving/, kubeflow/) install as cdgt.pipeline, cdgt.components, ...
(pyproject.toml's package-dir), so that a `kubeflow` SDK (kubeflow.training, kubeflow.trainer) or the PyPI
`pipeline` / `components` packages installed beside cdgt neither shadow it nor are shadowed by it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# repository folder -> the name it is installed under
INSTALLED_AS = {"cdgt_keras": "cdgt_keras", "pipeline": "cdgt/pipeline", "components": "cdgt/components",
                "serving": "cdgt/serving", "kubeflow": "cdgt/kubeflow", "bench": "cdgt/bench"}


def _python(code: str, cwd: Path, path: list[Path]) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter started in `cwd` (not the repository) with only `path` on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, path))}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("first", ["stub", "ours"])
def test_a_kubeflow_sdk_beside_us_is_not_shadowed_and_does_not_shadow_us(tmp_path, first):
    stub = tmp_path / "site"
    (stub / "kubeflow" / "training").mkdir(parents=True)  # the official SDKs' namespace package, no __init__.py
    (stub / "kubeflow" / "training" / "__init__.py").write_text("SDK = 'kubeflow-training stub'\n")
    imports = ["import kubeflow.training", "import cdgt.kubeflow.parameters"]
    code = "\n".join([*(imports if first == "stub" else imports[::-1]),
                      "import sys, cdgt.kubeflow",
                      "print(kubeflow.training.SDK)",
                      "print(cdgt.kubeflow.__file__)",
                      "print(cdgt.kubeflow.parameters.TRAINER_CONFIG)",
                      "print(sorted(n for n in ('pipeline', 'components', 'serving') if n in sys.modules))"])
    result = _python(code, tmp_path, [stub])
    assert result.returncode == 0, result.stderr[-2000:]
    sdk, ours, parameter, generic = result.stdout.splitlines()[-4:]
    assert sdk == "kubeflow-training stub"
    assert Path(ours).parent.name == "kubeflow" and stub not in Path(ours).parents
    assert parameter and generic == "[]"


def test_cdgt_help_resolves_without_the_repository_on_the_path(tmp_path):
    """The installed names alone run the CLI (a fresh interpreter outside the checkout)."""
    result = _python("from cdgt.pipeline.cli import build_parser; build_parser().format_help()", tmp_path, [])
    assert result.returncode == 0, result.stderr[-2000:]


def _source_copy(target: Path) -> Path:
    """The files a wheel is built from, copied so that the build leaves nothing in the checkout."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    for folder in INSTALLED_AS:
        shutil.copytree(REPO / folder, target / folder, ignore=_code_only)
    return target


def _code_only(directory: str, names: list[str]) -> list[str]:
    """What the copy leaves out: caches, and bench/'s results, report and plots (only its modules install)."""
    if Path(directory) == REPO / "bench":
        return [n for n in names if not n.endswith(".py")]
    return [n for n in names if n == "__pycache__" or n.endswith(".pyc")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src = _source_copy(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                             "--no-index", "--quiet", "--wheel-dir", str(out), str(src)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = out.glob("cdgt-*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


def test_the_wheel_installs_only_cdgt_keras_and_the_cdgt_namespace(wheel):
    names = wheel.namelist()
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"cdgt_keras", "cdgt"}
    assert "cdgt/__init__.py" not in names  # a namespace: other distributions may add to it
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "cdgt = cdgt.pipeline.cli:main" in wheel.read(entry_points).decode()


def test_the_wheel_holds_every_module_of_the_installed_folders(wheel):
    """pyproject.toml lists the packages by hand (package-dir mapping): a new sub-package must be listed too."""
    names = set(wheel.namelist())
    for folder, installed in INSTALLED_AS.items():
        for file in (REPO / folder).rglob("*.py"):
            assert f"{installed}/{file.relative_to(REPO / folder).as_posix()}" in names, file
