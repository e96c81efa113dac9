"""anarchon-web: a dashboard of an anarchon fleet's schedule.

Every job with its cron, next slots and a strip of its recent slots coloured
by outcome, each job's slot ledger, history and figures, and the same data as
JSON for scripts. Read-only unless built with ``actions=True``.

    from anarchon_web import app
    dashboard = app(scheduler)              # a Starlette app: serve it, or Mount() it

``anarchon-web module:attr`` and ``anarchon-web --backend URL --job NAME=CRON``
serve it with uvicorn (see :mod:`anarchon_web.cli`).
"""

from __future__ import annotations

from ._app import app
from ._settings import Settings
from ._slots import OUTCOMES, Slot, due_slots, strip

__all__ = ["OUTCOMES", "Settings", "Slot", "app", "due_slots", "strip"]
