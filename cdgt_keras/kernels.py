"""cdgt's own TensorFlow kernels, compiled on first use with the machine's C++ compiler.

- `lazy_adam_rows()`: the `CdgtLazyAdamRows` op (adam.cc): Adam on the rows a sparse gradient names, in
  one pass. `LazyAdam` updates the shared encoder's first layer through it (on debtags' batches, 11k rows of 512,
  it takes about half the time of LazyAdam's own TensorFlow ops, which remain the fallback and the reference:
  tests hold the two to the same bits).
- `adam_dense()`: the `CdgtAdamDense` op (adam.cc): Keras' Adam on a whole variable in one pass, with the bits
  of Keras' ten element-wise kernels (`LazyAdam`'s dense gradients: the players' output layers).
- `column_combine()`: the `CdgtColumnCombine` op (column_combine.cc): a batch times a static sparse table of a few
  entries per output column, row by row (`cdgt_keras.columns`: the players' fusion and the game's selections in
  training, without the two transposed copies of the batch that TensorFlow's sparse product makes).
- `leading_split()`: the `CdgtLeadingSplit` op (leading_split.cc): a sparse batch's first columns as a dense block
  and its other entries as a sparse batch, in one pass (`cdgt_keras.sparse.split_leading`: the text embedding's
  columns, which the encoder, the wide parts and the neighbour votes read as a dense block), where TensorFlow's
  two slices and a densification read the batch three times; the same values.
- `payoff_grad()`: the `CdgtPayoffGrad` op (payoff_grad.cc): the gradient of the shipped preset's payoff and rarity
  parts with respect to the fused probabilities in one pass, with the bits of TensorFlow's twenty-odd element-wise
  gradient kernels (`cdgt_keras.payoff_grad`); the focal payoff's (attribute `gamma` > 0) within float32 rounding.
- `payoff_values()`: the `CdgtPayoffValues` op (payoff_grad.cc): those values (the BCE's or the focal loss's sum,
  each player's rarity sum) in one pass, where TensorFlow's ops take some seventeen; training reads them only as
  its logs.

Predictions in process fuse the players through `column_combine` too (the same bits as TensorFlow's product, a
third of a deps batch's prediction time); a SavedModel must not name cdgt's ops (TF Serving and TFMA load it without
the library), so the export traces its graphs inside `portable_graphs()`, where `in_portable_graphs()` is True and
the model keeps to TensorFlow's ops.

Each is None when the library cannot be built; `kernel_status()` says why. The library is built once per
TensorFlow version, source and machine into a cache directory (`CDGT_KERNEL_CACHE`, else
`$XDG_CACHE_HOME/cdgt/kernels`, else `~/.cache/cdgt/kernels`), with `CXX` (default g++) and TensorFlow's own compile
and link flags; it takes about 20 s. `CDGT_FUSED_KERNELS=0` keeps to TensorFlow's ops.

    >>> op = lazy_adam_rows()                    # built here on first use (or None, with a warning saying why)
    >>> (op is not None) == (kernel_status() == "fused")
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SOURCES = [Path(__file__).with_name(name)
            for name in ("adam.cc", "column_combine.cc", "leading_split.cc", "payoff_grad.cc")]
# -ffp-contract=off: no fused multiply-adds, so each float operation rounds as TensorFlow's element-wise ops do.
# -mno-avx512fp16: on a CPU with AVX512-FP16, TensorFlow 2.21's Eigen headers take a half-precision path that g++ 12
# cannot parse ("expected initializer before '<'" in PacketMathFP16.h); the kernels are float32 and need none of it.
_FLAGS = ["-shared", "-fPIC", "-O3", "-march=native", "-mno-avx512fp16", "-fno-math-errno", "-ffp-contract=off"]
_state: dict[str, Any] = {}
_portable = {"depth": 0}


@contextlib.contextmanager
def portable_graphs() -> Iterator[None]:
    """Graphs traced within trace TensorFlow's ops only, no cdgt kernel (what a SavedModel holds).

        >>> with portable_graphs():
        ...     in_portable_graphs()
        True
        >>> in_portable_graphs()
        False
    """
    _portable["depth"] += 1
    try:
        yield
    finally:
        _portable["depth"] -= 1


def in_portable_graphs() -> bool:
    """Whether a graph traced now must keep to TensorFlow's ops (`portable_graphs`)."""
    return _portable["depth"] > 0


def cache_dir() -> Path:
    """Where compiled kernels are kept (created on first build)."""
    if os.environ.get("CDGT_KERNEL_CACHE"):
        return Path(os.environ["CDGT_KERNEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cdgt" / "kernels"


def _machine() -> str:
    """What -march=native compiles for: the CPU's feature flags (Linux), else the processor's name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.machine() + platform.processor()


def _build(tf: Any, compiler: str) -> Path:
    """Compile the ops' library for this TensorFlow and machine, or return the one built before."""
    flags = [*_FLAGS, *tf.sysconfig.get_compile_flags()]
    links = list(tf.sysconfig.get_link_flags())
    texts = [source.read_text() for source in _SOURCES]
    key = hashlib.sha256("\n".join([*texts, tf.__version__, compiler, *flags, *links, _machine()]).encode())
    key = key.hexdigest()[:16]
    target = cache_dir() / f"cdgt_kernels-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"cdgt: building cdgt's fused kernels into {target.parent} (once, about 20 s)", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        sources = [str(source) for source in _SOURCES]
        result = subprocess.run([compiler, *flags, *sources, "-o", str(built), *links],
                                capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            names = ", ".join(source.name for source in _SOURCES)
            raise RuntimeError(f"{compiler} failed on {names}: {result.stderr.strip()[-600:]}")
        os.replace(built, target)  # atomic: a concurrent build finds a whole library or none
    return target


def _library() -> Any:
    """The loaded ops' module, or None when it is switched off or cannot be built (one warning says why)."""
    if "lib" in _state:
        return _state["lib"]
    _state["lib"], _state["status"] = None, "TensorFlow ops (CDGT_FUSED_KERNELS=0)"
    if os.environ.get("CDGT_FUSED_KERNELS", "1") == "0":
        return None
    compiler = os.environ.get("CXX", "g++")
    try:
        import tensorflow as tf

        if shutil.which(compiler) is None:
            raise RuntimeError(f"no C++ compiler {compiler!r} on PATH (set CXX, or install g++)")
        _state["lib"] = tf.load_op_library(str(_build(tf, compiler)))
        _state["status"] = "fused"
    except Exception as err:  # any failure leaves TensorFlow's ops, which are always right
        _state["status"] = f"TensorFlow ops (the fused kernels could not be built: {err})"
        warnings.warn(f"cdgt: LazyAdam, the players' fusion and the payoff's gradient run on TensorFlow's ops, slower "
                      f"on wide inputs and many labels: {err}", RuntimeWarning, stacklevel=3)
    return _state["lib"]


def lazy_adam_rows() -> Any:
    """The `CdgtLazyAdamRows` op (a callable of var, m, v handles, rows, grad, alpha, beta_1, beta_2, epsilon),
    or None when it is switched off or cannot be built."""
    lib = _library()
    return None if lib is None else lib.cdgt_lazy_adam_rows


def adam_dense() -> Any:
    """The `CdgtAdamDense` op (a callable of var, m, v handles, grad, alpha, keep_1, keep_2, epsilon), or None as
    `lazy_adam_rows`."""
    lib = _library()
    return None if lib is None else lib.cdgt_adam_dense


def column_combine() -> Any:
    """The `CdgtColumnCombine` op (a callable of x, splits, cols, weights), or None as `lazy_adam_rows`."""
    lib = _library()
    return None if lib is None else lib.cdgt_column_combine


def leading_split() -> Any:
    """The `CdgtLeadingSplit` op (a callable of indices, values, dense_shape, n), or None as `lazy_adam_rows`."""
    lib = _library()
    return None if lib is None else lib.cdgt_leading_split


def payoff_grad() -> Any:
    """The `CdgtPayoffGrad` op (a callable of fused, labels, inv_p, inv_q, rarity, masks, scale, player_scale,
    players, lo, hi), or None as `lazy_adam_rows`."""
    lib = _library()
    return None if lib is None else lib.cdgt_payoff_grad


def payoff_values() -> Any:
    """The `CdgtPayoffValues` op (a callable of fused, labels, rarity, masks, lo, hi), or None as `lazy_adam_rows`."""
    lib = _library()
    return None if lib is None else lib.cdgt_payoff_values


def kernel_status() -> str:
    """"fused", "not built yet", or "TensorFlow ops (<why>)": what LazyAdam's sparse updates and the players'
    fusion (in training, and in prediction in process) run on."""
    return _state.get("status", "not built yet")
