"""The key's window: how long ``logist job status`` holds the key in its
environment block after it is started, before the entry point withdraws it
(and blanks ``/proc/<pid>/environ``).

Each run starts ``python -c SPY job status`` with ``LOGIST_API_KEY`` set,
where SPY wraps :func:`logist.secrets.process.withdraw_secrets` to write
the system-wide monotonic clock once it returned; the window is that time
minus the time just before the process was started. ``python -c pass``
(start to exit) is measured beside it: the interpreter's own share.

    python bench/key_window.py [--runs 20]

Figures only: nothing here asserts a time. They depend on the machine's
load (docs/safety.md gives the figure measured and the load it was under).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

SPY = r"""
import sys, time
import logist.secrets.process as process
withdraw = process.withdraw_secrets
def spy():
    names = withdraw()
    sys.stderr.write("WITHDRAWN %.6f\n" % time.monotonic())
    sys.stderr.flush()
    return names
process.withdraw_secrets = spy
from logist.__main__ import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
"""


def figures(values: list[float]) -> str:
    ordered = sorted(values)
    return f"median {statistics.median(ordered):.0f} ms, {ordered[0]:.0f} to {ordered[-1]:.0f} ms (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "LOGIST_JOBS_DIR": f"{home}/jobs",
               "LOGIST_API_KEY": "sk-window-canary-0123456789abcdef"}
        subprocess.run([sys.executable, "-m", "logist", "init"], env=env, capture_output=True, check=True)
        window, bare = [], []
        for _ in range(args.runs):
            start = time.monotonic()
            done = subprocess.run([sys.executable, "-c", SPY, "job", "status"], env=env, capture_output=True, text=True)
            stamp = next(line for line in done.stderr.splitlines() if line.startswith("WITHDRAWN "))
            window.append((float(stamp.split()[1]) - start) * 1000)
            start = time.monotonic()
            subprocess.run([sys.executable, "-c", "pass"], env=env)
            bare.append((time.monotonic() - start) * 1000)
    print(f"logist job status, start to the key withdrawn: {figures(window)}")
    print(f"python -c pass, start to exit:                 {figures(bare)}")


if __name__ == "__main__":
    main()
