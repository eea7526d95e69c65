"""The paper's data and photos from a hostile mirror, and photo searches from a hostile
Commons: no download is larger than its cap or longer than its time, only http(s) is
followed, one bad row never stops the others, and what is not what its kind needs is
never kept (refine.io.download, refine.io.images)."""

from __future__ import annotations

import csv
import json
import threading
import time
import tracemalloc

import pytest

from refine.cli import main
from refine.evaluate.paper_data import (
    DESCRIPTORS,
    PHOTO_MANIFEST,
    fetch_ahead,
)
from refine.evaluate.paper_photos import fetch_photos
from refine.evaluate.references import load_pack
from refine.io.download import DownloadError, DownloadLimits, download
from refine.io.images import MAX_PIXELS, ImageError, declared_size
from tests.e2e.test_paper_data import png, upstream
from tests.fakes.file_server import FileServer


def bomb_png(width: int, height: int) -> bytes:
    """A PNG of about a hundred bytes that declares ``width`` x ``height`` pixels: its
    one row of compressed data stands for all of them."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit grey
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


@pytest.mark.slow
def test_a_download_is_capped_in_size_and_time_and_only_http(tmp_path):
    """An endless body stops at the cap with memory to match; a drip stops at the time
    limit; a cut body, a control character, file:// and a redirect to it each end in one
    DownloadError saying what came back."""
    (tmp_path / "ok.txt").write_text("fine")
    with FileServer(
        tmp_path,
        endless={"zeros"},
        cut={"cut.png"},
        drip={"drip": 0.1},
        drip_cut={"slow-cut": (0.05, 8)},  # 0.4 s of bytes, then the connection closes
        moved={"to-file": "file:///etc/hostname"},
    ) as server:
        assert download(f"{server.url}/ok.txt") == b"fine"
        tracemalloc.start()
        try:
            with pytest.raises(DownloadError, match="too large: over the cap of 2 MB"):
                download(f"{server.url}/zeros", max_mb=2)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8e6, peak  # the cap, not the body: 4 GB were offered
        assert server.sent["zeros"] < 200e6
        began = time.monotonic()
        with pytest.raises(DownloadError, match="too slow"):
            download(f"{server.url}/drip", timeout_s=0.5)
        assert time.monotonic() - began < 5
        # the time limit holds for a file's tries together: a try cut short after 0.4 s
        # would be worth another, but its wait (1 s) would end past the file's 0.6 s, so
        # none is made (each try had its own limit: three tries, 1.2 s and more)
        with pytest.raises(DownloadError, match="cut short"):
            download(f"{server.url}/slow-cut", timeout_s=0.6, sleep=lambda s: None)
        assert server.requests.count("slow-cut") == 1  # the count, not a time: load-proof
        with pytest.raises(DownloadError, match="cut short"):
            download(f"{server.url}/cut.png", tries=2, sleep=lambda s: None)
        assert server.requests.count("cut.png") == 2  # a cut body is worth another try
        with pytest.raises(DownloadError, match="only http and https .* not file:"):
            download(f"{server.url}/to-file")
        with pytest.raises(DownloadError, match="not a valid address|control"):
            download(f"{server.url}/a\x01b.png")
    for address in ("file:///dev/zero", "ftp://example.org/a", "data:,x", "/etc/passwd"):
        with pytest.raises(DownloadError, match="only http and https"):
            download(address)


def test_images_are_checked_by_their_declared_size_before_decoding(monkeypatch):
    """A hundred-byte PNG declaring 12000 x 12000 is refused from its header, with no
    pixel decoded; the stated limit is the one applied (PIL itself refuses only twice
    it)."""
    from PIL import ImageFile

    def decoded(self):
        raise AssertionError("pixels were decoded")

    bomb = bomb_png(12000, 12000)
    assert len(bomb) < 200
    monkeypatch.setattr(ImageFile.ImageFile, "load", decoded)
    with pytest.raises(ImageError, match="12000 x 12000 = 144,000,000, over the limit of"):
        declared_size(bomb)
    side = int(MAX_PIXELS**0.5)
    assert declared_size(bomb_png(side, side)) == (side, side)
    with pytest.raises(ImageError, match="over the limit"):
        declared_size(bomb_png(side + 1, side + 1))


@pytest.mark.slow
def test_a_hostile_mirror_ends_in_a_report_with_the_good_photos_kept(tmp_path, monkeypatch):
    """Every hostile row of the manifest is a dead link with its reason; the good photos
    are kept; photos.json and report.json are written; a descriptors file that is an HTML
    page is not kept, so a later fetch from a good mirror works; the exit codes say it."""
    from refine.evaluate import paper_data, paper_photos

    # one try each (the stand-in's drip sleeps for real: time.sleep is not replaced)
    monkeypatch.setattr(paper_photos, "TRIES", 1)
    monkeypatch.setattr(paper_data, "TRIES", 1)
    repo = tmp_path / "repo"
    upstream(repo, countries=("Brazil", "Iran"))
    good_iran = (repo / DESCRIPTORS.format(slug="iran")).read_bytes()
    (repo / DESCRIPTORS.format(slug="iran")).write_text("<html>rate limited</html>")
    web = repo / "web"
    web.mkdir()
    (web / "good.png").write_bytes(png((200, 0, 0)))
    (web / "also.png").write_bytes(png((0, 200, 0)))
    (web / "bomb.png").write_bytes(bomb_png(12000, 12000))
    (tmp_path / "secret.png").write_bytes(png((1, 2, 3)))
    hostile = FileServer(
        repo,
        endless={"web/zeros.png"},
        cut={"web/cut.png"},
        drip={"web/drip.png": 0.1},
        moved={"web/to-file.png": f"file://{tmp_path}/secret.png"},
    )
    with hostile as server:
        urls = {
            "good": f"{server.url}/web/good.png",
            "also": f"{server.url}/web/also.png",
            "zeros": f"{server.url}/web/zeros.png",
            "cut": f"{server.url}/web/cut.png",
            "drip": f"{server.url}/web/drip.png",
            "to-file": f"{server.url}/web/to-file.png",
            "bomb": f"{server.url}/web/bomb.png",
            "local": f"file://{tmp_path}/secret.png",
            "control": f"{server.url}/web/a\x01b.png",
        }
        with (repo / PHOTO_MANIFEST).open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["file_path", "image_url", "country", "activity", "sub_activity"])
            for url in urls.values():
                w.writerow(["x.png", url, "BRAZIL", "eating", "eating"])
        said: list[str] = []
        limits = DownloadLimits(max_mb=1, timeout_s=1.0, deadline=time.monotonic() + 120)
        done = fetch_ahead(
            tmp_path / "d", ["Brazil", "Iran"], server.url, said.append, True, limits
        )
    assert done.countries == ["Brazil"]  # Iran's file was a page of HTML
    ((url, why),) = done.failed.items()
    assert url.endswith(DESCRIPTORS.format(slug="iran")) and "not JSON" in why
    assert not (done.folder / DESCRIPTORS.format(slug="iran")).exists()
    photos = done.photos
    assert photos.downloaded == 2
    reasons = {d["url"]: d["reason"] for d in photos.dead}
    assert "too large" in reasons[urls["zeros"]]
    assert "cut short" in reasons[urls["cut"]]
    assert "too slow" in reasons[urls["drip"]]
    assert "not file:" in reasons[urls["to-file"]] and "not file:" in reasons[urls["local"]]
    assert "12000 x 12000" in reasons[urls["bomb"]]
    assert "valid address" in reasons[urls["control"]] or "control" in reasons[urls["control"]]
    assert len(reasons) == 7
    kept = json.loads((photos.folder / "photos.json").read_text())["files"]
    assert sorted(m["url"] for m in kept.values()) == sorted([urls["good"], urls["also"]])
    report = json.loads((photos.folder / "report.json").read_text())
    assert len(report["dead"]) == 7 and all(d["reason"] for d in report["dead"])
    for file in photos.folder.rglob("*"):
        assert not file.is_file() or file.read_bytes() != (tmp_path / "secret.png").read_bytes()
    # a good mirror later: Iran's descriptors are fetched, as nothing bad was kept
    (repo / DESCRIPTORS.format(slug="iran")).write_bytes(good_iran)
    with FileServer(repo) as good:
        again = fetch_ahead(tmp_path / "d", ["Brazil", "Iran"], good.url)
    assert again.countries == ["Brazil", "Iran"] and not again.failed
    # the exit codes: 3 when only photos were not fetched, 1 when a data file was not
    (repo / DESCRIPTORS.format(slug="iran")).write_text("[]")
    with FileServer(repo) as server:
        base = ["data", "fetch", "ahead", "--from", server.url, "--data-dir"]
        for folder, country, code in (("e", "Brazil", 0), ("f", "Brazil,Iran", 1)):
            with pytest.raises(SystemExit) as ended:
                main([*base, str(tmp_path / folder), "--countries", country])
            assert ended.value.code in ((0, None) if code == 0 else (code,))


def test_a_passed_deadline_leaves_the_rest_reported_not_fetched(tmp_path):
    manifest = tmp_path / "manifest.csv"
    with manifest.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["file_path", "image_url", "country", "activity", "sub_activity"])
        for k in range(3):
            w.writerow(["x.png", f"http://127.0.0.1:9/{k}.png", "BRAZIL", "eating", "eating"])
    done = fetch_photos(
        tmp_path / "photos",
        manifest,
        ["Brazil"],
        load_pack(),
        "c0ffee",
        limits=DownloadLimits(deadline=time.monotonic() - 1),
    )
    assert done.downloaded == 0 and len(done.dead) == 3
    assert {d["reason"] for d in done.dead} == {"not started: the time allowed ran out"}
    assert (tmp_path / "photos" / "photos.json").is_file()
    assert len(json.loads((tmp_path / "photos" / "report.json").read_text())["dead"]) == 3


def test_offline_the_fetch_says_so_after_its_first_file(tmp_path, monkeypatch):
    """No network (nothing listens): one line after the first file's tries, not a minute
    of every file's."""
    from refine.evaluate import paper_data
    from refine.evaluate.paper_data import FetchError

    waits: list[float] = []
    # time.sleep is the time module's, which every thread of this process shares (a
    # server a module left, a finishing thread): this thread's waits are recorded, the
    # others' slept (another's 0.1 s was once taken for the fetch's)
    me, real = threading.get_ident(), time.sleep
    monkeypatch.setattr(
        paper_data.time,
        "sleep",
        lambda s: waits.append(s) if threading.get_ident() == me else real(s),
    )
    with pytest.raises(FetchError, match="cannot reach http://127.0.0.1:9 .*--from"):
        fetch_ahead(tmp_path / "d", ["Brazil"], "http://127.0.0.1:9")
    assert waits == [1.0, 2.0]  # the first file's three tries, and no other file's
