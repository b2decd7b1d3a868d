"""``python -m stitchcuda_lab``: the same command line as ``stitchcuda-lab``."""

import sys

from .cli import main

sys.exit(main())
