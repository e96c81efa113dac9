"""MkDocs hook: show the docstrings' Sphinx roles (:class:`Scheduler`) as plain code.

The docstrings are written for reading in the source and in ``help()``,
with Sphinx's roles; mkdocstrings renders the role's name as text before the
code. This drops the name (and the ``~`` that shortens a path), leaving the code.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|data|attr|mod|exc|obj|const):<code>~?")


def on_page_content(html: str, **kwargs: Any) -> str:
    return ROLE.sub("<code>", html)
