"""``python -m smoothloco.commands``: the ``smoothloco`` command without its installed script."""

import sys

from smoothloco.commands import main

if __name__ == "__main__":
    sys.exit(main())
