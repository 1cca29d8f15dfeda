"""``job report`` and ``job transcript --rebuild`` hold one history entry at a time.

The figure on a 1 GB history is printed by ``bench/views_memory.py``; here
the same job is built at two sizes, 4 MB and 40 MB of history, and each
command's peak memory (measured by the process itself) must not grow with
it: reading the whole history would add several times the 36 MB between
them, streaming adds a few MB at most (buffers, the git process's pipe).
Comparing two sizes of the same job leaves out the floor (Python and the
libraries), which differs between machines.
"""

from __future__ import annotations

import sys

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def views_memory():
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    try:
        import views_memory
    finally:
        sys.path.remove(str(REPO_ROOT / "bench"))
    return views_memory


@pytest.mark.parametrize("command", [["job", "report", "bench"], ["job", "transcript", "bench", "--rebuild"]],
                         ids=["report", "transcript"])
def test_peak_memory_does_not_grow_with_the_history(tmp_path, views_memory, command):
    peaks, sizes = [], []
    for size_mb in (4, 40):
        jobs, job, _entries = views_memory.build(tmp_path / f"size-{size_mb}", size_mb, rounds=50)
        sizes.append(job.history_path.stat().st_size / 1e6)
        peak, _seconds = views_memory.run_measured(["--jobs-dir", str(jobs.path), *command])
        peaks.append(peak)
    grown = peaks[1] - peaks[0]
    print(f"{' '.join(command)}: peak {peaks[0]:.1f} MB on {sizes[0]:.0f} MB, {peaks[1]:.1f} MB on {sizes[1]:.0f} MB")
    assert grown < 0.25 * (sizes[1] - sizes[0]), f"peak memory grew by {grown:.1f} MB with the history"
