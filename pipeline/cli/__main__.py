"""`python -m cdgt.pipeline.cli ARGS`: the `cdgt` command."""

import sys

from cdgt.pipeline.cli import main

sys.exit(main())
