"""The gradio_client the app tests drive the launched app with, and the app's server
launched and closed around a test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def served(demo: Any, **options: Any) -> Iterator[str]:
    """``demo`` launched on this machine (``ui.app.launch``): its address, for the block;
    closed after it whatever happens (:func:`close_later`), so that no server is left."""
    from ui.app import launch

    url = launch(demo, block=False, server_name="127.0.0.1", quiet=True, **options)
    try:
        yield url
    finally:
        close_later(demo)


def close_later(demo: Any) -> None:
    """Close a launched app while the next test runs. Its server ends its serving loop at
    the loop's next 0.1 s tick and then waits a fixed 0.1 s (uvicorn's shutdown) before
    ``demo.close()`` returns: 0.12 s a close with nothing to do, 6 s of the 53 s the app
    tests took in one process. The session's end waits for every close handed on so
    (tests/leaks.py) before it looks for sockets left listening."""
    from tests.leaks import finish_later

    finish_later(demo.close, verbose=False)


def app_client(url: str, **options):
    """A quiet ``gradio_client.Client`` for an app served over plain HTTP on this machine.

    ``ssl_verify=False``: gradio_client opens a new httpx client for every file it
    downloads, and with verification on each one loads the CA bundle into a new SSL
    context (about 30 ms of CPU), which was 18 % of the app tests' CPU time, for a server
    that speaks no TLS.
    """
    from gradio_client import Client

    if not url.startswith("http://"):
        raise ValueError(f"app_client is for a local plain-HTTP app, not {url!r}")
    return Client(url, verbose=False, ssl_verify=False, **options)


# a rater's profile the Rate view's API takes (born, raised, residence, nationality,
# languages, age band, consent)
PROFILE = ("Iran", "Iran", "Iran", "Iran", "Persian, English", "25-34", True)
SLOTS = 8  # the Rate view's question slots (ui.views.rate.SLOTS)


def rate_begin(client, folder: str, rater: str, protocol: str | None = None):
    """The Rate view's Begin (the set's own protocol unless one is named)."""
    from ui.views.rate import OWN

    return client.predict(folder, protocol or OWN, rater, api_name="/rate_begin")


def rate_profile(client, folder: str, rater: str, profile=PROFILE):
    return client.predict(folder, rater, *profile, api_name="/rate_profile")


def rate_save(client, folder: str, rater: str, shown, answers: dict[int, Any]):
    """Save answers to what ``shown`` (the view's last outputs) shows: ``answers`` maps
    a slot to its (one choice, checkboxes, text, reason) values, or to a choice alone."""
    values: list[Any] = []
    for k in range(SLOTS):
        given = answers.get(k)
        if given is None:
            values += [None, [], "", ""]
        elif isinstance(given, tuple):
            values += list(given)
        else:
            values += [given, [], "", ""]
    return client.predict(folder, rater, shown[-2], shown[-1], *values, api_name="/rate_save")


# what the tests' runs ask unless a test says otherwise: the world's activity and country,
# every round run (a target FAITH of 1 and a drift of 2 are never reached); any other
# setting is the form's own default (the API's, by name), and no upload
START = {"act": "people eating food at home", "ctry": "Iran", "target": 1.0, "max_drift": 2.0}


def start_values(**values: Any) -> dict[str, Any]:
    """/start's inputs by name: :data:`START` with ``values`` over it."""
    return {**START, **values}


def start(client: Any, **values: Any) -> Any:
    """A run started through ``/start`` with its settings by name (``rounds=2``,
    ``paused=True``, ``caire_labels="Turkey"``: the names ``client.view_api()`` lists); the
    job (``.result()`` waits for the run's end, raising the app's refusal)."""
    return client.submit(api_name="/start", **start_values(**values))


def positional(client: Any, api_name: str, values: dict[str, Any]) -> list[Any]:
    """An endpoint's inputs in the order its API lists them (``values`` by name, the
    endpoint's defaults for the rest): what a raw HTTP call sends as ``data``."""
    info = client.view_api(return_format="dict", print_info=False)
    params = info["named_endpoints"][api_name]["parameters"]
    return [values.get(p["parameter_name"], p.get("parameter_default")) for p in params]
