"""The rows of bench/run.py's table, and the benchmarks it shares with the
older scripts (history scaling, history size, concurrency).

A :class:`Row` holds one figure, the floor it is compared with, the ratio
and whether it meets its target; :func:`table` prints them and
:func:`as_data` is what ``bench/results.json`` holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROWS: list["Row"] = []


@dataclass
class Row:
    name: str
    #: Seconds (or ``unit``); None when the figure could not be measured (``note`` says why).
    value: Optional[float]
    floor: Optional[float] = None
    floor_name: str = ""
    #: A ratio to the floor (``value / floor <= target``), or with ``absolute``
    #: a bound on the value itself; with ``higher``, the value must reach it.
    target: Optional[float] = None
    target_text: str = ""
    unit: str = "s"
    higher: bool = False
    absolute: bool = False
    note: str = ""
    #: Already formatted figures (the history rows).
    text: str = ""
    floor_text: str = ""
    ratio_text: str = ""
    met_override: Optional[bool] = None

    @property
    def ratio(self) -> Optional[float]:
        return self.value / self.floor if self.value is not None and self.floor else None

    @property
    def met(self) -> Optional[bool]:
        if self.met_override is not None or self.target is None or self.value is None:
            return self.met_override
        if self.higher:
            return self.value >= self.target
        if self.absolute or self.floor is None:
            return self.value <= self.target
        return self.ratio is not None and self.ratio <= self.target

    def shown_target(self) -> str:
        if self.target_text or self.target is None:
            return self.target_text
        if self.higher:
            return f">= {self.target:g} {self.unit}"
        if self.absolute or self.floor is None:
            return f"<= {fmt(self.target, self.unit)}"
        return f"<= {self.target:g}x {self.floor_name}".rstrip()

    def cells(self) -> tuple[str, ...]:
        value = self.text or (fmt(self.value, self.unit) if self.value is not None else self.note)
        floor = self.floor_text or (f"{fmt(self.floor, 's')} {self.floor_name}".strip() if self.floor else "")
        ratio = self.ratio_text or (f"{self.ratio:.2f}x" if self.ratio is not None else "")
        met = {True: "yes", False: "NO", None: ""}[self.met]
        return self.name, value, floor, ratio, self.shown_target(), met


def fmt(value: float, unit: str) -> str:
    if unit != "s":
        return f"{value:,.1f} {unit}"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def add(row: Row) -> None:
    ROWS.append(row)
    name, value, floor, ratio, target, met = row.cells()
    print(f"  {name}: {value}" + (f" (floor {floor}, {ratio})" if floor else "") + (f" [{met}]" if met else ""),
          file=sys.stderr, flush=True)


def table() -> str:
    header = ("figure", "value", "floor", "ratio", "target", "met")
    cells = [header] + [row.cells() for row in ROWS]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip(), "-|-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(cell, widths)).rstrip() for cell in cells[1:]]
    return "\n".join(lines)


def as_data() -> list[dict]:
    data = []
    for row in ROWS:
        name, value, floor, ratio, target, _met = row.cells()
        data.append({"figure": name, "value": row.value, "unit": row.unit, "shown": value, "floor": row.floor,
                     "floor_shown": floor, "ratio": row.ratio, "ratio_shown": ratio, "target": target, "met": row.met,
                     "note": row.note})
    return data


# -- the older benchmarks -----------------------------------------------------------------------


def history_scaling(quick: bool) -> None:
    import history_scaling as scaling

    sizes = [10, 1000] if quick else [10, 1000, 10000]
    with tempfile.TemporaryDirectory() as tmp:
        results = [(size, *scaling.measure(scaling.build_job(Path(tmp), size), 15)) for size in sizes]
    base_time, base_peak = results[0][1], results[0][2]
    for size, per_step, peak in results:
        last = size == sizes[-1]
        add(Row(f"history scaling: step with {size:,} earlier entries", per_step, base_time,
                text=f"{per_step * 1000:.1f} ms, peak {peak / 1024:.0f} KB", floor_text=f"{base_time * 1000:.1f} ms at {sizes[0]}",
                ratio_text=f"{per_step / base_time:.2f}x time, {peak / base_peak:.2f}x memory",
                target=1.2 if last else None, target_text="<= 1.2x" if last else ""))


def history_size(quick: bool) -> None:
    import history_size as size_bench

    rounds = 100 if quick else 1000
    with tempfile.TemporaryDirectory() as tmp:
        run = size_bench.command_figures(Path(tmp))
        size = run["history_bytes"]
        add(Row("history size: 40 command round-trips", size, size_bench.COMMANDS_TARGET_BYTES, unit="B",
                text=f"{size / 1000:,.0f} KB", floor_text="500 KB target", ratio_text=f"{size / size_bench.COMMANDS_TARGET_BYTES:.2f}x",
                target=1.0, target_text="< 500 KB"))
        run = size_bench.turn_figures(Path(tmp), rounds)
    size, exchanged, text, w = run["history_bytes"], run["exchanged"], run["exchanged_text"], run["window"]
    add(Row(f"history size: {rounds:,}-round turn", size, exchanged, unit="B", text=f"{size / 1e6:,.2f} MB",
            floor_text=f"{exchanged / 1e6:,.2f} MB exchanged as JSON ({text / 1e6:,.2f} MB of text: {size / text:.2f}x)",
            target=size_bench.HISTORY_TO_EXCHANGED_TARGET,
            target_text=f"<= {size_bench.HISTORY_TO_EXCHANGED_TARGET:g}x the messages exchanged"))
    early, late = run["own_early"], run["own_late"]
    add(Row(f"Logist's own time per step at rounds {rounds - w + 1:,}-{rounds:,} of a turn", late, early,
            floor_text=f"{early * 1000:.1f} ms at rounds 1-{w}", target=size_bench.LATE_TO_EARLY_TARGET))
    early, late = run["whole_early"], run["whole_late"]
    add(Row(f"whole step at rounds {rounds - w + 1:,}-{rounds:,}, the send through the SDK counted", late, early,
            floor_text=f"{early * 1000:.1f} ms at rounds 1-{w}", target=size_bench.LATE_TO_EARLY_TARGET))


def concurrency(tmp: Path, env: dict) -> None:
    from logist.engine.create import create_job
    from logist.store.jobsdir import JobsDir
    from logist.replay.scripted import ScriptedLLMServer

    jobs = JobsDir(tmp / "concurrent")
    for n in range(8):
        create_job(jobs, f"c{n}", "Step me")
    create_job(jobs, "shared", "Step me together", max_steps=50)
    env = dict(env, LOGIST_JOBS_DIR=str(jobs.path))
    answers = [json.dumps({"action": "MESSAGE", "message": f"step {i}"}) for i in range(16)]
    with ScriptedLLMServer(answers) as server:
        for label, ids in (("8 jobs, 8 processes", [f"c{n}" for n in range(8)]), ("1 job, 8 processes", ["shared"] * 8)):
            started = time.perf_counter()
            procs = [subprocess.Popen([sys.executable, "-m", "logist", "job", "step", "--oneshot", job_id, "--base-url",
                                       server.base_url, "--wait", "120"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for job_id in ids]
            codes = [p.wait() for p in procs]
            elapsed = time.perf_counter() - started
            histories = {job_id: jobs.job(job_id).load_history().interactions for job_id in set(ids)}
            gaps = sum(int([e.sequence for e in h] != list(range(1, len(h) + 1))) for h in histories.values())
            calls = sum(1 for h in histories.values() for e in h if e.kind == "llm_call")
            ok = codes.count(0) == 8 and calls == 8 and gaps == 0
            add(Row(f"concurrency: {label}", elapsed, note="", met_override=ok,
                    target_text=f"{codes.count(0)}/8 ok, {calls} calls recorded, {gaps} histories with gaps"))
