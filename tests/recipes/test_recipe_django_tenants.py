"""The Django tenant view: a tenant's report schedule created, read and changed, bad input refused.

Django's test client, in this process, against the recipe site's own settings
and URLs, and a real SQLite backend of each test's own; what the view stored
is read back through ``SyncSchedules``, never through the view.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from anarchon import JobNotFoundError, SyncSchedules

SITE = Path(__file__).resolve().parents[2] / "examples" / "recipes" / "django_site"
URL = "/tenants/{}/report-schedule"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, SyncSchedules]]:
    """The site's test client (CSRF checks on) and the backend its view writes to, read here apart from it."""
    monkeypatch.syspath_prepend(str(SITE))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "site_config.settings")
    monkeypatch.delenv("ANARCHON_AUTOSTART", raising=False)  # no scheduler in this process
    import django
    from django.test import Client, override_settings

    django.setup()
    backend = f"sqlite:///{tmp_path / 'anarchon.sqlite3'}"
    with override_settings(ANARCHON_BACKEND=backend):
        yield Client(SERVER_NAME="localhost"), SyncSchedules(backend, by="test")


def test_a_tenant_creates_reads_and_changes_its_report_hour(site: tuple[Any, SyncSchedules]) -> None:
    client, schedules = site
    assert client.get(URL.format("acme")).status_code == 404

    created = client.post(URL.format("acme"), {"hour": "7", "timezone": "Europe/Paris"})
    assert created.status_code == 200, created.content
    stored = schedules.get("report-acme")
    assert (stored.task, stored.cron, stored.timezone, dict(stored.kwargs)) == (
        "report",
        "0 7 * * *",
        "Europe/Paris",
        {"tenant": "acme"},
    )
    assert stored.revision >= 1 and stored.updated_by == "django"
    assert created.json() == {"cron": "0 7 * * *", "timezone": "Europe/Paris", "revision": stored.revision}
    assert client.get(URL.format("acme")).json() == created.json()

    changed = client.post(URL.format("acme"), {"hour": "18", "timezone": "UTC", "revision": str(stored.revision)})
    assert changed.status_code == 200, changed.content
    after = schedules.get("report-acme")
    assert (after.cron, after.timezone) == ("0 18 * * *", "UTC") and after.revision > stored.revision
    assert changed.json()["revision"] == after.revision

    # The minute an operator gave the schedule stays; only the hour is the tenant's.
    schedules.set("report-acme", cron="30 18 * * *", by="ops")
    assert client.post(URL.format("acme"), {"hour": "6", "timezone": "UTC"}).status_code == 200
    assert schedules.get("report-acme").cron == "30 6 * * *"

    log = schedules.log("report-acme")
    assert [(c.op, c.by) for c in log] == [("add", "django"), ("set", "django"), ("set", "ops"), ("set", "django")]
    assert log[1].changes["cron"] == ["0 7 * * *", "0 18 * * *"]
    assert log[1].changes["options.timezone"] == ["Europe/Paris", "UTC"]

    other = client.post(URL.format("Beta_2"), {"hour": "0", "timezone": "UTC"})
    assert other.status_code == 200, other.content
    assert schedules.get("report-Beta_2").cron == "0 0 * * *"
    assert schedules.get("report-acme").cron == "30 6 * * *"


@pytest.mark.parametrize(
    ("tenant", "form", "says"),
    [
        ("acme.corp", {"hour": "7", "timezone": "UTC"}, "tenant"),
        ("acme%0A", {"hour": "7", "timezone": "UTC"}, "tenant"),
        ("ac%20me", {"hour": "7", "timezone": "UTC"}, "tenant"),
        ("%C3%A9cole", {"hour": "7", "timezone": "UTC"}, "tenant"),
        ("a" * 65, {"hour": "7", "timezone": "UTC"}, "tenant"),
        ("acme", {"hour": "24", "timezone": "UTC"}, "from 0 to 23"),
        ("acme", {"hour": "-1", "timezone": "UTC"}, "from 0 to 23"),
        ("acme", {"hour": "7.5", "timezone": "UTC"}, "from 0 to 23"),
        ("acme", {"hour": "\u0667", "timezone": "UTC"}, "from 0 to 23"),  # ARABIC-INDIC DIGIT SEVEN: int() reads it
        ("acme", {"hour": " 7", "timezone": "UTC"}, "from 0 to 23"),
        ("acme", {"timezone": "UTC"}, "from 0 to 23"),
        ("acme", {"hour": "7", "timezone": "Mars/Olympus"}, "timezone="),
        ("acme", {"hour": "7", "timezone": "utc"}, "timezone="),
        ("acme", {"hour": "7"}, "timezone="),
        ("acme", {"hour": "7", "timezone": "UTC", "revision": "one"}, "revision"),
    ],
)
def test_bad_input_is_refused_with_400_and_nothing_is_stored(
    site: tuple[Any, SyncSchedules], tenant: str, form: dict[str, str], says: str
) -> None:
    client, schedules = site
    refused = client.post(URL.format(tenant), form)
    assert refused.status_code == 400, refused.content
    assert says in refused.json()["error"], refused.json()
    assert schedules.list() == []


def test_bad_input_leaves_a_stored_schedule_as_it_was(site: tuple[Any, SyncSchedules]) -> None:
    client, schedules = site
    assert client.post(URL.format("acme"), {"hour": "7", "timezone": "UTC"}).status_code == 200
    before = schedules.get("report-acme")
    bad_zone = client.post(URL.format("acme"), {"hour": "8", "timezone": "Europe/Nowhere"})
    assert bad_zone.status_code == 400 and bad_zone.json()["field"] == "timezone", bad_zone.content
    assert client.post(URL.format("acme"), {"hour": "25", "timezone": "UTC"}).status_code == 400
    assert client.get(URL.format("acme.corp")).status_code == 400
    assert schedules.get("report-acme") == before
    assert len(schedules.log("report-acme")) == 1


def test_a_stale_revision_is_refused_with_409_and_nothing_changes(site: tuple[Any, SyncSchedules]) -> None:
    client, schedules = site
    first = client.post(URL.format("acme"), {"hour": "7", "timezone": "UTC"}).json()
    second = client.post(URL.format("acme"), {"hour": "9", "timezone": "UTC", "revision": str(first["revision"])})
    assert second.status_code == 200, second.content
    current = schedules.get("report-acme")

    stale = client.post(URL.format("acme"), {"hour": "11", "timezone": "UTC", "revision": str(first["revision"])})
    assert stale.status_code == 409, stale.content
    assert stale.json()["revision"] == current.revision == second.json()["revision"]
    assert schedules.get("report-acme") == current and current.cron == "0 9 * * *"
    assert len(schedules.log("report-acme")) == 2

    # A revision for a schedule that is gone (removed since the page read it) is stale too: nothing is created.
    schedules.remove("report-acme")
    gone = client.post(URL.format("acme"), {"hour": "11", "timezone": "UTC", "revision": str(current.revision)})
    assert gone.status_code == 409 and gone.json()["revision"] == 0, gone.content
    with pytest.raises(JobNotFoundError):
        schedules.get("report-acme")


def test_post_needs_the_csrf_token_and_by_names_the_signed_in_user(site: tuple[Any, SyncSchedules]) -> None:
    from django.test import Client, RequestFactory
    from tenants.views import report_schedule

    _, schedules = site
    guarded = Client(enforce_csrf_checks=True, SERVER_NAME="localhost")
    assert guarded.post(URL.format("acme"), {"hour": "7", "timezone": "UTC"}).status_code == 403
    assert schedules.list() == []

    request = RequestFactory(SERVER_NAME="localhost").post(URL.format("acme"), {"hour": "7", "timezone": "UTC"})
    request.user = SimpleNamespace(is_authenticated=True, get_username=lambda: "alice")
    assert report_schedule(request, "acme").status_code == 200
    assert schedules.get("report-acme").updated_by == "alice"
    assert [c.by for c in schedules.log("report-acme")] == ["alice"]
