"""Debian's own cron daemon, run under libfaketime across DST changes, against anarchon's slots.

Debian's ``cron`` (Vixie cron 3.0pl1 with Debian's DST patches) and
``libfaketime`` are fetched with ``apt-get download`` and unpacked, never
installed. Each case runs the daemon in a private mount namespace (an empty
spool with one root crontab, no system crontabs) with its clock starting
minutes before a DST change and running 60 times fast. The jobs echo their
name and the real time; a ``* * * * *`` marker job (first in the crontab, so
forked first in each minute's pass) runs once a minute, and every other run
belongs to the minute of the last marker before it. About a minute and a half.

One difference is by design: at the end of a spring-forward gap Debian runs a
wall-clock job once for each of its wall times the gap skipped
(``0-59/30 2 * * *`` twice at 03:00 in Berlin); a slot is an instant, so
anarchon has one slot there.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from bisect import bisect_right
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from anarchon.cron import Schedule

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux mount namespaces"),
    pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="cron must run as root"),
]

SPEED = 60  # one fake minute a second; cron keeps up on a busy machine at real-time priority
JOBS = {
    "M": "* * * * *",  # the marker: every real minute
    "A": "0-59/30 2 * * *",
    "B": "0 1-23/2 * * *",
    "C": "30 2 * * *",
    "D": "*/30 2 * * *",
    "E": "45 0-19/1 * * *",
    "F": "15,45 * * * *",
    "G": "59-59 1 * * *",
}
CASES = [  # zone, local start (three minutes before the hour that changes), fake minutes to run
    ("Europe/Berlin", datetime(2026, 10, 25, 1, 57), 96),  # to 02:33 CET, past both 02:00 and 02:30
    ("Europe/Berlin", datetime(2026, 3, 29, 1, 57), 40),  # to 03:37 CEST
    ("America/New_York", datetime(2026, 11, 1, 0, 57), 66),  # to 01:03 EST
]

RUN = r"""
set -eu
W=$1 ROOT=$2
mount -t tmpfs tmpfs /var/spool
mkdir -p /var/spool/cron/crontabs
chmod 1730 /var/spool/cron/crontabs
cp "$W/crontab" /var/spool/cron/crontabs/root
chmod 600 /var/spool/cron/crontabs/root
cp -a /etc/pam.d "$W/pam.d"
cp "$ROOT/etc/pam.d/cron" "$W/pam.d/cron"
mount --bind "$W/pam.d" /etc/pam.d
if [ -d /etc/cron.d ]; then mkdir -p "$W/cron.d"; mount --bind "$W/cron.d" /etc/cron.d; fi
if [ -e /etc/crontab ]; then : > "$W/etc-crontab"; mount --bind "$W/etc-crontab" /etc/crontab; fi
mount -t tmpfs tmpfs /run
export TZ=$3 FAKETIME="@$4 x$5" LD_PRELOAD="$ROOT/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
exec timeout "$6" "$ROOT/usr/sbin/cron" -f -L 0
"""


@pytest.fixture(scope="module")
def debian() -> Path:
    """Debian's cron and libfaketime, unpacked into a cache folder (fetched once)."""
    for tool in ("apt-get", "dpkg-deb", "unshare", "timeout", "chrt"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (a Debian-like system)")
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "anarchon" / "debian-cron"
    if not (root / "usr/sbin/cron").exists() or not (root / "etc/pam.d/cron").exists():
        downloads = root.with_name("debian-cron-debs")
        downloads.mkdir(parents=True, exist_ok=True)
        got = subprocess.run(
            ["apt-get", "download", "cron", "libfaketime"], cwd=downloads, capture_output=True, text=True, check=False
        )
        if got.returncode != 0:
            reason = got.stderr.strip()[-300:]
            pytest.skip(f"apt-get download cron libfaketime failed (run apt-get update first?): {reason}")
        for deb in downloads.glob("*.deb"):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


def run_cron(root: Path, work: Path, zone: str, start: datetime, minutes: int) -> subprocess.Popen[bytes]:
    work.mkdir(parents=True)
    lines = [f"{cron} echo {name} $(date +\\%s.\\%N) >> {work}/log" for name, cron in JOBS.items()]
    (work / "crontab").write_text("\n".join(lines) + "\n")
    (work / "run.sh").write_text(RUN)
    seconds = minutes * 60 // SPEED + 3
    stamp = start.strftime("%Y-%m-%d %H:%M:%S")
    # Real-time priority for the daemon and the jobs it forks: at 60 fake minutes a real
    # minute, a one-second stall (three CI lanes on two cores) makes cron catch a minute up,
    # two markers land 0.04 s apart and the runs can no longer be told apart by minute.
    args = ["chrt", "--fifo", "10", "unshare", "-m", "--propagation", "private", "bash", str(work / "run.sh")]
    args += [str(work), str(root), zone, stamp, str(SPEED), str(seconds)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def runs(log: Path, first_minute_utc: int) -> dict[str, list[int]]:
    """Each job's runs as UTC epoch ms, from the real times the marker job gives each minute."""
    entries = [(name, float(t)) for name, t in (line.split() for line in log.read_text().splitlines())]
    markers = sorted(t for name, t in entries if name == "M")
    assert len(markers) > 10, f"the daemon ran too little: {entries[:5]}"
    gaps = [b - a for a, b in itertools.pairwise(markers)]
    assert min(gaps) > 0.4 * 60 / SPEED, f"cron fell behind its fake clock (minutes {min(gaps):.2f} s apart)"
    out: dict[str, list[int]] = {name: [] for name in JOBS}
    for name, t in entries:
        minute = bisect_right(markers, t + 0.1 * 60 / SPEED) - 1  # a job's echo may just beat the marker's
        out[name].append((first_minute_utc + minute * 60) * 1000)
    return {name: sorted(slots) for name, slots in out.items()}


def test_debian_cron_under_faketime_runs_the_slots_anarchon_derives(debian: Path, tmp_path: Path) -> None:
    started = []
    for i, (zone, start, minutes) in enumerate(CASES):
        started.append(run_cron(debian, tmp_path / str(i), zone, start, minutes))
    for process in started:
        process.wait(timeout=180)
    for i, (zone, start, _) in enumerate(CASES):
        log = tmp_path / str(i) / "log"
        if not log.exists():
            pytest.fail(f"Debian's cron ran no job in {zone} from {start} (see {tmp_path / str(i)})")
        first = int(start.replace(tzinfo=ZoneInfo(zone)).timestamp()) + 60  # cron's first pass: the next minute
        seen = runs(log, first)
        window = (first * 1000 - 1, seen["M"][-1])
        for name, cron in JOBS.items():
            schedule, expected, moment = Schedule(cron, zone), [], window[0]
            while (moment := schedule.next_after(moment)) <= window[1]:
                expected.append(moment)
            got = [slot for slot in seen[name] if slot <= window[1]]
            repeated = {slot for slot in got if got.count(slot) > 1}
            assert repeated <= {change(zone, start)}, (zone, start, name, "ran twice at once off a DST change")
            assert sorted(set(got)) == expected, (
                zone,
                start,
                name,
                cron,
                [utc(s) for s in got],
                list(map(utc, expected)),
            )


def change(zone: str, start: datetime) -> int:
    """The instant (ms) of the zone's first offset change after ``start``."""
    tz, t = ZoneInfo(zone), int(start.replace(tzinfo=ZoneInfo(zone)).timestamp())
    offset = datetime.fromtimestamp(t, tz).utcoffset()
    while datetime.fromtimestamp(t, tz).utcoffset() == offset:
        t += 60
    return t * 1000


def utc(slot_ms: int) -> str:
    return datetime.fromtimestamp(slot_ms / 1000, timezone.utc).strftime("%H:%M")
