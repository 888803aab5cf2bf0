"""`python -m renewable_huber` runs the command line, the same as `renewable-huber`."""

import sys

from .cli import main

sys.exit(main())
