"""`python -m ffwatchd` runs the command line."""

import sys

from ffwatchd.cli import main

sys.exit(main())
