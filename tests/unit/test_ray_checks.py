"""The Ray engines' checks that one machine cannot stage for real: a folder some worker
does not see (on one machine every process sees the same disk), an unreachable address;
with stand-ins for Ray's actors (the real engines are tested in tests/e2e/test_batch_ray)."""

from __future__ import annotations

import pytest

from refine.harness.ray import RayEngineError, check_reachable, check_shared, sees


class Ref:
    def __init__(self, value):
        self.value = value


class Seer:
    """An actor whose node mounts the folder (``shared``) or not."""

    def __init__(self, shared: bool) -> None:
        self.shared = shared
        self.sees = self

    def remote(self, probe, token):
        # a node without the folder reads nothing there
        return Ref(sees(probe, token) if self.shared else sees(probe + ".elsewhere", token))


class FakeRay:
    @staticmethod
    def get(refs):
        return [r.value for r in refs]


def test_a_folder_one_worker_does_not_see_is_one_clear_error(tmp_path):
    folder = tmp_path / "batch"
    check_shared(FakeRay, [Seer(True), Seer(True)], folder, "the batch directory (--out)")
    with pytest.raises(RayEngineError) as err:
        check_shared(FakeRay, [Seer(True), Seer(False)], folder, "the batch directory (--out)")
    assert str(err.value) == (
        f"{folder} is not visible from every Ray worker: put the batch directory (--out) on "
        "storage every node sees, such as a shared filesystem"
    )
    assert list(folder.iterdir()) == []  # the probe is gone either way


def test_addresses_are_checked_before_ray_waits_on_them():
    check_reachable(None)
    check_reachable("auto")
    with pytest.raises(RayEngineError, match="give auto, host:port or ray://host:port"):
        check_reachable("somewhere")
    with pytest.raises(RayEngineError, match="--address ray://127.0.0.1:9: nothing answers"):
        check_reachable("ray://127.0.0.1:9", timeout=2.0)
