"""``python -m anarchon``, the same as the ``anarchon`` command."""

import sys

from .cli import main

sys.exit(main())
