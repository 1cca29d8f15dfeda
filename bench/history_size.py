"""History size and step time of long jobs, driven through the real engine.

Every step is ``step_once`` against a real HTTP server
(:class:`~logist.replay.scripted.ScriptedLLMServer`); commands are real
commands run in the job's workspace.

1. Command round-trips: a Worker turn of 40 ``CMD`` answers (command policy
   allow), each running a real command whose output, a few hundred bytes to
   a few KB, comes back in the next message. Prints the size of
   ``jobHistory.json`` against the 500 KB target.
2. A long Worker turn: 1,000 rounds of MESSAGE and CMD answers (answers
   about 300-600 bytes, command outputs about 200-2,000 bytes). Prints the
   history's bytes against the bytes of the messages exchanged, and the
   step's own time at rounds 971-1,000 against rounds 1-30 (of a fresh job
   with the same answers, stepped in turn with the late rounds so that both
   see the same load of the machine). Medians of 30 steps: those of 10
   moved the ratio by 0.2x and more between runs on a 2-core machine (1.45x
   and 1.19x for the same code, minutes apart); the body at round 971 is 97%
   of round 1,000's.

*Messages exchanged* is the conversation, each message counted once: the
system message, every user message sent and every answer received, as the
chat API carries them (each a JSON object, ``{"role": ..., "content":
...}``, compact UTF-8): the target's measure. Their text alone (UTF-8
bytes of the contents, without the JSON that carries them) is printed
too. Request bodies repeat the whole conversation every round, so they are
not what is counted.

A step's *own time* is what Logist spends on it: its wall time minus the
model call as the entry records it (``duration_ms``: Logist's send through
the openai SDK and the server) and minus the command's run time. The body
is encoded once, and its bytes hashed for the call's key, before the call
(the key is journalled before anything is sent), so that encoding, which
grows with the conversation, is in the own time; the SDK sends those
bytes. The *whole step* is its wall time minus only the server's time and
the command's: the send counted too. Each has the same target: at most
1.5x late against early.

Prints figures only; nothing here asserts.

    python bench/history_size.py [--commands 40] [--rounds 1000] [--window 30]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.store.jobsdir import JobsDir
from logist.replay.scripted import ScriptedLLMServer
from logist.store.history import layout

KB = 1000
#: The targets: the history's size (2.5x for format 4's self-contained entries), a late step's time.
COMMANDS_TARGET_BYTES = 500 * KB
HISTORY_TO_EXCHANGED_TARGET = 2.5
LATE_TO_EARLY_TARGET = 1.5

WORDS = (
    "the a test file output line value check parse read write count total error warning config module function "
    "result expected actual missing field path column row header sensor reading batch window average median "
    "so then next first because which looks like should would now again still only both each all fix run"
).split()
#: Commands a Worker is allowed to run without asking.
ALLOWED = ["head *", "tail *", "grep *", "wc *", "cat *", "ls *", "sort *"]


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words).capitalize() + "."


def make_source(root: Path, seed: int = 13) -> Path:
    """A small git repository of data and notes for the workspace: the files
    the commands read (log lines of about 70 bytes, so ``head -n K`` prints
    about 70*K bytes)."""
    rng = random.Random(seed)
    repo = root / "source"
    (repo / "data").mkdir(parents=True)
    (repo / "notes").mkdir()
    levels = ["INFO"] * 6 + ["WARN"] * 2 + ["ERROR"]
    for k in range(6):
        lines = [
            f"2026-11-{1 + k:02d}T{n // 60 % 24:02d}:{n % 60:02d}:05Z {rng.choice(levels):5} sensor-{rng.randrange(40):02d} "
            f"reading={rng.uniform(-20, 60):7.2f} batch={rng.randrange(10_000):05d} {rng.choice(WORDS)}"
            for n in range(400)
        ]
        (repo / "data" / f"log_{k}.txt").write_text("\n".join(lines) + "\n")
    for k in range(8):
        (repo / "notes" / f"note_{k}.md").write_text(f"# Note {k}\n\n" + _text(rng, 150 + 180 * k) + "\n")
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "data"]):
        subprocess.run(argv, cwd=repo, check=True, env={**env, "PATH": "/usr/bin:/bin:/usr/local/bin"})
    return repo


def command_for(i: int) -> str:
    """The command of round ``i``: outputs from about 200 bytes to about
    2 KB. Its kind and size depend on ``i % 10`` only (the file it reads on
    ``i // 10``), so any ten rounds in a row cost the same."""
    k, n = i // 10 % 6, i % 10
    return [
        f"head -n 22 data/log_{k}.txt",
        f"grep -n -m 12 ERROR data/log_{k}.txt",
        f"cat notes/note_{k}.md",
        f"tail -n 8 data/log_{k}.txt",
        "wc -l data/log_0.txt data/log_1.txt data/log_2.txt notes/note_0.md",
        f"grep -n -m 5 WARN data/log_{k}.txt",
        f"head -n 3 data/log_{k}.txt",
        "ls -l data notes",
        f"grep -n -m 20 sensor-0{k} data/log_{k}.txt",
        f"cat notes/note_{k + 2}.md",
    ][n]


def answer_for(i: int, rng: random.Random, commands_only: bool = False) -> str:
    """The Worker's answer of round ``i`` (about 300-600 bytes): a CMD on
    even rounds (or always, with ``commands_only``), else a MESSAGE, with a
    small file change on rounds 1, 5 (of every ten)."""
    thought = _text(rng, rng.randrange(180, 380))
    if commands_only or i % 2 == 0:
        return json.dumps({"thought": thought, "action": "CMD", "command": command_for(i)})
    data: dict = {"thought": thought, "action": "MESSAGE", "message": _text(rng, rng.randrange(60, 150))}
    if i % 10 in (1, 5):
        data["file_changes"] = [{"path": f"work/step_{i // 10 % 5}.txt", "content": _text(rng, 60) + "\n"}]
    return json.dumps(data)


def exchanged_bytes(requests: list[dict], answers: list[str], text_only: bool = False) -> int:
    """Bytes of the conversation, each message once: the messages a request
    adds to the previous request and its answer, plus every answer; each as
    the compact JSON object the API carries, or with ``text_only`` the
    UTF-8 bytes of its content."""

    def size(message: dict) -> int:
        if text_only:
            return len(message["content"].encode("utf-8"))
        return len(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))

    total, previous = 0, []
    for body, answer in zip(requests, answers):
        messages = body["messages"]
        new = messages[len(previous):] if messages[: len(previous)] == previous else messages
        said = {"role": "assistant", "content": answer}
        total += sum(size(m) for m in new) + size(said)
        previous = messages + [said]
    return total


def new_job(root: Path, name: str, max_steps: int):
    jobs = JobsDir(root / f"jobs-{name}")
    jobs.init()
    # A 1,000-round turn outgrows any real model's window (about 126,000 tokens by round 1,000):
    # the scripted model's is set past it, so every step is sized to it as a real one is.
    (jobs.path / "config.json").write_text(json.dumps({"model_settings": {"gpt-4o-mini": {"context_window": 10**9}}}))
    source = make_source(root / f"src-{name}")
    return create_job(
        jobs, name, "Find out why some sensor readings are missing from the nightly report",
        details="The logs are in data/, earlier notes in notes/.", from_repo=str(source),
        max_steps=max_steps, command_policy="allow", allowed_commands=ALLOWED,
    )


class TimedServer(ScriptedLLMServer):
    """The scripted server, also keeping the seconds it spent on each call
    (reading the body to sending the answer): the model's share of a step."""

    def __init__(self, script):
        super().__init__(script)
        self.seconds: list[float] = []
        owner, handler = self, self._server.RequestHandlerClass

        class Timed(handler):
            def do_POST(self):
                # Only the calls: a step that starts afresh also asks the endpoint of its model (POST
                # /api/show), which is the step's own time and would put every call's time out of place.
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return super().do_POST()
                started = time.perf_counter()
                try:
                    super().do_POST()
                finally:
                    owner.seconds.append(time.perf_counter() - started)

        self._server.RequestHandlerClass = Timed

    def seconds_of(self, number: int) -> float:
        """The time of request ``number`` (from 1), once its handler is done."""
        deadline = time.monotonic() + 5
        while len(self.seconds) < number and time.monotonic() < deadline:
            time.sleep(0.0005)
        return self.seconds[number - 1]


def timed_step(job, server: TimedServer, answer: str) -> tuple[float, float]:
    """One step answered with ``answer``: the whole step's time (wall time
    minus the server's time on the request and the command's run time) and
    Logist's own time (wall time minus the call as the entry records it,
    the SDK's send in it, and minus the command)."""
    server.add(answer)
    number = len(server.requests) + 1
    started = time.perf_counter()
    result = step_once(job, base_url=server.base_url)
    wall = time.perf_counter() - started
    if result.error:
        raise SystemExit(f"step {result.sequence} failed: {result.error}")
    entry = job.last_entry()
    command = entry.command.duration_ms / 1000 if entry.command else 0.0
    return wall - server.seconds_of(number) - command, wall - entry.duration_ms / 1000 - command


def command_figures(root: Path, commands: int = 40) -> dict:
    """(1): the history of ``commands`` command round-trips."""
    job = new_job(root, "commands", commands + 10)
    answers = [answer_for(i, random.Random(i), commands_only=True) for i in range(commands)]
    with TimedServer([]) as server:
        for answer in answers:
            timed_step(job, server, answer)
        requests = list(server.requests)
    outputs = [len(body["messages"][-1]["content"].encode()) for body in requests[1:]]
    return {"job": job, "history_bytes": written_bytes(job),
            "exchanged": exchanged_bytes(requests, answers),
            "exchanged_text": exchanged_bytes(requests, answers, text_only=True),
            "output_range": (min(outputs), statistics.mean(outputs), max(outputs))}


def turn_figures(root: Path, rounds: int = 1000, window: int = 30) -> dict:
    """(2): history bytes and own time of a ``rounds``-round turn.

    Its last ``window`` rounds alternate with the first ``window`` rounds of
    a fresh job of the same answers, so that late and early rounds are
    timed under the same load of the machine."""
    window = min(window, rounds // 2)
    answers = [answer_for(i, random.Random(i)) for i in range(rounds)]
    job, fresh = new_job(root, "turn", rounds + 10), new_job(root, "fresh", window + 10)
    early, late = [], []
    with TimedServer([]) as server:
        for answer in answers[: rounds - window]:
            timed_step(job, server, answer)
        for k in range(window):
            late.append(timed_step(job, server, answers[rounds - window + k]))
            early.append(timed_step(fresh, server, answers[k]))
        requests = [body for n, body in enumerate(server.requests) if n < rounds - window or (n - rounds + window) % 2 == 0]
    run = {"job": job, "history_bytes": written_bytes(job), "window": window,
           "exchanged": exchanged_bytes(requests, answers),
           "exchanged_text": exchanged_bytes(requests, answers, text_only=True), "last_body": len(json.dumps(requests[-1]).encode()),
           "parameters": sum(len(json.dumps({k: v for k, v in body.items() if k != "messages"},
                                            separators=(",", ":")).encode()) for body in requests)}
    for i, key in enumerate(("whole", "own")):
        run[f"{key}_early"] = statistics.median(t[i] for t in early)
        run[f"{key}_late"] = statistics.median(t[i] for t in late)
    return run


def formats_bytes(job) -> int:
    """The response_format values the entries name, each kept once in
    response_formats/ (:mod:`logist.store.response_formats`)."""
    return sum(path.stat().st_size for path in job.response_formats_dir.glob("*.json"))


def written_bytes(job) -> int:
    """jobHistory.json and its response_formats/."""
    return job.history_path.stat().st_size + formats_bytes(job)


def breakdown(job) -> dict[str, float]:
    """Mean bytes per call entry, by what they hold, as written in the file
    (the values of the named fields; ``request.metadata`` is a number where
    the call continues one made with the same model and parameters)."""
    parts = {"entry": 0, "messages added": 0, "answer": 0, "command output": 0, "state": 0,
             "state.turn.pending": 0, "request.metadata": 0, "command.cwd": 0, "indentation": 0}
    count = 0
    for data in job.written():
        if "request" not in data:
            continue
        count += 1
        written = len(layout(data))
        parts["entry"] += written
        request = data["request"]
        messages = request.get("added") or request.get("prompt") or []
        # A message that repeats a command's output names its entry instead (output_of): its own text only.
        parts["messages added"] += sum(len(json.dumps(m.get("content") or m.get("prefix", "") + m.get("suffix", ""),
                                                      ensure_ascii=False).encode()) for m in messages)
        parts["answer"] += len(json.dumps((data.get("response") or {}).get("raw_response") or "").encode())
        parts["command output"] += len(json.dumps((data.get("command") or {}).get("output") or "").encode())
        parts["state"] += len(json.dumps(data["state"], separators=(",", ":"), ensure_ascii=False).encode())
        pending = (data["state"].get("turn") or {}).get("pending")
        parts["state.turn.pending"] += len(json.dumps(pending).encode()) if pending else 0
        parts["request.metadata"] += len(json.dumps(request.get("metadata"), separators=(",", ":")).encode())
        parts["command.cwd"] += len(json.dumps((data.get("command") or {}).get("cwd") or "").encode()) - 2
        parts["indentation"] += written - len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
    return {k: v / max(count, 1) for k, v in parts.items()}


def print_breakdown(parts: dict[str, float]) -> None:
    entry = parts["entry"]
    print(f"  per call entry, mean bytes as written: {entry:,.0f}")
    for name, value in parts.items():
        if name != "entry":
            print(f"    {name:<20} {value:>8,.0f}  ({value / entry:5.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--window", type=int, default=30, help="Rounds timed at each end of the turn (medians).")
    args = parser.parse_args()
    for paragraph in __doc__.split("\n\n")[3:5]:
        print(paragraph.replace("\n", " "), "\n")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        run = command_figures(Path(tmp), args.commands)
        low, mean, high = run["output_range"]
        print(f"{args.commands} command round-trips (outputs {low:,}-{high:,} bytes, mean {mean:,.0f}), "
              f"{time.perf_counter() - started:.0f} s:")
        size = run["history_bytes"]
        print(f"  jobHistory.json + response_formats/: {size / KB:,.1f} KB, target < {COMMANDS_TARGET_BYTES / KB:.0f} KB "
              f"({size / COMMANDS_TARGET_BYTES:.2f}x the target)")
        print(f"  messages exchanged: {run['exchanged'] / KB:,.1f} KB as JSON ({run['exchanged_text'] / KB:,.1f} KB of "
              f"text); history / exchanged = {size / run['exchanged']:.2f}x ({size / run['exchanged_text']:.2f}x of the text)")
        print_breakdown(breakdown(run["job"]))

        started = time.perf_counter()
        run = turn_figures(Path(tmp), args.rounds, args.window)
        size, exchanged, text = run["history_bytes"], run["exchanged"], run["exchanged_text"]
        print(f"\nA {args.rounds:,}-round Worker turn, {time.perf_counter() - started:.0f} s:")
        print(f"  jobHistory.json + response_formats/: {size / 1e6:,.2f} MB; messages exchanged: {exchanged / 1e6:,.2f} MB "
              f"as JSON, {text / 1e6:,.2f} MB of text; last request body: {run['last_body'] / 1e6:,.2f} MB")
        alone, formats = run["job"].history_path.stat().st_size, formats_bytes(run["job"])
        print(f"  history / exchanged = {size / exchanged:.2f}x, target <= {HISTORY_TO_EXCHANGED_TARGET:g}x "
              f"({size / text:.2f}x of the text alone; jobHistory.json {alone / 1e6:,.2f} MB, {alone / exchanged:.2f}x, "
              f"{alone / text:.2f}x of the text; response_formats/ {formats / 1e6:,.3f} MB in "
              f"{len(list(run['job'].response_formats_dir.glob('*.json')))} files)")
        params = run["parameters"]
        print(f"  each request's parameters besides the messages (response_format...), sent every round: "
              f"{params / 1e6:,.2f} MB (kept once per distinct value)")
        w = run["window"]
        print(f"  medians; rounds 1-{w} are a fresh job's, stepped in turn with the late rounds:")
        for key, label in (("own", "Logist's own time (the call and the command not counted)"),
                           ("whole", "whole step (the send through the SDK counted)")):
            early, late = run[f"{key}_early"], run[f"{key}_late"]
            print(f"  {label}: rounds 1-{w}: {early * 1000:.1f} ms; rounds {args.rounds - w + 1:,}-"
                  f"{args.rounds:,}: {late * 1000:.1f} ms; ratio {late / early:.2f}x"
                  + f", target <= {LATE_TO_EARLY_TARGET:g}x")
        print_breakdown(breakdown(run["job"]))


if __name__ == "__main__":
    sys.exit(main())
