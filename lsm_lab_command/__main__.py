"""`python -m lsm_lab_command ...` is the `lsm-lab` command (for a checkout that is not installed)."""

import sys

from lsm_lab_command import main

sys.exit(main())
