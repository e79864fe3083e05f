"""Imports inside the package run one way: no module imports, directly or through others, a
module that imports it back — function-level (lazy) imports included, since a lazy import only
hides a circle. `from . import sibling` counts as importing the sibling, not the package."""

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "wfstdecode"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = {f"{target}.{a.name}" for a in node.names} & mods.keys()
            found |= submodules
            if len(submodules) < len(node.names):
                found.add(target)  # names defined in the module (package) itself
    return {m for m in found if m in mods and m != name}


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    mods = _modules()
    edges = {name: _imports(name, path, mods) for name, path in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(mods):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    assert import_cycles() == []


def test_the_check_sees_a_cycle(tmp_path, monkeypatch):
    """The check itself: two modules that import each other (one lazily) are reported."""
    pkg = tmp_path / "wfstdecode"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    assert import_cycles() == [["wfstdecode.a", "wfstdecode.b"]]
