"""``python -m merge``: the ``pith-merge`` command (see :mod:`merge.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
