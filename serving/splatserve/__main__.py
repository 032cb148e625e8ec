"""``python -m splatserve``: see :mod:`splatserve.cli`."""

import sys

from splatserve.cli import main

sys.exit(main())
