"""The recording gateway's cost: a call through it against the same call made
directly to the endpoint.

The endpoint is Logist's scripted Chat Completions server on 127.0.0.1; the
agent is an ``httpx`` client keeping its connection, as the agents' SDKs do.
Each figure is the median time of a whole call (request sent to the answer's
last byte read) over ``--calls`` calls, direct and through the gateway taken
in turns so that a busy machine slows both alike:

* Chat Completions, as-is (``passthrough``): whole, and streamed (the
  answer in ``--pieces`` chunks), the gateway recording each call;
* Responses and Messages, streamed, translated to Chat (``chat`` mode),
  against the direct streamed Chat call that carries the same answer.

Three answers: 4 pieces and 300 pieces sent at once (the gateway's own
work per event, bare: a real model's events come apart), and 100 pieces
2 ms apart, a model streaming fast (the cost as an agent meets it: the
gateway's work overlaps the model's, and what it adds is at the end).

    python bench/gateway.py [--calls 200]

Target: through the gateway at most 1.1x the direct call plus 5 ms. Figures
only; each printed beside that floor.
"""

from __future__ import annotations

import argparse
import statistics
import time

from logist.model.gateway import Gateway
from logist.replay.scripted import Reply, ScriptedLLMServer

ANSWER = "The quick brown fox jumps over the lazy dog. " * 20  # 900 characters


def timed(client, url: str, headers: dict, body: dict) -> float:
    start = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as answer:
        for _ in answer.iter_raw():
            pass
        assert answer.status_code == 200, answer.status_code
    return time.perf_counter() - start


def measure(calls: int, pieces: int, delay: float, whole: bool) -> list[tuple[str, float, float]]:
    """The median times of each case, direct and through the gateway (``whole``:
    the unstreamed call too, which is the same whatever the pieces)."""
    try:
        import httpx2 as httpx  # the openai SDK's HTTP library from openai 3 on
    except ImportError:
        import httpx
    chat = {"model": "m", "messages": [{"role": "user", "content": "Write the sentence."}]}
    cases = [  # (name, mode, gateway path, gateway body, direct body)
        ("chat, whole", "passthrough", "/chat/completions", chat, chat),
        ("chat, streamed", "passthrough", "/chat/completions", {**chat, "stream": True}, {**chat, "stream": True}),
        ("responses -> chat, streamed", "chat", "/responses",
         {"model": "m", "input": "Write the sentence.", "stream": True},
         {**chat, "stream": True, "stream_options": {"include_usage": True}}),
        ("messages -> chat, streamed", "chat", "/messages",
         {"model": "m", "max_tokens": 1000, "stream": True, "messages": [{"role": "user", "content": "Write the sentence."}]},
         {**chat, "stream": True, "stream_options": {"include_usage": True}}),
    ]
    rows = []
    for name, mode, path, through, direct in cases[0 if whole else 1:]:
        script = [Reply(content=ANSWER, pieces=pieces, piece_delay=delay)] * (2 * calls + 20)
        records = []
        with ScriptedLLMServer(script) as upstream, \
                Gateway(upstream.base_url, "sk-bench-key-0000", mode=mode, record=records.append) as gateway, \
                httpx.Client(timeout=30) as client:
            plain = {"authorization": "Bearer sk-bench-key-0000"}
            ours = {"authorization": f"Bearer {gateway.token}", "x-api-key": gateway.token}
            for _ in range(10 if not delay else 2):  # warm both connections and code paths
                timed(client, upstream.base_url + "/chat/completions", plain, direct)
                timed(client, gateway.base_url + path, ours, through)
            direct_times, gateway_times = [], []
            for _ in range(calls):
                direct_times.append(timed(client, upstream.base_url + "/chat/completions", plain, direct))
                gateway_times.append(timed(client, gateway.base_url + path, ours, through))
            assert len(records) == calls + (10 if not delay else 2)
        rows.append((name, statistics.median(direct_times), statistics.median(gateway_times)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    print(f"{'call':<30} {'pieces':>10} {'direct':>9} {'gateway':>9} {'floor':>9} {'ratio':>6}  within")
    for pieces, delay, calls in ((4, 0.0, args.calls), (300, 0.0, args.calls), (100, 0.002, max(10, args.calls // 8))):
        for name, direct, through in measure(calls, pieces, delay, whole=pieces == 4):
            floor = 1.1 * direct + 0.005
            label = f"{pieces}" + (f" {delay * 1000:g}ms" if delay else "")
            print(f"{name:<30} {label:>10} {direct * 1000:>7.2f}ms {through * 1000:>7.2f}ms {floor * 1000:>7.2f}ms "
                  f"{through / direct:>5.2f}x  {'yes' if through <= floor else 'NO'}")


if __name__ == "__main__":
    main()
