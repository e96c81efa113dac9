"""anarchon-folder: a template backend, one folder on one host (or a local filesystem shared by processes).

``FolderBackend("/srv/cron")`` or ``Scheduler(backend="folder:///srv/cron")``.
"""

from __future__ import annotations

from .backend import FolderBackend

__all__ = ["FolderBackend"]
