"""What the live engine did, read from its log: llama-cpp-python's server
(verbose, its default) prints for every request the prefix it reused of the
request before ("Llama.generate: N prefix-match hit, remaining M prompt
tokens to eval") and llama.cpp's figures for it ("prompt eval time = ... /
M tokens", "eval time = ... / R runs", "total time = T ms"). tests/live/'s
fixture reads the part of the log a test wrote, and the run's summary prints
it per test: where the live set's time goes. Free of pytest, as
liveserver.py is."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_REUSED = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
_PROMPT = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs")
_TOTAL = re.compile(r"total time =\s*([\d.]+) ms /\s*(\d+) tokens")


@dataclass
class EngineWork:
    """The engine's work for some requests: the completions it ran, prompt
    tokens it evaluated and reused (the prefix kept from the request before),
    tokens it generated, and its own time for them (ms)."""

    completions: int = 0
    evaluated: int = 0
    reused: int = 0
    generated: int = 0
    ms: float = 0.0
    prompts: list = field(default_factory=list)  # the prompt tokens each completion evaluated

    def line(self) -> str:
        return (f"{self.completions} completions, prompt tokens {self.evaluated:,} evaluated "
                f"+ {self.reused:,} reused, {self.generated:,} generated, engine {self.ms / 1000:.1f} s")


def read(text: str) -> EngineWork:
    """The work the log's ``text`` tells of (whole requests: a ``total time`` line closes one)."""
    work = EngineWork()
    for line in text.splitlines():
        if m := _REUSED.search(line):
            work.reused += int(m.group(1))
        elif "prompt eval time" in line and (m := _PROMPT.search(line)):
            work.evaluated += int(m.group(2))
            work.prompts.append(int(m.group(2)))
        elif "prompt eval" not in line and (m := _EVAL.search(line)):
            work.generated += int(m.group(2)) + 1  # the first token comes from the prompt's evaluation
        elif m := _TOTAL.search(line):
            work.completions += 1
            work.ms += float(m.group(1))
    return work
