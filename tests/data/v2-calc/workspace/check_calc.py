"""Checks for calc.py: ``python3 check_calc.py [-v]``; exits 1 if any fails."""

import sys

sys.dont_write_bytecode = True  # keep the workspace free of __pycache__

import calc  # noqa: E402

CASES = [
    ("add(2, 3)", lambda: calc.add(2, 3), 5),
    ("subtract(5, 3)", lambda: calc.subtract(5, 3), 2),
    ("multiply(4, 3)", lambda: calc.multiply(4, 3), 12),
    ("divide(8, 2)", lambda: calc.divide(8, 2), 4),
]


def main(verbose):
    failed = 0
    for name, run, expected in CASES:
        got = run()
        if got != expected:
            failed += 1
            print(f"FAIL {name} = {got!r}, expected {expected!r}")
        elif verbose:
            print(f"ok   {name} = {got!r}")
    print(f"{len(CASES) - failed} of {len(CASES)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main("-v" in sys.argv[1:]))
