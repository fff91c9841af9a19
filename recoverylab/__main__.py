"""``python -m recoverylab``: the same as the ``recoverylab`` command."""

import sys

from recoverylab.cli import main

sys.exit(main())
