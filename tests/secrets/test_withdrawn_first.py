"""The ``logist`` program takes the secrets out of its environment before it
imports the rest of Logist (logist.__main__).

What runs before the withdrawal is the window in which another process of
the same user can read the key in ``/proc/<pid>/environ``: once the whole
command line was imported first (click, pydantic, the engine: hundreds of
milliseconds), a command polling ``/proc/*/environ`` caught the key from
every ``logist job status``. This runs the entry point in a real process
with a spy on the withdrawal that lists what was imported by then.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import CANARY_KEY

SPY = r"""
import json, sys
import logist.secrets.process as process
withdraw = process.withdraw_secrets
def spy():
    names = withdraw()
    print(json.dumps({"loaded": sorted(sys.modules), "withdrawn": names}), flush=True)
    return names
process.withdraw_secrets = spy
from logist.__main__ import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
"""

#: What may be loaded when the key leaves: the interpreter's own start-up and
#: logist's secrets package, nothing of the command line or the library.
HEAVY = ("click", "pydantic", "openai", "httpx", "yaml", "jsonschema", "filelock", "logist.cli", "logist.api",
         "logist.engine", "logist.store", "logist.model", "logist.workspace", "logist.views", "logist.replay")


def test_the_key_leaves_before_the_command_line_is_imported(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "LOGIST_API_KEY": CANARY_KEY, "LOGIST_JOBS_DIR": str(tmp_path / "jobs")}
    for argv in (["--version"], ["job", "status"]):
        done = subprocess.run([sys.executable, "-c", SPY, *argv], env=env, capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)
        first = json.loads(done.stdout.splitlines()[0])
        assert "LOGIST_API_KEY" in first["withdrawn"], done
        early = [name for name in first["loaded"] if name.split(".")[0] in HEAVY or name.startswith(HEAVY)]
        assert early == [], f"imported before the key left the environment ({argv}): {early}"


def test_the_package_imports_its_public_names_when_used():
    code = ("import sys, logist; before = 'logist.api' in sys.modules; logist.open; "
            "print(before, 'logist.api' in sys.modules, sorted(logist.__all__) == sorted(dir(logist)) or "
            "set(logist.__all__) <= set(dir(logist)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "True"], done
