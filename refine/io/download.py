"""Downloads from addresses the toolkit does not control (a paper's mirror, the photos'
third-party hosts, Wikimedia Commons), made so that no answer can hurt the machine.

* Only ``http`` and ``https`` are followed, redirects included: a ``file://``, ``ftp://``
  or ``data:`` address, or a redirect to one, is refused before anything is read.
* The body is streamed with a size cap (:data:`MAX_MB` by default): a declared length over
  it is refused before the body is read, and a body that grows past it is cut off there.
* A time limit per file bounds the whole transfer, all its tries together, not each read
  or each try: a server that answers one byte a second is given up after ``timeout_s``.
  A ``deadline`` (``time.monotonic()`` seconds) bounds a whole fetch: a download that
  would start after it is not started, and one running is cut off at it.
* Every way a download can fail (an HTTP error, a cut body, an address with a control
  character, a refused connection, the limits above) ends in one :class:`DownloadError`
  whose message says what came back; a network error or a server error (5xx, 429) is tried
  again ``tries`` times, waiting 1 s, then 2 s (``sleep``).
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

MAX_MB = 50.0  # default size cap of one downloaded file
TIMEOUT_S = 120.0  # default time limit of one file's whole transfer
TRIES = 3
SCHEMES = ("http", "https")
_CHUNK = 1 << 16


@dataclass(frozen=True)
class DownloadLimits:
    """What each download of a fetch may take: a size cap, a time limit per file, and
    the whole fetch's deadline (``time.monotonic()`` seconds, or None)."""

    max_mb: float = MAX_MB
    timeout_s: float = TIMEOUT_S
    deadline: float | None = None


class DownloadError(OSError):
    """A download that failed; ``retry``: whether trying again could help."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry

    def __str__(self) -> str:
        return str(self.args[0])


def check_address(url: str) -> None:
    """Nothing for an ``http(s)`` address with a host; else a DownloadError."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as err:
        raise DownloadError(f"not a web address ({err})") from None
    if parts.scheme.lower() not in SCHEMES or not parts.netloc:
        shown = (parts.scheme or "no scheme") + ":"
        raise DownloadError(f"only http and https addresses are fetched, not {shown}")


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirect handling, refusing a redirect to anything but http(s)."""

    def http_error_302(self, req, fp, code, msg, headers):  # noqa: ANN001
        location = headers.get("location") or headers.get("uri") or ""
        try:
            check_address(urllib.parse.urljoin(req.full_url, location))
        except DownloadError as err:
            raise DownloadError(f"redirected, but {err}") from None
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _opener() -> urllib.request.OpenerDirector:
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        _Redirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def _mb(n: float) -> str:
    return f"{n / 1e6:g} MB"


def _once(url: str, headers: dict[str, str], max_bytes: int, until: float) -> bytes:
    left = until - time.monotonic()
    if left <= 0:
        raise DownloadError("not started: the time allowed ran out")
    request = urllib.request.Request(url, headers=headers)
    try:
        with _opener().open(request, timeout=min(left, 30.0)) as answer:
            declared = answer.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise DownloadError(
                    f"too large: {_mb(int(declared))} declared, over the cap of {_mb(max_bytes)}"
                )
            parts, size = [], 0
            while True:
                chunk = answer.read1(_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise DownloadError(f"too large: over the cap of {_mb(max_bytes)}")
                if time.monotonic() > until:
                    raise DownloadError(
                        f"too slow: {_mb(size)} in the time allowed, not the whole file",
                        retry=False,
                    )
                parts.append(chunk)
            if declared and declared.isdigit() and size < int(declared):
                # read1 ends quietly where a closed connection cut the body
                raise DownloadError(
                    f"the body was cut short ({size} of {declared} bytes read)", retry=True
                )
            return b"".join(parts)
    except DownloadError:
        raise
    except urllib.error.HTTPError as err:
        retry = err.code >= 500 or err.code == 429
        raise DownloadError(f"HTTP {err.code} {err.reason}", retry=retry) from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, DownloadError):  # a refused redirect
            raise reason from None
        raise DownloadError(f"cannot connect: {reason}", retry=True) from None
    except http.client.IncompleteRead as err:
        raise DownloadError(
            f"the body was cut short ({len(err.partial)} bytes read)", retry=True
        ) from None
    except http.client.InvalidURL as err:
        raise DownloadError(f"not a valid address ({err})") from None
    except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
        raise DownloadError(f"{type(err).__name__}: {err}", retry=True) from None
    except (ValueError, OSError) as err:
        raise DownloadError(f"{type(err).__name__}: {err}") from None


def download(
    url: str,
    *,
    max_mb: float = MAX_MB,
    timeout_s: float = TIMEOUT_S,
    deadline: float | None = None,
    headers: dict[str, str] | None = None,
    tries: int = TRIES,
    sleep: Callable[[float], None] = time.sleep,
) -> bytes:
    """The body of ``url`` (see the module docstring), or a DownloadError saying why not."""
    check_address(url)
    max_bytes = int(max_mb * 1e6)
    # the file's time limit holds for all its tries together: a server that drips bytes and
    # then drops the connection held one photo for 3 x the limit when each try had its own
    until = time.monotonic() + timeout_s
    if deadline is not None:
        until = min(until, deadline)
    for attempt in range(tries):
        try:
            return _once(url, dict(headers or {}), max_bytes, until)
        except DownloadError as err:
            last = attempt == tries - 1
            if not err.retry or last:
                raise
            wait = 2.0**attempt
            if time.monotonic() + wait >= until:
                raise
        sleep(wait)
    raise AssertionError("unreachable")
