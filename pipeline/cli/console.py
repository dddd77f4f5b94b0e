"""What the `cdgt` command shows: its global -v/--verbose and -q/--quiet, progress lines, and third-party noise.

Default: cdgt's own progress lines, results, warnings and errors; third-party chatter that is no business of a
cdgt user is dropped, cheaply and before TensorFlow loads: TensorFlow's C++ log (CUDA plugin registration
errors on a machine without a GPU, oneDNN notices), Google client libraries' Python-version notices, TFMA's
divide-by-zero RuntimeWarnings on empty slices, TensorFlow deprecation notices about APIs the libraries call
(tf_record_iterator), Beam's python-snappy hint, google-cloud-aiplatform's google-cloud-storage version notice,
TFX's repeated MLMD notices and its `Execution N failed.` line when a component stops the run (cdgt says which
component failed, and why, itself). Warnings that cdgt itself
issues are kept. `-v` keeps all of it (and TensorFlow's C++ info log); `-vv` adds debug logs. `-q` drops
progress lines and library warnings: results and errors remain.

Example:
    >>> configure(verbosity=0, quiet=False)   # what `cdgt COMMAND` does before running COMMAND
    >>> progress("run", "pipeline cdgt-yeast started")  # doctest: +SKIP
    [cdgt run] pipeline cdgt-yeast started
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from typing import TextIO

from cdgt.components.build_progress import QUIET_ENV  # -q for the Beam worker processes a data build starts

_STATE = {"quiet": False, "verbosity": 0}
_SAVED_LEVELS: dict[str, int] = {}

# (logger name, text in the message or a pattern the whole message matches) of library log records dropped unless -v
_DROPPED_LOGS: tuple[tuple[str, str | re.Pattern[str]], ...] = (
    ("tensorflow", "is deprecated"),
    ("apache_beam.io.tfrecordio", "python-snappy"),
    ("absl", "property_predicate is not supported"),
    ("absl", "does not have payload_format custom property"),
    ("absl", re.compile(r"Execution \d+ failed\.")),  # TFX's launcher; `cdgt run` names the failed component
)


class _DropText(logging.Filter):
    def __init__(self, texts: tuple[str | re.Pattern[str], ...]):
        super().__init__()
        self.texts = texts

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(text.fullmatch(message) if isinstance(text, re.Pattern) else text in message
                       for text in self.texts)


def configure(verbosity: int = 0, quiet: bool = False) -> None:
    """Set what is shown for this process (call before TensorFlow is imported): see the module docstring."""
    _restore_levels()
    _STATE.update(quiet=quiet, verbosity=verbosity)
    os.environ[QUIET_ENV] = "1" if quiet else "0"  # Beam worker processes inherit it (their progress lines)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if verbosity else "3")
    if verbosity:
        level = logging.DEBUG if verbosity > 1 else logging.INFO
        logging.basicConfig(level=level)
        _set_levels(("absl",), level)
        return
    _drop_library_warnings()
    for name in sorted({name for name, _ in _DROPPED_LOGS}):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropText) for f in logger.filters):
            logger.addFilter(_DropText(tuple(t for n, t in _DROPPED_LOGS if n == name)))
    if quiet:
        _set_levels(("absl", "tensorflow", "apache_beam", "tfx"), logging.ERROR)
        warnings.filterwarnings("ignore", category=DeprecationWarning)


def _set_levels(names: tuple[str, ...], level: int) -> None:
    """Set these loggers' levels, remembering the old ones (a later configure() restores them)."""
    for name in names:
        logger = logging.getLogger(name)
        _SAVED_LEVELS.setdefault(name, logger.level)
        logger.setLevel(level)


def _restore_levels() -> None:
    for name, level in _SAVED_LEVELS.items():
        logging.getLogger(name).setLevel(level)
    _SAVED_LEVELS.clear()


def _drop_library_warnings() -> None:
    warnings.filterwarnings("ignore", message=".*non-supported Python version.*", category=FutureWarning)
    warnings.filterwarnings("ignore", message=r"Support for google-cloud-storage < \d", category=FutureWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"tensorflow_model_analysis(\.|$)")
    warnings.filterwarnings("ignore", message=r".*(divide by zero|invalid value) encountered.*",
                            category=RuntimeWarning, module=r"(tensorflow_model_analysis|numpy)(\.|$)")


def is_quiet() -> bool:
    """True under `cdgt -q`."""
    return bool(_STATE["quiet"])


def progress(tag: str, message: str, stream: TextIO | None = None) -> None:
    """One `[cdgt TAG] message` progress line (stderr unless `stream`), dropped under `cdgt -q`."""
    if not is_quiet():
        print(f"[cdgt {tag}] {message}", file=stream or sys.stderr, flush=True)
