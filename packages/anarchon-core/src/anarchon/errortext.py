"""One error text every backend can store, made from any exception.

A run's ``error`` is ``"TypeName: message"``. The message is the user's: it
may hold NUL (PostgreSQL ``text`` refuses it), a lone surrogate such as an
f-string of an undecodable file name gives (no UTF-8 encoder takes it:
PostgreSQL, SQLite, every JSON-over-bytes store), megabytes (a broker's message
is often 1 MB at most), or an ``__str__`` that raises. :func:`error_text` turns
all of that into a bounded, printable, valid-UTF-8 text and never raises, so
recording the run can never be what fails. Backends pass a stored text
through :func:`clean_text` as well (defence in depth: a third party's
scheduler, or a record read back, may not have gone through here).
"""

from __future__ import annotations

__all__ = ["ERROR_TEXT_LIMIT", "clean_text", "error_text"]

#: Characters kept of an error text: a traceback's last line, not a log.
ERROR_TEXT_LIMIT = 2000
_ELLIPSIS = "..."


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def clean_text(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``text`` with NUL, other C0 controls but tab and newline, and lone surrogates escaped, cut to ``limit``.

    The result encodes as strict UTF-8 and has at most ``limit`` characters
    (``...`` marks a cut). ``limit`` below 4 still leaves the marker.
    """
    if not isinstance(text, str):
        text = _safe_str(text)
    out: list[str] = []
    size = 0
    bound = max(limit, len(_ELLIPSIS))
    for ch in text:
        code = ord(ch)
        piece = _escape(ch) if (code < 0x20 and ch not in "\t\n") or 0xD800 <= code <= 0xDFFF or code == 0x7F else ch
        if size + len(piece) > bound:
            while out and size > bound - len(_ELLIPSIS):
                size -= len(out.pop())
            out.append(_ELLIPSIS)
            return "".join(out)
        out.append(piece)
        size += len(piece)
    return "".join(out)


def _safe_str(value: object) -> str:
    try:
        return str(value)
    except BaseException as exc:
        try:
            return f"<unprintable {type(value).__name__}: str() raised {type(exc).__name__}>"
        except BaseException:
            return "<unprintable>"


def error_text(exc: BaseException, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``"TypeName: message"`` of ``exc`` (``"TypeName"`` alone for an empty message), safe to store anywhere.

    Never raises: an ``__str__`` that raises (anything, even ``SystemExit``)
    gives ``"TypeName: <unprintable TypeName: str() raised ...>"``.
    """
    try:
        name = type(exc).__name__
    except BaseException:
        name = "Exception"
    message = _safe_str(exc)
    return clean_text(f"{name}: {message}" if message else name, limit)
