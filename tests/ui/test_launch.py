"""``ui.app.launch``: the app starts on a loaded machine, where Gradio's own second probe of
the page (3 s, no retry after a timeout) stopped it, and a page that fails stops the launch
with its status."""

from __future__ import annotations

import httpx
import pytest

from ui.app import launch


def tiny_demo():
    import gradio as gr

    with gr.Blocks() as demo:
        gr.Markdown("a tiny page")
    return demo


@pytest.fixture
def slow_probe(monkeypatch):
    """Gradio's page probe as it answers when the first page takes longer than its 3 s."""
    import gradio.networking

    monkeypatch.setattr(gradio.networking, "url_ok", lambda url: False)


@pytest.mark.slow
def test_gradio_alone_refuses_to_start_when_its_probe_times_out(slow_probe):
    demo = tiny_demo()
    try:
        with pytest.raises(ValueError, match="localhost is not accessible"):
            demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    finally:
        demo.close()


@pytest.mark.slow
def test_the_app_starts_and_its_page_answers_although_the_probe_timed_out(slow_probe):
    demo = tiny_demo()
    try:
        url = launch(demo, block=False, server_name="127.0.0.1", quiet=True)
        assert url == demo.local_url and url.startswith("http://127.0.0.1:")
        page = httpx.get(url, timeout=None)
        assert page.status_code == 200 and "a tiny page" in page.text
    finally:
        demo.close()


def _interrupted(url):
    raise KeyboardInterrupt


def _failing(url):
    return httpx.Response(500, text="boom in the page", request=httpx.Request("GET", url))


@pytest.mark.parametrize(
    "page, raised, match",
    [(_interrupted, KeyboardInterrupt, None), (_failing, RuntimeError, "answered 500: boom in")],
    ids=["ctrl-c while the page is awaited", "a page that answers 500"],
)
@pytest.mark.slow
def test_a_launch_stopped_at_the_page_says_why_and_closes_the_server(
    monkeypatch, page, raised, match
):
    real_get = httpx.get

    def get(url, **kwargs):
        if url.rstrip("/").count("/") == 2:  # the page itself, not the start-up events
            return page(url)
        return real_get(url, **kwargs)

    monkeypatch.setattr(httpx, "get", get)
    demo = tiny_demo()
    try:
        with pytest.raises(raised, match=match):
            launch(demo, block=False, server_name="127.0.0.1", quiet=True)
        assert not demo.is_running
    finally:
        demo.close()


@pytest.mark.slow
def test_blocking_serves_until_the_server_is_closed():
    import threading

    demo = tiny_demo()
    blocking = threading.Event()
    block_thread = demo.block_thread

    def block():  # the state waited for: launch has checked the page and now blocks
        blocking.set()
        block_thread()

    demo.block_thread = block
    served: list[str] = []
    thread = threading.Thread(
        target=lambda: served.append(launch(demo, server_name="127.0.0.1", quiet=True))
    )
    thread.start()
    try:
        while not blocking.wait(0.05):
            assert thread.is_alive(), "launch ended before it served"
        assert httpx.get(demo.local_url, timeout=None).status_code == 200
        assert thread.is_alive() and not served  # still serving
    finally:
        demo.close()
        thread.join()
    assert served == [demo.local_url]
