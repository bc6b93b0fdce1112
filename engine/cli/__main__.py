"""``python -m engine.cli``: the ``slotwise`` program."""

import sys

from engine.cli import main

sys.exit(main())
