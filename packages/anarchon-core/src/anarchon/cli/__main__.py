"""``python -m anarchon.cli``, the same as ``anarchon``."""

import sys

from . import main

sys.exit(main())
