"""``python -m spark_groupsource.devbroker``: see :mod:`spark_groupsource.devbroker._server`."""

import sys

from ._server import main

if __name__ == "__main__":
    sys.exit(main())
