"""The gradio_client the app tests drive the launched app with."""

from __future__ import annotations


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
