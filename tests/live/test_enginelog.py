"""The live engine's log read per request (tests/live/enginelog.py): no engine needed."""

from __future__ import annotations

from .enginelog import read

#: Two requests as llama-cpp-python's server logged them in a live run: the first evaluated whole, the second
#: after the longest prefix it shared with the first.
LOG = """\
INFO:     127.0.0.1:44818 - "POST /v1/chat/completions HTTP/1.1" 200 OK
llama_perf_context_print:        load time =       1.54 ms
llama_perf_context_print: prompt eval time =   46782.47 ms /  1018 tokens (   45.96 ms per token,    21.76 tokens per second)
llama_perf_context_print:        eval time =    8805.93 ms /   102 runs   (   86.33 ms per token,    11.58 tokens per second)
llama_perf_context_print:       total time =  101438.46 ms /  1120 tokens
llama_perf_context_print:    graphs reused =        100
Llama.generate: 1044 prefix-match hit, remaining 154 prompt tokens to eval
INFO:     127.0.0.1:53684 - "POST /v1/chat/completions HTTP/1.1" 200 OK
llama_perf_context_print:        load time =       1.54 ms
llama_perf_context_print: prompt eval time =    1748.48 ms /   154 tokens (   11.35 ms per token,    88.08 tokens per second)
llama_perf_context_print:        eval time =    3126.74 ms /    86 runs   (   36.36 ms per token,    27.50 tokens per second)
llama_perf_context_print:       total time =    6457.29 ms /   240 tokens
"""


def test_each_request_counts_its_evaluated_reused_and_generated_tokens():
    work = read(LOG)
    assert (work.completions, work.evaluated, work.reused, work.generated) == (2, 1018 + 154, 1044, 103 + 87)
    assert work.prompts == [1018, 154] and round(work.ms) == 107896
    assert work.line() == ("2 completions, prompt tokens 1,172 evaluated + 1,044 reused, 190 generated, "
                           "engine 107.9 s")
    assert read("").completions == 0
