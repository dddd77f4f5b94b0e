"""numpy's huge-page advice, off in cdgt's processes unless the user decides otherwise.

On Linux numpy asks the kernel to back each array of 4 MB or more with 2 MB pages (madvise MADV_HUGEPAGE). Training,
settling and evaluating make and drop thousands of such arrays (a validation chunk's scores, a memory's sorted
copies). Where free memory is fragmented, or handed back to a hypervisor as in a virtual machine that reports its
free pages, each new huge page costs the kernel a compaction before the array's first write: on a 2-core VM, `cdgt
train --dataset debtags` with the text default trained in 82-84 s with the advice and 65-68 s without, its kernel
time 38 s against 19 s and its user time the same (three runs each, side by side; bench/learner_notes.md, round 65).

`NUMPY_MADVISE_HUGEPAGE` (numpy's own switch: 0 off, 1 on), when the user has set it, decides instead.

    >>> settings = {}
    >>> small_pages(settings), settings                   # cdgt's default: off, for this process and its children
    (False, {'NUMPY_MADVISE_HUGEPAGE': '0'})
    >>> small_pages({"NUMPY_MADVISE_HUGEPAGE": "1"})     # the user's choice stands
    True
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

VARIABLE = "NUMPY_MADVISE_HUGEPAGE"


def small_pages(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set numpy's huge-page advice by `VARIABLE` in `environ` (default `os.environ`), writing 0 there when unset:
    numpy reads the variable when it is imported (here, or in a process started from this one), and the advice
    of an already imported numpy is switched now. Returns whether the advice is on."""
    environ = os.environ if environ is None else environ
    on = environ.setdefault(VARIABLE, "0").strip() not in ("0", "")
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if int(numpy.__version__.split(".")[0]) >= 2:  # numpy 2 names the module _core
            from numpy._core.multiarray import _set_madvise_hugepage
        else:
            from numpy.core.multiarray import _set_madvise_hugepage
        _set_madvise_hugepage(on)
    return on
