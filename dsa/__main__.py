"""``python -m dsa``: see :mod:`dsa.cli`."""
import sys

from dsa.cli import main

sys.exit(main())
