"""A run paused for its owner's review gives the device up once no page of its owner has
followed it for ``orphan_s`` (every page closed), not after the whole review timeout; a
page that follows keeps it; the visitors waiting are told why they wait."""

from __future__ import annotations

import threading
import time

import pytest

from refine.service.jobs import Job
from ui.line import paused_words


def paused(orphan_s: float) -> tuple[Job, list[str], threading.Thread]:
    stops: list[str] = []
    job = Job(lambda d, o: None, stops.append, True, "browser:a", 900.0, orphan_s)
    answers: list = []
    worker = threading.Thread(target=lambda: answers.append(job._review(1, "Add tea.", None)))
    worker.start()
    return job, stops, worker


@pytest.mark.slow
def test_a_review_with_no_page_following_stops_after_orphan_s():
    job, stops, worker = paused(0.3)
    began = time.monotonic()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - began < 5  # not the 900 s timeout
    assert job.stopped and stops == [job.stop_why]
    assert job.stop_why.startswith("stopped: its visitor left during the review")


@pytest.mark.slow
def test_a_page_that_follows_keeps_the_run_and_its_leaving_starts_the_count():
    job, stops, worker = paused(0.3)
    reader = job.updates(idle_s=0.05)
    next(reader)  # a page follows (its first idle tick)
    time.sleep(0.8)
    assert worker.is_alive() and not stops  # followed: still waiting for its owner
    words = paused_words(job)
    assert words.startswith("paused for ") and "waiting for its owner to review" in words
    assert "0.3 s" in words and "15 min into the review" in words
    reader.close()  # the page closed
    worker.join(10)
    assert not worker.is_alive() and job.stop_why.startswith("stopped: its visitor left")
