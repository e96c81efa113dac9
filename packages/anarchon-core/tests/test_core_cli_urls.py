"""anarchon.urls: what --backend and ANARCHON_BACKEND go through, masking by parsing and options in the query."""

from __future__ import annotations

import traceback

import pytest

from anarchon.urls import boolean, integer, read_url_options, redact_url, split_url, text, url_scheme

SECRET = "s3cr3t"


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}#x@cache:6379/0",  # '#' ends the URL early: the tail is a "fragment"
        f"redis://user:{SECRET}#x@cache:6379/0",
        "redis://user:12#34@cache:6379/0",  # digits before the '#' even parse as a port
        f"redis://:{SECRET}/x@cache:6379/0",  # '/' starts the path inside the password
        "redis://:12/34@cache:6379/0",
        f"postgresql://app:{SECRET}?x@db/app",  # '?' starts the query inside the password
        "postgresql://app:12?34@db/app",
        f"amqp://guest:{SECRET}/x@rabbit:5672/",
    ],
)
def test_a_malformed_url_is_masked_whole_and_refused_without_quoting_it(url: str) -> None:
    password = url.split("://", 1)[1].rpartition("@")[0].partition(":")[2]
    tail = url.rpartition("@")[0][-1] + "@" + url.rpartition("@")[2]  # what a cut URL shows after the cut
    assert redact_url(url) == f"{url_scheme(url)}://***"
    with pytest.raises(ValueError, match="percent-encode") as info:
        split_url(url, what="Test")
    shown = "".join(traceback.format_exception(info.value))
    assert password not in shown and tail not in shown and SECRET not in shown
    assert info.value.__context__ is None or info.value.__suppress_context__


def test_a_well_formed_url_keeps_everything_but_the_secrets() -> None:
    assert redact_url(f"redis://:{SECRET}@cache:6379/0") == "redis://:***@cache:6379/0"
    assert (
        redact_url("redis://user:p%23ss@cache:6379/0?socket_timeout=3")
        == "redis://user:***@cache:6379/0?socket_timeout=3"
    )
    assert redact_url("postgresql://u:p@h1:5432,h2:5433/db?sslpassword=x&schema=a") == (
        "postgresql://u:***@h1:5432,h2:5433/db?sslpassword=***&schema=a"
    )
    assert redact_url(f"tls://{SECRET}@broker:4222") == "tls://***@broker:4222"  # a lone user may be a token
    assert redact_url("postgresql://app@db/app", bare_user_is_secret=False) == "postgresql://app@db/app"
    assert redact_url("sqlite:///data/jobs.sqlite3") == "sqlite:///data/jobs.sqlite3"
    assert redact_url("redis://[::1]:6379/0") == "redis://[::1]:6379/0"


def test_text_that_is_not_scheme_colon_slash_slash_is_masked_whole() -> None:
    assert redact_url(f"{SECRET}@host") == "***"
    assert redact_url(f"pass:{SECRET}@host") == "***"
    assert url_scheme(f"pass:{SECRET}@host") == ""


def test_options_come_out_of_the_query_converted_and_the_driver_keeps_its_keys() -> None:
    found = read_url_options(
        "redis://h/0?prefix=billing:&socket_timeout=3&sweep_ms=1_000&cluster=yes",
        {"prefix": text, "sweep_ms": integer, "cluster": boolean},
        driver_keys={"socket_timeout"},
        what="Redis",
    )
    assert found.url == "redis://h/0?socket_timeout=3"
    assert found.values == {"prefix": "billing:", "sweep_ms": 1000, "cluster": True}
    assert found.pick("prefix", "cron:", "cron:") == "billing:"  # the default gives way to the URL
    assert found.pick("prefix", "billing:", "cron:") == "billing:"  # the same value twice is fine
    with pytest.raises(ValueError, match="prefix is given twice"):
        found.pick("prefix", "other:", "cron:")
    assert found.pick("absent", 5, 5) == 5


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("prefx=a", r"unknown option 'prefx' in the Redis URL's query; accepted: anarchon's prefix, sweep_ms; "),
        ("prefix=a&prefix=b", "'prefix' appears twice"),
        ("sweep_ms=soon", r"sweep_ms='soon' in the Redis URL's query must be an integer"),
        ("socket_timeout=1&socket_timeout=2", "'socket_timeout' appears twice"),
    ],
)
def test_bad_queries_are_refused_by_name(query: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        read_url_options(
            f"redis://h/0?{query}", {"prefix": text, "sweep_ms": integer}, driver_keys={"socket_timeout"}, what="Redis"
        )
    if "unknown" in message:
        assert "the driver's: socket_timeout" in str(info.value)


def test_boolean_options_take_the_usual_words() -> None:
    assert [boolean(v) for v in ("true", "ON", "1", "no", "False", "0")] == [True, True, True, False, False, False]
    with pytest.raises(ValueError, match="true or false"):
        boolean("maybe")
