"""A skill run as seed 002 runs it (issue 29, acceptance 1): a tags role, the
seed's texts, [DONE] ending the job; checked on the requests the scripted
HTTP server receives."""

from __future__ import annotations

import json
import re

import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.step import step_once
from logist.errors import LogistError
from logist.resources import data_dir
from logist.store.prompts import builtin

from conftest import logist_cli

SKILL_BODY = (
    "## What I do\n\nI run these steps:\n1. `git status --porcelain`\n2. If there are changes, ask for a commit message\n"
    "3. Commit them to {{branch}}"
)
SKILL = f"---\nname: git-quick-commit\ndescription: Commit the work\nparams:\n  - name: branch\n    default: main\n---\n{SKILL_BODY}\n"
#: What the command prints: output that looks like a prompt, prompts, blank lines, five duplicate lines.
NOISY = "printf '100%%\\nC:\\\\Users\\\\me>dir\\nuser@host:~$ ls\\n\\n\\nsame\\nsame\\nsame\\nsame\\nsame\\n'"


def tagger(jobs, **changes) -> None:
    """``cp roles/worker.json <jobs-dir>/roles/tagger.json``, its name changed and ``"protocol": "tags"`` added."""
    role = json.loads((data_dir("roles") / "worker.json").read_text())
    role.update(name="tagger", protocol="tags")  # nothing else of the copy changed
    role.update(changes)
    role = {key: value for key, value in role.items() if value is not None}
    (jobs.path / "roles" / "tagger.json").write_text(json.dumps(role, indent=2))


def skill(jobs) -> None:
    folder = jobs.path / "skills" / "git-quick-commit"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)


def test_a_tags_role_runs_a_skill_with_seed_002s_texts_and_done_ends_the_job(jobs, llm):
    jobs.init()
    tagger(jobs)
    skill(jobs)
    (jobs.path / "context.md").write_text("Server: Ubuntu 22.04")
    # --no-review: with no checks, a skill's [DONE] ends the job without a person's approval.
    job = create_job(jobs, "commit", skill="git-quick-commit", params={"branch": "dev"}, worker="tagger", review=False,
                     command_policy="allow", allowed_commands=[NOISY])
    assert job.manifest().workflow == "solo" and job.manifest().roles == {"worker": "tagger"}

    llm.add(f"[CMD] {NOISY}", "[MESSAGE] Проверяю ветку dev...", "[ASK] Введи сообщение коммита:")
    assert run_job(job, endpoints=llm.endpoints)[-1].status == Status.INPUT_REQUIRED
    assert job.manifest().question.text == "Введи сообщение коммита:"
    user_action(job, "answer", "fix: update skills API")
    llm.add("[DONE] Коммит успешно создан: abc1234")
    assert run_job(job, endpoints=llm.endpoints)[-1].status == Status.SUCCESS

    requests = llm.requests
    assert len(requests) == 4, "no Supervisor call, no approval"
    seed_prompt = builtin().render("protocol/tags")
    system = (f"{seed_prompt}\n\n--- System Context ---\nServer: Ubuntu 22.04\n\n"
              f"--- Active Skill: git-quick-commit ---\n{SKILL_BODY.replace('{{branch}}', 'dev')}")
    for number, request in enumerate(requests, 1):
        assert (request["temperature"], request["max_tokens"]) == (0.3, 512)
        assert "response_format" not in request
        assert request["messages"][0] == {"role": "system", "content": system}
        users = [m["content"] for m in request["messages"] if m["role"] == "user"]
        assert [re.search(r"\n\n\[Step (\d+) of 100\]\Z", text).group(1) for text in users] == [
            str(n) for n in range(1, number + 1)]
    last = [request["messages"][-1]["content"] for request in requests]
    assert last == [
        "Execute skill: git-quick-commit\n\nParameters:\n- branch: dev\n\n[Step 1 of 100]",
        "Command output:\n100%\nsame\n\n[Step 2 of 100]",
        "[Continue after informational message]\n\n[Step 3 of 100]",
        "User response: fix: update skills API\n\n[Step 4 of 100]",
    ]
    assert [m["content"] for m in requests[-1]["messages"] if m["role"] == "assistant"] == [
        f"[CMD] {NOISY}", "[MESSAGE] Проверяю ветку dev...", "[ASK] Введи сообщение коммита:"]

    manifest = job.manifest()
    assert manifest.last_exit.summary == "Коммит успешно создан: abc1234"
    command = next(e for e in JobFiles(job.dir).load_history().interactions if e.command is not None).command
    assert command.raw_stdout == "100%\nC:\\Users\\me>dir\nuser@host:~$ ls\n\n\nsame\nsame\nsame\nsame\nsame\n"
    shown = logist_cli("job", "status", "commit")
    assert shown.returncode == 0, shown.stderr
    assert "Result:  Коммит успешно создан: abc1234" in shown.stdout


def test_a_tags_roles_own_instructions_and_settings_are_sent(jobs, llm):
    jobs.init()
    tagger(jobs, prompt_file=None, instructions="Answer in Russian.", temperature=0.7, max_tokens=100)
    skill(jobs)
    job = create_job(jobs, "own", "Закоммить всё", skill="git-quick-commit", worker="tagger", review=False)
    llm.add("[DONE] ok")
    step_once(job, endpoints=llm.endpoints)
    request = llm.requests[0]
    assert (request["temperature"], request["max_tokens"]) == (0.7, 100)
    system = request["messages"][0]["content"]
    assert "\n\n--- Role: tagger ---\nAnswer in Russian.\n\n--- Active Skill: git-quick-commit ---\n" in system
    # The person's own objective is seed 002's custom prompt, in place of "Execute skill: NAME".
    assert request["messages"][1]["content"] == "Закоммить всё\n\nParameters:\n- branch: main\n\n[Step 1 of 100]"
    assert job.manifest().status == Status.SUCCESS


def test_review_keeps_the_supervisor_and_the_persons_approval(jobs, llm):
    jobs.init()
    tagger(jobs)
    skill(jobs)
    created = logist_cli("job", "create", "reviewed", "--skill", "git-quick-commit", "--worker", "tagger", "--review")
    assert created.returncode == 0, created.stderr
    job = jobs.job("reviewed")
    assert job.manifest().workflow == "default"
    llm.add("[DONE] Committed.")
    assert step_once(job, endpoints=llm.endpoints).status == Status.REVIEWING
    with pytest.raises(LogistError, match="--review keeps the Supervisor; --workflow solo has none"):
        create_job(jobs, "both", skill="git-quick-commit", review=True, workflow="solo")
    with pytest.raises(LogistError, match="--supervisor: a solo job has only a Worker"):
        create_job(jobs, "sup", skill="git-quick-commit", supervisor="Supervisor")
    # A job without a skill keeps the default workflow unless asked.
    assert create_job(jobs, "plain", "Write hello.py").manifest().workflow == "default"
