"""Run one agent through the runner in a network namespace with loopback only
(started by the test as ``unshare --net --mount --map-root-user python
netns_agent.py AGENT WORKSPACE``), and print, as one JSON object, what it did
and every host name anything looked up while it ran.

Inside the namespace: ``lo`` is brought up, ``/etc/resolv.conf`` is replaced
(in this mount namespace only) by one naming 127.0.0.1, where a small DNS
listener writes down every name asked for and answers that it does not
exist. A lookup of a name the script makes itself after the run shows that
the listener hears lookups; the agent's own are the ones before it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]  # agent_helpers, conftest

from agent_helpers import (NativeServer, codex_shell_call, messages_turn, responses_message,  # noqa: E402
                           responses_turn)
from logist import programs  # noqa: E402
from logist.agents import run_agent  # noqa: E402
from logist.replay.scripted import Reply, ScriptedLLMServer  # noqa: E402

class TitledServer(ScriptedLLMServer):
    """Answers a request without tools (opencode's title request) apart from the script."""

    def reply_for(self, body, headers):
        return super().reply_for(body, headers) if body.get("tools") else Reply(content="Writing hello.py")


#: The name the script looks up itself, after the run: the listener must hear it.
CONTROL_NAME = "control-lookup.logist.invalid"


def names_in(query: bytes) -> str:
    """The name a DNS query asks for."""
    labels, position = [], 12
    while position < len(query) and query[position]:
        length = query[position]
        labels.append(query[position + 1:position + 1 + length].decode(errors="replace"))
        position += 1 + length
    return ".".join(labels)


def listen(heard: list[str]) -> None:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 53))

    def serve() -> None:
        while True:
            query, address = udp.recvfrom(4096)
            heard.append(names_in(query))
            # NXDOMAIN: the query echoed with the answer bit and rcode 3.
            answer = query[:2] + bytes([0x81, 0x83]) + query[4:6] + b"\0\0\0\0\0\0" + query[12:]
            udp.sendto(answer, address)

    threading.Thread(target=serve, daemon=True).start()


def main() -> None:
    agent, workspace = sys.argv[1], Path(sys.argv[2])
    subprocess.run([programs.program("ip") or "ip", "link", "set", "lo", "up"], check=True)
    resolv = Path(tempfile.mkdtemp()) / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    subprocess.run([programs.program("mount") or "mount", "--bind", str(resolv), "/etc/resolv.conf"], check=True)
    heard: list[str] = []
    listen(heard)
    token = "netns-run-token"
    hello = {"content": 'print("hello")\n'}
    if agent == "aider":
        server = ScriptedLLMServer(['hello.py\n```python\nprint("hello")\n```\n'])
    elif agent in ("qwen-code", "opencode"):
        tool, key = ("write_file", "file_path") if agent == "qwen-code" else ("write", "filePath")
        server = TitledServer([Reply(tool_call=tool, content=json.dumps({key: str(workspace / "hello.py"), **hello})),
                               "Created hello.py."])
    elif agent == "codex":
        server = NativeServer([responses_turn(1, codex_shell_call("printf 'print(\"hello\")\\n' > hello.py")),
                               responses_turn(2, responses_message("Created hello.py."))], token,
                              responses_turn(9, responses_message("ok")))
    else:
        server = NativeServer([messages_turn(1, [{"type": "tool_use", "name": "Write", "input": {
                                   "file_path": str(workspace / "hello.py"), "content": 'print("hello")\n'}}],
                                   "tool_use"),
                               messages_turn(2, [{"type": "text", "text": "Created hello.py."}], "end_turn")],
                              token, messages_turn(9, [{"type": "text", "text": "ok"}], "end_turn"))
    with server:
        result = run_agent(agent, workspace, "Create hello.py that prints hello.", server.base_url, token,
                           "scripted", timeout=180)
    by_agent = list(heard)
    try:
        socket.getaddrinfo(CONTROL_NAME, 443)
    except socket.gaierror:
        pass
    print(json.dumps({"exit_code": result.exit_code, "changed": result.changed_files,
                      "action": result.exit.answer.action, "requests": len(server.requests),
                      "looked_up": by_agent, "control_heard": CONTROL_NAME in heard,
                      "stderr": result.stderr_tail[-2000:], "stdout": result.stdout_tail[-2000:]}))


if __name__ == "__main__":
    main()
