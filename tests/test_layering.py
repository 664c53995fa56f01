"""The package's module layering: the import graph between its modules has no cycle, the library
never imports the command line, and no command module imports another (they share ``cli._common``)."""

from __future__ import annotations

import ast
from pathlib import Path

import accessibility

PACKAGE = Path(accessibility.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {_module(p) for p in FILES}


def _imports(path: Path, top_level_only: bool) -> set[str]:
    """The ``accessibility`` modules ``path`` imports (``from accessibility.x import y`` names
    ``accessibility.x.y`` when that is a module, else ``accessibility.x``)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("accessibility")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accessibility"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in MODULES else node.module)
    return found - {_module(path)}


def _graph(top_level_only: bool) -> dict[str, set[str]]:
    return {_module(p): _imports(p, top_level_only) & MODULES for p in FILES}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_module_level_imports_have_no_cycle():
    assert _cycle(_graph(top_level_only=True)) is None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_library_never_imports_the_command_line():
    graph = _graph(top_level_only=False)
    library = [m for m in graph if not m.startswith(("accessibility.cli", "accessibility.__main__"))]
    offenders = {m: sorted(i for i in graph[m] if i.startswith("accessibility.cli")) for m in library}
    assert not {m: d for m, d in offenders.items() if d}


def test_command_modules_share_only_common():
    graph = _graph(top_level_only=False)
    commands = {m for m in graph if m.startswith("accessibility.cli.") and m != "accessibility.cli._common"}
    assert len(commands) >= 5
    assert not {m: sorted(graph[m] & commands) for m in commands if graph[m] & commands}
