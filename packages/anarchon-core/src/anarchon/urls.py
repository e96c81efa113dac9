"""Backend URLs: their scheme, the backend's own options in the query, and passwords kept out of sight.

Every backend reads its URL through these functions, so each refuses the same
mistakes with the same words:

* :func:`split_url` parses a URL and refuses one that is *malformed*: an
  unencoded ``#``, ``/``, ``?`` or ``@`` in a password cuts a URL short, and
  what follows the cut (part of the password) would otherwise be taken for a
  host, a port, a path or a fragment, and be echoed by the driver.
* :func:`read_url_options` takes the backend's own options (``prefix``,
  ``schema``, ``stream``…) out of the query, converted from text to the type
  the constructor expects; the constructor then checks them as it checks its
  arguments, so both routes share one check. Keys the driver reads stay in
  the URL; any other key is refused by name, with the list of accepted ones.
* :func:`redact_url` masks by parsing, not by pattern: a well-formed URL
  keeps its scheme, user, host and path with the password (or a lone token)
  replaced by ``***``; a malformed one is masked whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast
from urllib.parse import SplitResult, unquote_plus, urlsplit

__all__ = [
    "HIDDEN",
    "UrlOptions",
    "auto_or_integer",
    "boolean",
    "integer",
    "read_query",
    "read_url_options",
    "redact_url",
    "split_url",
    "text",
    "url_scheme",
]

T = TypeVar("T")

#: What stands in for a secret.
HIDDEN = "***"

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
#: Query keys whose values are credentials for some driver (``password``, ``sslpassword``, ``token``…).
_SECRET_KEYS = ("pass", "token", "secret", "key", "auth")
_FIX = (
    "percent-encode '#', '/', '?', '@' and ':' in the user name and password "
    "(%23, %2F, %3F, %40, %3A; urllib.parse.quote(password, safe='') does it)"
)


def url_scheme(url: str) -> str:
    """The scheme of ``scheme://…`` in lower case, or ``""`` when the text does not start that way."""
    scheme, sep, _ = url.partition("://")
    return scheme.lower() if sep and _SCHEME.fullmatch(scheme) else ""


def _port_problem(hostinfo: str) -> bool:
    """Whether a host list (``h``, ``h:1``, ``[::1]:1``, ``h1:1,h2:2``) has a port that is not a number."""
    for host in hostinfo.split(","):
        if host.startswith("["):
            _, bracket, rest = host.partition("]")
            if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
                return True
        elif ":" in host and not host.rpartition(":")[2].isdigit():
            return True
    return False


def _problem(url: str) -> tuple[SplitResult | None, str | None]:
    """The parsed URL, or the reason it is malformed (never quoting any of it)."""
    if not isinstance(url, str) or not url_scheme(url):
        return None, "it does not start with scheme://"
    try:
        parts = urlsplit(url)
    except ValueError:
        return None, "it cannot be parsed"
    if parts.fragment or url.endswith("#"):
        return None, "it holds a '#', which ends a URL (in a password it must be encoded)"
    if parts.netloc and any("@" in piece for piece in (parts.path, parts.query)):
        return None, "it holds an '@' after the host, so a password holds an unencoded '/' or '?'"
    if _port_problem(parts.netloc.rpartition("@")[2]):
        return None, "its port is not a number, so a password holds an unencoded '#', '/', '?' or '@'"
    return parts, None


def _join(parts: SplitResult) -> str:
    """``scheme://netloc/path?query`` again; unlike ``urlunsplit``, ``sqlite:///x`` keeps its slashes."""
    return f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")


def redact_url(url: str, *, bare_user_is_secret: bool = True) -> str:
    """The URL fit for logs, ``repr`` and error texts: no password, token or secret query value.

    A password becomes ``***`` (``redis://:***@cache:6379/0``); so does a
    user name that comes alone (``tls://***@host``: broker tokens and many
    services' API keys travel that way) unless ``bare_user_is_secret`` is
    false (PostgreSQL and AMQP user names). Query values of keys named like
    credentials (``password``, ``sslpassword``, ``token``…) are masked too.
    A malformed URL is masked whole (``redis://***``), since its parts cannot
    be told apart.
    """
    parts, problem = _problem(url)
    if parts is None or problem:
        scheme = url_scheme(url) if isinstance(url, str) else ""
        return f"{scheme}://{HIDDEN}" if scheme else HIDDEN
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        if colon:
            netloc = f"{user}:{HIDDEN}@{host}"
        elif bare_user_is_secret:
            netloc = f"{HIDDEN}@{host}"
    query = "&".join(
        f"{pair.partition('=')[0]}={HIDDEN}"
        if "=" in pair and any(s in unquote_plus(pair.partition("=")[0]).lower() for s in _SECRET_KEYS)
        else pair
        for pair in parts.query.split("&")
    )
    return _join(parts._replace(netloc=netloc, query=query if parts.query else ""))


def split_url(url: str, *, what: str) -> SplitResult:
    """Parse a backend URL, refusing a malformed one with a message that quotes none of it.

    ``what`` names the backend in the message (``"Redis"``).
    """
    parts, problem = _problem(url)
    if parts is None or problem:
        raise ValueError(f"the {what} URL {redact_url(url)} is malformed: {problem}; {_FIX}") from None
    return parts


# -- the backend's own options in the query ---------------------------------------------------

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def text(value: str) -> str:
    """A text option, as written (the constructor checks it)."""
    return value


def integer(value: str) -> int:
    """A whole number such as ``300000`` (no unit: the option's name says it)."""
    try:
        return int(value.replace("_", ""), 10)
    except ValueError:
        raise ValueError("must be an integer") from None


def auto_or_integer(value: str) -> int | str:
    """``auto`` (the backend decides, as ``min_replicas="auto"``) or a whole number."""
    return value if value == "auto" else integer(value)


def boolean(value: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``)."""
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ValueError("must be true or false")


Converter = Callable[[str], object]


@dataclass(frozen=True)
class UrlOptions:
    """A backend's own options read from its URL, and the URL left for the driver."""

    #: The URL without the backend's own keys: what the driver is given.
    url: str
    #: Each option found, converted to its type but not yet checked.
    values: Mapping[str, object]

    def pick(self, name: str, argument: T, default: T) -> T:
        """The option's value: from the URL when it is there, else the argument.

        An argument left at its default gives way to the URL; an argument set
        to something else that the URL contradicts is refused, so neither is
        dropped without a word.
        """
        if name not in self.values:
            return argument
        value = self.values[name]
        if argument != default and argument != value:
            raise ValueError(
                f"{name} is given twice, as {argument!r} (an argument) and as {value!r} (in the URL's query); "
                "keep one of them"
            )
        return cast(T, value)


def read_query(
    query: str, options: Mapping[str, Converter], *, driver_keys: Collection[str] = (), what: str
) -> tuple[dict[str, object], str]:
    """Split a raw query into the backend's options (converted) and the raw query left for the driver."""
    if "@" in query or "#" in query:
        raise ValueError(f"the {what} URL's query holds an '@' or a '#' (a password cut the URL short); {_FIX}")
    values: dict[str, object] = {}
    kept: list[str] = []
    seen: set[str] = set()
    for pair in filter(None, query.split("&")):
        raw_key, _, raw_value = pair.partition("=")
        key, value = unquote_plus(raw_key), unquote_plus(raw_value)
        if key in seen:
            raise ValueError(f"{key!r} appears twice in the {what} URL's query; keep one")
        seen.add(key)
        if key in options:
            try:
                values[key] = options[key](value)
            except ValueError as exc:
                raise ValueError(f"{key}={value!r} in the {what} URL's query {exc}") from None
        elif key in driver_keys:
            kept.append(pair)
        else:
            ours = ", ".join(sorted(options)) or "none"
            theirs = f"; the driver's: {', '.join(sorted(driver_keys))}" if driver_keys else ""
            raise ValueError(f"unknown option {key!r} in the {what} URL's query; accepted: anarchon's {ours}{theirs}")
    return values, "&".join(kept)


def read_url_options(
    url: str, options: Mapping[str, Converter], *, driver_keys: Collection[str] = (), what: str
) -> UrlOptions:
    """Check a backend URL and take the backend's own options out of its query.

    ``options`` maps each option the URL may set to the function converting
    its text (:func:`text`, :func:`integer`, :func:`boolean`); the
    constructor checks the converted value as it checks its argument.
    ``driver_keys`` are the query keys the driver reads; they stay in
    :attr:`UrlOptions.url`. Any other key raises ``ValueError`` naming it and
    every accepted key.
    """
    parts = split_url(url, what=what)
    values, kept = read_query(parts.query, options, driver_keys=driver_keys, what=what)
    return UrlOptions(url=_join(parts._replace(query=kept)), values=values)
