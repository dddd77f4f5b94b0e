"""Every example in the docstrings of the `cdgt` namespace (pipeline, components, serving, kubeflow, bench) runs
and gives what it shows; tests/cdgt_keras/test_doctests.py does the same for the library."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("cdgt.pipeline", "cdgt.pipeline.cli", "cdgt.components", "cdgt.components.formats", "cdgt.serving",
            "cdgt.kubeflow", "cdgt.bench")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        path = importlib.import_module(package).__path__
        names += [package, *sorted(m.name for m in pkgutil.iter_modules(path, package + ".")
                                   if not m.name.endswith(".__main__"))]  # __main__ runs the command line
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed"


def test_the_namespace_has_examples() -> None:
    """The walk finds the modules (a wrong package list would pass every test above by finding none)."""
    found = sum(doctest.testmod(importlib.import_module(n), verbose=False, report=False).attempted
                for n in ("cdgt.pipeline.blessing", "cdgt.serving.export"))
    assert len(_modules()) > 60 and found >= 5
