"""Quotas of a shared demo: runs per visitor and per address per hour, calls per day, a
message saying when to come back; through gradio_client as visitors meet them."""

from __future__ import annotations

import json

import pytest

from refine.service import RunService
from tests.e2e.test_cli_run import cli
from tests.ui.clients import served, start
from tests.ui.test_app import _rounds_on_record
from ui.app import build_app
from ui.quotas import LEDGER, QuotaExceeded, Quotas, client_address


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_runs_per_hour_per_visitor_and_address_with_when_to_come_back(tmp_path):
    clock = Clock(1_700_000_000.0)  # 22:13:20 UTC
    q = Quotas(tmp_path, runs_per_hour=2, clock=clock).check()
    q.check_start("browser:a", "10.0.0.1")
    assert q.record_start("browser:a", "10.0.0.1") == 1
    clock.t += 600
    q.record_start("browser:a", "10.0.0.1")
    with pytest.raises(QuotaExceeded) as refused:
        q.check_start("browser:a", "10.0.0.9")
    # the first start leaves the hour at 23:13:20, 50 minutes from now
    assert str(refused.value) == (
        "you have started 2 run(s) in the last hour (this demo allows 2); you can start "
        "again at 23:13 UTC (in 50 minutes)"
    )
    # a new token from the same address is still counted; another visitor elsewhere is not
    with pytest.raises(QuotaExceeded, match="your address has started 2"):
        q.check_start("browser:new", "10.0.0.1")
    q.check_start("browser:b", "10.0.0.2")
    # a restart keeps the counts (the ledger is on disk, hashed)
    again = Quotas(tmp_path, runs_per_hour=2, clock=clock)
    with pytest.raises(QuotaExceeded):
        again.check_start("browser:a", None)
    ledger = (tmp_path / LEDGER).read_text()
    assert "browser:a" not in ledger and "10.0.0.1" not in ledger
    clock.t += 3001  # the first start has left the hour
    q.check_start("browser:a", "10.0.0.1")
    # a line cut by a crash is skipped, the rest still counts
    with open(tmp_path / LEDGER, "a") as fh:
        fh.write('{"t": 17')
    assert q.usage()[next(iter(q.usage()))]["runs_day"] == 2
    with pytest.raises(ValueError, match="--runs-per-visitor-per-hour: a whole number"):
        Quotas(tmp_path, runs_per_hour=0).check()


def test_the_daily_allowance_of_calls(tmp_path):
    clock = Clock(1_700_000_000.0)
    q = Quotas(tmp_path, daily_calls=100, clock=clock)
    q.record_start("browser:a", None)
    q.spent("browser:a", 60)
    q.check_start("browser:b", None)
    q.spent("browser:b", 40)
    with pytest.raises(QuotaExceeded) as refused:
        q.check_start("browser:c", None)
    assert str(refused.value) == (
        "this demo's daily allowance of 100 model calls is spent (100 used); it renews at "
        "00:00 UTC (in 107 minutes)"
    )
    clock.t += 2 * 3600  # past midnight UTC
    q.check_start("browser:c", None)
    usage = Quotas(tmp_path, clock=Clock(1_700_000_000.0)).usage()
    assert sorted(r["calls_today"] for r in usage.values()) == [40, 60]


def test_starts_together_are_reserved_one_at_a_time(tmp_path):
    """Six visitors from one address start at once (runs checked at admission, counted
    only later, let all six through: 120 calls on a day's 60): exactly the hour's 2 are
    reserved; a run's most calls are held against the day's allowance from admission, so
    visitors from other addresses get what is left, each run held to its share; a
    reservation whose run never starts is let go, and a run's calls are settled as made."""
    import threading

    clock = Clock(1_700_000_000.0)
    q = Quotas(tmp_path, runs_per_hour=2, daily_calls=60, clock=clock).check()
    got: list = []
    gate = threading.Barrier(6)

    def start(k: int) -> None:
        gate.wait()
        try:
            got.append(q.reserve(f"browser:{k}", "10.0.0.1", 20))
        except QuotaExceeded as err:
            got.append(err)

    threads = [threading.Thread(target=start, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    held = [r for r in got if not isinstance(r, QuotaExceeded)]
    assert len(held) == 2 and [r.calls for r in held] == [20, 20]
    assert sum("your address has started 2 run(s)" in str(e) for e in got) == 4
    # elsewhere: 20 of the day's 60 are left unheld, then none
    third = q.reserve("browser:x", "10.0.0.2", 50)
    assert third.calls == 20  # held to what is left
    with pytest.raises(QuotaExceeded, match=r"spent \(0 used, 60 held by runs under way\)"):
        q.reserve("browser:y", "10.0.0.3", 20)
    q.release(third)  # its run never started: the hold goes, no start is written
    assert q.usage() == {}
    assert q.started(held[0]) == 1
    q.settle(held[0], 12)  # the run made 12 calls: 8 of its 20 come back
    q.settle(held[1], 0)
    assert q.reserve("browser:z", "10.0.0.4", 60).calls == 48
    assert [r["calls_today"] for r in q.usage().values()] == [12]


def test_the_forwarded_address_is_read_only_behind_a_trusted_proxy():
    class Request:
        headers = {"x-forwarded-for": "6.6.6.6, 10.0.0.7"}

        class client:  # noqa: N801
            host = "172.17.0.1"

    assert client_address(Request()) == "172.17.0.1"
    # the proxy's own entry is the last one: what a client forged comes before it
    assert client_address(Request(), trust_proxy=True) == "10.0.0.7"
    assert client_address(None) is None


@pytest.fixture
def quota_app(world, backends, options, tmp_path):
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "quotas", quotas=Quotas(tmp_path, runs_per_hour=1), trust_proxy=True)
    with served(demo) as url:
        yield url, tmp_path, service
    job = service.job
    if job is not None and service.busy:  # a run a failed test left going
        job.stop()
        job.join(60)


@pytest.mark.slow
def test_a_visitor_over_quota_is_refused_and_another_is_not(quota_app):
    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client

    url, out, _ = quota_app

    def visitor(address: str):  # a new client: a new visitor, from this address
        return app_client(url, headers={"X-Forwarded-For": address})

    first = visitor("10.0.0.1")
    assert start(first, rounds=0).result()[0] == "finished"
    with pytest.raises(AppError, match=r"you have started 1 run\(s\) in the last hour"):
        start(first, rounds=0).result()
    # another visitor from another address may start
    assert start(visitor("10.0.0.2"), rounds=0).result()[0] == "finished"
    # a new visitor (a cleared browser) from the first address is still counted
    with pytest.raises(AppError, match="your address has started 1 run"):
        start(visitor("10.0.0.1"), rounds=0).result()
    # the operator's view: two visitors, one run each, their calls counted
    done = cli("app-usage", "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    assert sorted(r["runs_hour"] for r in table.values()) == [1, 1]
    assert all(r["calls_today"] > 0 for r in table.values())
    text = cli("app-usage", "--out", out).stdout
    assert "2 visitor(s)" in text and "browser:" not in text and "session:" not in text
    missing = cli("app-usage", "--out", out / "nowhere")
    assert missing.returncode == 2 and "holds no app usage yet" in missing.stderr


def test_refine_app_sets_a_modest_quota_when_it_listens_beyond_this_machine(monkeypatch, tmp_path):
    import ui.app

    seen = {}
    monkeypatch.setattr(ui.app, "serve", lambda *a, **kw: seen.update(kw))
    base = ["app", "--profile", "gemini", "--out", tmp_path]
    for extra, expected in (
        ([], None),
        (["--host", "0.0.0.0"], 6),
        (["--share"], 6),
        (["--host", "0.0.0.0", "--runs-per-visitor-per-hour", "0"], None),
        (["--runs-per-visitor-per-hour", "3", "--daily-calls", "900"], 3),
    ):
        seen.clear()
        assert cli(*base, *extra).returncode == 0
        assert seen["quotas"].runs_per_hour == expected, extra
    assert seen["quotas"].daily_calls == 900 and seen["trust_proxy"] is False
    bad = cli(*base, "--daily-calls", "0")
    assert bad.returncode == 2 and "--daily-calls" in bad.stderr


@pytest.mark.slow
def test_a_run_its_client_left_is_counted_whole_and_the_next_start_waits_for_it(quota_app, world):
    """A run goes on when its client stops following it (a closed page, a cancel): its
    model calls are counted when it ends, not when the client left, and another
    visitor's start waits for it, saying so, then runs."""
    import time

    from tests.ui.clients import app_client

    url, out, service = quota_app
    world.edit_delay_s = 0.5
    first = app_client(url, headers={"X-Forwarded-For": "10.0.0.1"})
    left = start(first, rounds=3, candidates=1)
    deadline = time.monotonic() + 120
    while not _rounds_on_record(service):
        assert time.monotonic() < deadline, "round 0 never landed"
        time.sleep(0.05)
    left.cancel()
    first_dir = service.job.run_dir
    calls_when_left = service.open(first_dir).model_calls
    second = app_client(url, headers={"X-Forwarded-For": "10.0.0.2"})
    queued = start(second, rounds=0)
    queued.result(timeout=300)
    stages = [o[0] for o in queued.outputs()]
    said = "waiting: 1 run ahead of yours (one in progress: round "
    assert any(s.startswith(said) and s.endswith("yours starts when it ends") for s in stages)
    assert stages[-1] == "finished"
    made = service.open(first_dir)
    assert made.status == "finished" and not made.stop_reason.startswith("stopped")
    assert made.model_calls > calls_when_left  # it went on after its client left
    second_run = service.open(queued.outputs()[-1][7])
    calls = sorted(r["calls_today"] for r in Quotas(out).usage().values())
    assert calls == sorted([made.model_calls, second_run.model_calls]), calls


def test_the_ledger_hashes_are_salted_with_a_secret_kept_beside_it(tmp_path):
    """An address's hash cannot be found by trying addresses without the salt: the one a
    start records is none of 127.0.0.0/16's unsalted hashes. The salt is made once,
    readable by its owner only, and a restart reads it again, so the counts go on."""
    import hashlib
    import stat

    from ui.private import private
    from ui.quotas import SALT, hashed

    q = Quotas(tmp_path, runs_per_hour=1).check()
    q.record_start("browser:a", "127.0.0.1")
    (entry,) = [json.loads(x) for x in (tmp_path / LEDGER).read_text().splitlines()]
    unsalted = {
        hashlib.sha256(f"refine-address\x00127.0.{a}.{b}".encode()).hexdigest()[:16]
        for a in range(256)
        for b in range(256)
    }
    assert entry["address"] not in unsalted and entry["address"] not in {
        hashed("address", "127.0.0.1")  # nor the unsalted hash of this module
    }
    salt = tmp_path / SALT
    assert stat.S_IMODE(salt.stat().st_mode) == 0o600 and len(salt.read_text()) == 32
    assert private(tmp_path.resolve(), str(salt))  # never served by the app
    again = Quotas(tmp_path, runs_per_hour=1).check()  # a restart: the same hashes
    with pytest.raises(QuotaExceeded):
        again.check_start("browser:b", "127.0.0.1")  # the same address, counted
    assert salt.read_text() == (tmp_path / SALT).read_text()


@pytest.mark.slow
def test_every_spending_endpoint_checks_the_quota_first_and_counts_its_calls(quota_app, world):
    """A build of references and a start's cultural expectations spend model calls too:
    a visitor over quota is refused before any is sent (4 builds sent 16 requests past it
    before), and a build within it counts every request in the ledger."""
    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client

    url, out, _ = quota_app
    visitor = app_client(url, headers={"X-Forwarded-For": "10.0.0.7"})
    act = "people celebrating Nowruz at home"
    before = len(world.log)
    note, _ = visitor.predict(act, "Iran", api_name="/build_references")
    assert "references built" in note and "(4 model calls" in note
    built = len(world.log) - before
    assert built >= 4
    (row,) = Quotas(out).usage().values()
    assert row["calls_today"] == built and row["runs_hour"] == 0  # a build is no run
    Quotas(out).record_start("browser:someone", "10.0.0.7")  # a run from the same address
    sent = len(world.log)
    with pytest.raises(AppError, match=r"your address has started 1 run\(s\)"):
        visitor.predict("people dancing at a party", "Iran", api_name="/build_references")
    with pytest.raises(AppError, match=r"your address has started 1 run\(s\)"):
        start(visitor, rounds=0, expectations=True).result()  # with cultural expectations
    assert len(world.log) == sent  # nothing was sent for the refused visitor


@pytest.mark.slow
def test_six_visitors_from_one_address_starting_at_once_get_the_quotas_runs(
    world, backends, options, tmp_path
):
    """Through the app's API, as visitors meet it: with 2 runs an hour per address, 60 calls
    a day and 20 a run, six visitors from one address who press Start together get 2 runs
    (they got 6, 120 calls on the ledger and 104 requests at the stand-in); the ledger
    holds 2 starts and their calls, no more than the stand-in was sent."""
    import threading

    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client
    from ui.limits import Limits

    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    quotas = Quotas(tmp_path, runs_per_hour=2, daily_calls=60)
    demo = build_app(service, "quotas", Limits(run_calls=20), quotas=quotas, trust_proxy=True)
    before = len(world.log)
    with served(demo) as url:
        clients = [app_client(url, headers={"X-Forwarded-For": "10.0.0.1"}) for _ in range(6)]
        gate, got = threading.Barrier(6), []

        def press(client) -> None:
            gate.wait()
            try:
                got.append(start(client, rounds=0).result()[0])
            except AppError as err:
                got.append(str(err))

        threads = [threading.Thread(target=press, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert sorted(got).count("finished") == 2, got
    assert sum("your address has started 2 run(s)" in g for g in got) == 4, got
    sent = len(world.log) - before
    ledger = [json.loads(x) for x in (tmp_path / LEDGER).read_text().splitlines()]
    assert [e["kind"] for e in ledger].count("start") == 2
    calls = sum(e.get("n", 0) for e in ledger if e["kind"] == "calls")
    assert 0 < calls <= 40 and sent <= calls, (calls, sent)
