"""``python -m memframe``: the same command line as ``memframe``."""

import sys

from memframe.cli import main

sys.exit(main())
