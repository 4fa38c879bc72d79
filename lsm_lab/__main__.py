"""`python -m lsm_lab ...` is the `lsm-lab` command (lsm_lab/cli/__init__.py).

Taught in: no chapter (README, "Command line")
"""

import sys

from lsm_lab.cli import main

sys.exit(main())
