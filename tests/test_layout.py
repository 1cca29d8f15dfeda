"""The package's shape, as docs/architecture.md ("how it is built") describes it."""

from __future__ import annotations

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "logist"


def _built_section() -> str:
    return (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_the_architecture_page_names_every_subpackage_and_core_module():
    section = _built_section()
    subpackages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    for name in subpackages:
        assert f"logist/{name}/" in section, f"docs/architecture.md does not name logist/{name}/"
    for name in ("terminal", "errors", "schemas", "docs_pages"):
        assert (PACKAGE / f"{name}.py").is_file() and f"logist/{name}.py" in section
    # The packages named for a concern name each of their modules.
    for package in ("api", "protocol", "model", "workspace", "secrets"):
        for module in sorted((PACKAGE / package).glob("*.py")):
            if module.name != "__init__.py":
                assert module.name in section, f"docs/architecture.md does not name {package}/{module.name}"
    for path in ("engine/step.py", "engine/prepare.py", "engine/session.py", "store/recovery.py", "engine/workflow.py",
                 "workspace/repository.py", "protocol/answer.py", "store/journal.py", "model/client.py"):
        assert (PACKAGE / path).is_file() and path in section
