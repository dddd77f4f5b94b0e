"""Register cdgt_keras's Keras-serializable classes (CDGTModel, SparseDense, LazyAdam, ...) once Keras is usable, so
`keras.models.load_model("model.keras")` works after `import cdgt_keras`, whichever of the two is imported first,
and `import cdgt_keras` alone still loads no TensorFlow.

How: when Keras is already imported, the classes' modules are imported at once; otherwise a finder on
`sys.meta_path` waits for the first import of `keras` or `tensorflow` (each imports the other) and imports them when
the outermost of those imports has finished, then removes itself.

Example (the second line needs a trained model):
    >>> import cdgt_keras, keras
    >>> keras.models.load_model("runs/demo/model.keras")            # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import warnings
from collections.abc import Sequence
from typing import Any

SERIALIZABLE_MODULES = ("cdgt_keras.sparse", "cdgt_keras.model")
_WATCHED = ("keras", "tensorflow")


def register() -> None:
    """Import every module that defines a Keras-serializable class (their decorators register them)."""
    for name in SERIALIZABLE_MODULES:
        importlib.import_module(name)


def _initializing(name: str) -> bool:
    spec = getattr(sys.modules.get(name), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


class _AfterKeras(importlib.abc.MetaPathFinder):
    """Wraps the loaders of keras and tensorflow; registers when the outermost of their imports has run."""

    def __init__(self) -> None:
        self.depth = 0

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if fullname not in _WATCHED:
            return None
        spec = self._spec_from_others(fullname, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            self.depth += 1
            try:
                run(module)
            finally:
                self.depth -= 1
            if self.depth == 0:
                self._done()

        loader.exec_module = exec_module
        return spec

    def _spec_from_others(self, fullname: str, path: Sequence[str] | None, target: Any) -> Any:
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _done(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        try:
            register()
        except Exception as err:  # never break the user's `import keras`; say why loading may fail later
            warnings.warn(f"cdgt_keras could not register its Keras classes ({type(err).__name__}: {err}); "
                          "`import cdgt_keras.model` before keras.models.load_model", RuntimeWarning, stacklevel=2)


def register_when_keras_loads() -> None:
    """Register now if Keras is loaded, else on its first import (see the module docstring)."""
    if "keras" in sys.modules and not any(_initializing(name) for name in _WATCHED):
        register()
    elif not any(isinstance(finder, _AfterKeras) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterKeras())
