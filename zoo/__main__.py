"""Command line: ``python -m zoo [demo | list | fit MODEL DATAFILE ...]`` (see :mod:`zoo.cli`)."""

import sys

from zoo.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
