"""Recorded and scripted jobs: a job run again from its history without a
model (:mod:`.apply`), fixtures (:mod:`.fixtures`), the OpenAI-compatible
servers that answer as a recording or a script says (:mod:`.server`,
:mod:`.scripted`), the pytest plugin (:mod:`.pytest_plugin`) and the demo.

Public, as docs/replay.md documents them: the pytest fixtures ``scripted_llm``
and ``replay_llm``; :class:`logist.replay.scripted.ScriptedLLMServer` and
:func:`logist.replay.scripted.answer`; :class:`logist.replay.server.ReplayLLMServer`;
a job made from a fixture (``Jobs.create_from_fixture``, which calls
:func:`logist.replay.fixtures.create_from_fixture`). The rest is internal:
it may change in any release; use :mod:`logist.api`.
"""
