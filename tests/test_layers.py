"""The package's layers (pyproject.toml's import-linter contracts) hold, the
command line and ``logist serve`` reach jobs through ``logist.api`` alone, and
no module imports itself back.

The cycle finder is the project's tool (``../shared/tools/import_cycles.py``)
read into the suite: module-level imports, those under ``if`` and ``try``
(``TYPE_CHECKING`` too) included; an import inside a function is not
followed, and lint-imports, which counts those too, keeps them to the layers.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "logist"


def test_lint_imports_keeps_the_layer_contract():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


#: What the command line and logist serve may not import: they act on jobs through logist.api.
BEHIND_THE_API = ("logist.engine", "logist.store")


def test_the_command_line_and_serve_go_through_the_api_only():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "forbidden" and "logist.cli" in c["source_modules"]]
    assert sorted(contract["source_modules"]) == ["logist.cli", "logist.serve"]
    assert sorted(contract["forbidden_modules"]) == list(BEHIND_THE_API)
    assert contract["allow_indirect_imports"] is True, "logist.api itself imports them"
    # The same rule read from the sources here (module-level imports; lint-imports counts those in functions too).
    edges = import_graph()
    fronts = [m for m in edges if m.split(".")[:2] in (["logist", "cli"], ["logist", "serve"])]
    assert len(fronts) > 20 and "logist.api" in edges["logist.cli.app"]
    behind = {m: sorted(t for t in edges[m] if t.startswith(tuple(p + "." for p in BEHIND_THE_API)) or t in BEHIND_THE_API)
              for m in fronts}
    assert {m: found for m, found in behind.items() if found} == {}


#: What the front door's read side (logist.api.reading) may not load, even through others.
BEHIND_THE_READ_SIDE = ("logist.model", "logist.replay", "logist.engine.call", "logist.engine.prepare",
                        "logist.engine.step", "logist.engine.loop", "logist.api.jobs",
                        # what a read never needs: running a command, role files and coding agents, the transcript's writer
                        "logist.engine.commands", "logist.store.roles", "logist.agents", "logist.views.transcript",
                        "logist.views.refresh")


def test_the_read_side_of_the_api_loads_no_engine_step():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("source_modules") == ["logist.api.reading"]]
    assert set(BEHIND_THE_READ_SIDE) <= set(contract["forbidden_modules"])
    assert not contract.get("allow_indirect_imports", False), "what it loads through others counts"
    # The same rule read from the sources here: what logist.api.reading (and so logist.api, which
    # imports nothing else at its top) reaches through module-level imports.
    edges = import_graph()
    reached, todo = set(), ["logist.api.reading"]
    while todo:
        module = todo.pop()
        for target in edges[module] - reached:
            reached.add(target)
            todo.append(target)
    assert "logist.store.session" in reached and "logist.engine.workflow" in reached
    assert sorted(m for m in reached if m.startswith(BEHIND_THE_READ_SIDE)) == []
    top = ast.parse((PACKAGE / "api" / "__init__.py").read_text(encoding="utf-8")).body
    package_imports = {node.module for node in top if isinstance(node, ast.ImportFrom) and node.level}
    assert package_imports == {None, "reading"}, "logist.api loads its read side, the rest when asked for"


def test_every_module_of_the_package_has_a_layer():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    placed = [name.strip() for layer in contract["layers"] for name in layer.replace(":", "|").split("|")]
    modules = sorted(f"logist.{p.stem}" for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    for package in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        if f"logist.{package.name}" in placed:
            modules.append(f"logist.{package.name}")
        else:  # placed module by module (logist/protocol/, logist/model/...)
            modules += sorted(f"logist.{package.name}.{p.stem}" for p in package.glob("*.py") if p.name != "__init__.py")
    assert sorted(placed) == sorted(modules), "a module of logist/ with no layer in pyproject.toml, or a layer gone"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(current: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = current.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache  # read once per process: the tests only read it
def import_graph() -> dict[str, set[str]]:
    """Each module of logist/ and the package's modules it imports at module level."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_pkg = path.name == "__init__.py"
        top = list(tree.body) + [n for s in tree.body if isinstance(s, (ast.If, ast.Try)) for n in s.body]
        for node in top:
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_pkg, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("logist"):
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(edges):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_imports_itself_back():
    edges = import_graph()
    assert len(edges) > 90 and edges["logist.engine.step"], "the graph really read the package"
    assert cycles(edges) == []
