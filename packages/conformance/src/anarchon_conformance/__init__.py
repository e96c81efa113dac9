"""The anarchon backend conformance suite (work in progress)."""

from __future__ import annotations

__all__: list[str] = []
