"""The suite's own order (tests/conftest.py): the tests expected to take
longest start first, on a fresh clone too, and the live tests stay together
on one worker (one engine), as do the tests of the worker's Ray cluster."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import pytest_collection_modifyitems


class Item:
    """What the ordering reads of a collected test: its id, its marks and its fixtures."""

    def __init__(self, nodeid: str, *marks: str, fixtures: tuple = ()):
        self.nodeid = nodeid
        self.marks = [SimpleNamespace(name=name) for name in marks]
        self.fixturenames = list(fixtures)

    def iter_markers(self):
        return iter(self.marks)

    def get_closest_marker(self, name: str):
        return next((mark for mark in self.marks if mark.name == name), None)

    def __repr__(self) -> str:
        return self.nodeid


class Cache:
    def __init__(self, durations: dict):
        self.durations = durations

    def get(self, key, default):
        return self.durations


class Config:
    def __init__(self, durations: dict):
        self.cache = Cache(durations)


def ordered(items: list, durations: dict, workers: int, monkeypatch) -> list[list[str]]:
    """The shares worksteal hands the workers: contiguous slices of the collection, as long as each other."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
    pytest_collection_modifyitems(None, Config(durations), items)
    size = len(items) // workers
    return [[item.nodeid for item in items[i * size:(i + 1) * size]] for i in range(workers)]


def collection() -> list:
    quick = [Item(f"quick{n}") for n in range(40)]
    return quick[:10] + [Item("serve1", "serve"), Item("browser1", "serve", "browser"), Item("ray1", "slow")] + \
        quick[10:20] + [Item(f"live{n}", "live") for n in range(4)] + [Item("ray2", "slow")] + quick[20:]


def test_without_a_last_runs_durations_the_marks_put_live_then_slow_then_browser_first(monkeypatch):
    items = collection()
    first, second = ordered(items, {}, 2, monkeypatch)
    # The live tests (4 x 30 s expected) on one worker, first; the slow ones (10 s) on the other, then browser, serve.
    assert first[:4] == ["live0", "live1", "live2", "live3"]
    assert second[:4] == ["ray1", "ray2", "browser1", "serve1"]
    assert sorted(first + second) == sorted(item.nodeid for item in collection())


def test_a_last_runs_durations_win_over_the_marks(monkeypatch):
    items = collection()
    durations = {"quick5": 60.0, "ray1": 0.5, "live2": 100.0}
    first, second = ordered(items, durations, 2, monkeypatch)
    assert first[:4] == ["live0", "live1", "live2", "live3"], "live together, first, in the order written"
    assert second[:3] == ["quick5", "ray2", "browser1"]
    assert "ray1" not in first[:6] + second[:6], "measured short: not started first"


def test_one_worker_gets_the_longest_first(monkeypatch):
    items = collection()
    [only] = ordered(items, {"quick3": 45.0}, 1, monkeypatch)
    assert only[:8] == ["quick3", "live0", "live1", "live2", "live3", "ray1", "ray2", "browser1"]


def test_the_tests_of_the_session_s_ray_cluster_go_to_one_worker(monkeypatch):
    # Three batches on the worker's own Ray cluster, each expected to take as long as each of two
    # others: spread one by one they would go to both workers, and each would start a cluster.
    items = [Item(f"quick{n}") for n in range(20)] + [Item("other1", "slow"), Item("other2", "slow")] + \
        [Item(f"cluster{n}", "slow", fixtures=("jobs", "ray_cluster")) for n in range(3)]
    first, second = ordered(items, {}, 2, monkeypatch)
    assert first[:3] == ["cluster0", "cluster1", "cluster2"], "together, first, in the order written"
    assert second[:2] == ["other1", "other2"]
