from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """One row per run of the heartbeat job; ``slot_ms`` is unique, so a second run of a slot would fail."""

    slot_ms = models.BigIntegerField(unique=True)
    instance = models.CharField(max_length=200)
    created = models.DateTimeField(auto_now_add=True)
