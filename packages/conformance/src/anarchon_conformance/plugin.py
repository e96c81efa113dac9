"""pytest plugin entry point of the conformance suite (work in progress)."""

from __future__ import annotations
