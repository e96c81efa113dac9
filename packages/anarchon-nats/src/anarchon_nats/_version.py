"""Whether the connected nats-server is one whose per-subject limit makes every write dear, read at ``start()``.

The backend trims each job's history with the stream's ``max_msgs_per_subject``
(the seed's design: by count, per job). Once a job's subjects are full,
every claim and every result also removes that subject's oldest message.
nats-server before 2.10 does that removal slowly over many subjects
(nats-server issue #4043). Measured here with ``benchmarks/nats_subject_limit.py``
(2,000 full subjects of 100 messages, no anarchon): 2.9.10 spent 306 ms of
server CPU per 1,000 publishes against 64 ms without the limit; 2.15.1 spent
80 against 78. In the 10-minute soak (3 instances x 1,000 every-second jobs)
2.9.10 fell behind from the minute the histories filled on a loaded machine
and 2.15.1 ran every slot (``benchmarks/results/REPORT.md``, Soak). A warning, not a refusal: a small fleet on 2.9
never notices.
"""

from __future__ import annotations

__all__ = ["FIXED_IN", "old_server_warning"]

#: The first nats-server release whose per-subject limit keeps its cost under many subjects.
FIXED_IN = (2, 10)


def old_server_warning(version: str) -> str | None:
    """A warning for a server ``version`` (as its INFO gives it, e.g. ``"2.9.10"``) older than :data:`FIXED_IN`."""
    try:
        major, minor = (int(part) for part in version.split("-")[0].split(".")[:2])
    except ValueError:
        return None  # not a version we can read: say nothing rather than guess
    if (major, minor) >= FIXED_IN or major == 0:  # 0.0.0: the client had no INFO to read it from
        return None
    return (
        f"nats-server {version} removes a job's oldest history message slowly once its per-subject "
        "limit is reached (nats-server issue #4043): measured, 4.8x the server CPU per claim and per "
        "result on 2.9.10, and a fleet of 3 instances x 1,000 every-second jobs fell behind once the "
        f"histories filled. Upgrade the server to {FIXED_IN[0]}.{FIXED_IN[1]} or later; see 'Limits to "
        "know' in the anarchon-nats README"
    )
