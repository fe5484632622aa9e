"""`python -m ffwatchd.install [--gpu]`: the install step's entry point (README, scripts/install.sh);
the work is in ops/install.py."""

import sys

from ffwatchd.ops.install import main

if __name__ == "__main__":
    sys.exit(main())
