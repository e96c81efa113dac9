"""The short form of ``python -m chaos.outage``: the referee cut from the whole fleet, default options.

3 instances, 5 every-second jobs, the link to the loopback server cut for
3 s through a proxy (the shared server itself is never touched): no slot
runs twice, and every slot of the cut is covered by the catch-up run that
follows it (none missed), the first run starting soon after the link is back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.outage import one

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_cut_referee_runs_nothing_twice_and_the_catch_up_covers_the_cut(backend: str, tmp_path: Path) -> None:
    figures = one(backend, 3.0, 5, tmp_path)
    assert figures["twice"] == 0, figures
    assert figures["not_run"] == figures["covered"], f"slots neither run nor covered: {figures}"
    assert figures["covered"] >= 5, f"the cut of 3 s covered no slot: was the link cut at all? {figures}"
    assert figures["first_run_after_s"] < 10, figures
