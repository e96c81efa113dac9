"""The records of deciding a slot: a claim, its answer, and the grant a winner holds."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from .job import Job
from .options import JobOptions
from .run import Run, RunId, RunStatus, ms_to_datetime

__all__ = ["Claim", "ClaimResult", "Grant", "Outcome", "decided_lines", "fencing_floor", "next_fencing", "read_decided"]


def fencing_floor(now_ms: int) -> int:
    """Where a job's fencing counter starts when the referee has none: the referee's clock, in ms.

    A counter from zero fell from about 35 to 4 after a Redis without
    persistence restarted empty, so a store that keeps the highest token it
    has seen refused every run after it. Started from the clock, a counter
    made again later starts above every token the lost one gave, as long as
    the job was granted fewer tokens than milliseconds passed (a job runs at
    most once a second, so a thousandfold margin) and the referee's clock
    did not go back. Milliseconds, not finer: tokens keep 13 digits, which
    JSON encoders that keep 14 (Redis's cjson) write exactly.
    """
    return now_ms


def decided_lines(decided: Sequence[tuple[str, int]]) -> str:
    """Decided slots as a server backend's notice carries them: a ``"<job> <slot>"`` line each."""
    return "\n".join(f"{job} {slot}" for job, slot in decided)


def read_decided(payload: str) -> list[tuple[str, int]]:
    """The ``(job, slot)`` pairs of a notice :func:`decided_lines` wrote; a line that is not one is skipped."""
    out = []
    for line in payload.split("\n"):
        job, _, slot = line.partition(" ")
        if job and slot.isdigit():
            out.append((job, int(slot)))
    return out


def next_fencing(current: int, now_ms: int) -> int:
    """The token a grant takes after ``current``; a counter never used (0) starts at :func:`fencing_floor`."""
    return (current or fencing_floor(now_ms)) + 1


class Outcome(str, enum.Enum):
    """The answer to one claim."""

    WON = "won"  # run it
    LOST = "lost"  # another instance has it, or the slot is older than the mark
    SKIPPED = "skipped"  # overlap: the previous run still holds the lease
    UNKNOWN = "unknown"  # the answer was lost: treat as lost, never run twice
    PAUSED = "paused"  # the job is paused: the slot is recorded ``paused`` (once) and not run

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Claim:
    """One instance asking to run one slot of one job.

    ``job`` is the job's name, as in :class:`Grant` and :class:`Run`; the
    job itself (its options, for the backend's rules) is ``spec``. Passing the
    :class:`~anarchon.job.Job` as ``job`` is accepted and split into both, so
    ``Claim(job, slot_ms, instance, token, now_ms)`` builds a whole claim.

    ``token`` is unique per claim; a retry of the same claim reuses it so the
    backend can recognise the client's own earlier claim. ``now_ms`` is the
    instance's clock, recorded as the run's ``started_at``.
    """

    job: str
    slot_ms: int
    instance: str
    token: str
    now_ms: int
    manual: bool = False
    catch_up: bool = False
    missed: int = 0
    spec: Job = field(default=None, kw_only=True)  # type: ignore[assignment]  # set in __post_init__

    def __post_init__(self) -> None:
        job: object = self.job
        if isinstance(job, Job):
            object.__setattr__(self, "spec", job)
            object.__setattr__(self, "job", job.name)
        elif not isinstance(self.spec, Job) or self.spec.name != job:
            raise TypeError(
                f"Claim(job={job!r}) needs the Job itself: pass it as job, or its name as job and it as spec="
            )

    @property
    def id(self) -> RunId:
        return RunId(self.job, self.slot_ms, self.manual)

    @property
    def options(self) -> JobOptions:
        """The job's options, which the backend's rules read (lease, overlap, history size…)."""
        return self.spec.options

    def granted(
        self,
        *,
        attempt: int = 1,
        fencing: int | None = None,
        lease_ms: int = 0,
        started_at_ms: int | None = None,
        supersedes: int | None = None,
        previous_mark: int | None = None,
    ) -> Grant:
        """The grant of this claim, as a backend answers a ``WON``: the claim's run, and what the backend adds.

        A claim backend passes nothing (no lease, no fencing); a lease backend
        its lease, fencing token and marks. The run starts at the claim's
        ``now_ms`` unless the backend says otherwise.
        """
        return Grant(
            job=self.job,
            slot_ms=self.slot_ms,
            instance=self.instance,
            token=self.token,
            attempt=attempt,
            fencing=fencing,
            manual=self.manual,
            catch_up=self.catch_up,
            missed=self.missed,
            started_at_ms=self.now_ms if started_at_ms is None else started_at_ms,
            lease_ms=lease_ms,
            supersedes=supersedes,
            previous_mark=previous_mark,
        )

    def running(self, fencing: int | None = None) -> Run:
        """The history record written when this claim is granted (or, with ``status`` replaced, skipped)."""
        return Run(
            job=self.job,
            slot_ms=self.slot_ms,
            status=RunStatus.RUNNING,
            instance=self.instance,
            fencing=fencing,
            manual=self.manual,
            catch_up=self.catch_up,
            missed=self.missed,
            started_at=ms_to_datetime(self.now_ms),
        )


@dataclass(frozen=True)
class Grant:
    """The right to run one slot, and the handle to renew or finish it.

    On a claim backend it is only a receipt (``fencing`` is ``None``).
    """

    job: str
    slot_ms: int
    instance: str
    token: str
    attempt: int = 1
    fencing: int | None = None
    manual: bool = False
    catch_up: bool = False
    missed: int = 0
    started_at_ms: int = 0
    #: The job's ``lease_ms`` when granted; renewals extend by it.
    lease_ms: int = 0
    #: The slot of the dead run this claim abandoned, when it was the newest slot won.
    supersedes: int | None = None
    #: The job's ``mark`` this scheduled claim found and moved (``None``: the job never ran, or unknown).
    previous_mark: int | None = None

    @property
    def id(self) -> RunId:
        return RunId(self.job, self.slot_ms, self.manual)

    def finished(self, status: RunStatus, *, started_ms: int, finished_ms: int, error: str | None = None) -> Run:
        """The history record of this grant's run, as :meth:`Backend.finish` receives it."""
        return Run(
            job=self.job,
            slot_ms=self.slot_ms,
            status=status,
            instance=self.instance,
            attempt=self.attempt,
            fencing=self.fencing,
            manual=self.manual,
            catch_up=self.catch_up,
            started_at=ms_to_datetime(started_ms),
            finished_at=ms_to_datetime(finished_ms),
            duration_ms=max(0, finished_ms - started_ms),
            error=error,
            missed=self.missed,
        )


@dataclass(frozen=True)
class ClaimResult:
    outcome: Outcome
    grant: Grant | None = None
    #: The history record written for a SKIPPED answer, when the backend has it.
    record: Run | None = None

    @property
    def won(self) -> bool:
        return self.outcome is Outcome.WON
