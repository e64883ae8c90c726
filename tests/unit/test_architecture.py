"""The shape of the package, checked: what ARCHITECTURE.md and issue 15's rules promise.

* no import cycle between memoryd's modules (module-level imports; a function-level import is a
  deliberate late binding and does not count);
* the read side (``memoryd.read``) imports nothing from the write side (``memoryd.write``);
* no module over 600 lines, no class over 300;
* every exception class lives in ``memoryd/errors.py`` and is drawn in its tree;
* ARCHITECTURE.md's module table lists exactly the modules in the tree.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import memoryd

PKG = Path(memoryd.__file__).resolve().parent
REPO = PKG.parent


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the checks below (they only read it)."""
    return ast.parse(path.read_text())


def _resolve(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def top_level_imports(mod: str, path: Path, known: set[str]) -> set[str]:
    """memoryd modules imported at module level (TYPE_CHECKING blocks and function bodies excluded)."""
    tree = parsed(path)
    out: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith("memoryd"))
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(mod, node, path.name == "__init__.py")
                if not target.startswith("memoryd"):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    out.add(sub if sub in known else target)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, block, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child])

    visit(tree.body)
    return {m for m in out if m in known and m != mod}


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: top_level_imports(m, p, known) for m, p in mods.items()}


def test_the_graph_sees_real_edges() -> None:
    g = graph()
    # guards the test itself: a parser that saw no edges would pass every rule below
    assert "memoryd.store.db" in g["memoryd.store"]
    assert "memoryd.errors" in g["memoryd.fsutil"]
    assert "memoryd.write.phase1" in g["memoryd.write.passes"]


def test_no_import_cycles() -> None:
    g = graph()
    # A package's __init__ importing its own submodules is not a cycle in practice only when the
    # submodules do not import the package back; count every edge and report the first loop.
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(g[m]):
            if state.get(n) == 1:
                cycles.append([*stack[stack.index(n) :], n])
            elif n not in state:
                dfs(n)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            dfs(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:5])


def test_the_read_side_imports_nothing_from_the_write_side() -> None:
    g = graph()
    reach: dict[str, set[str]] = {}

    def closure(m: str) -> set[str]:
        if m not in reach:
            reach[m] = set()
            for n in g[m]:
                reach[m] |= {n} | closure(n)
        return reach[m]

    offenders = {
        m: sorted(n for n in closure(m) if n.startswith("memoryd.write"))
        for m in g
        if m.startswith("memoryd.read")
    }
    assert not {m: v for m, v in offenders.items() if v}


def test_no_module_over_600_lines_and_no_class_over_300() -> None:
    long_modules, long_classes = [], []
    for mod, path in modules().items():
        text = path.read_text()
        if text.count("\n") > 600:
            long_modules.append((mod, text.count("\n")))
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > 300:
                    long_classes.append((f"{mod}.{node.name}", size))
    assert not long_modules and not long_classes, (long_modules, long_classes)


def test_every_exception_class_lives_in_errors_and_is_drawn() -> None:
    errors_py = PKG / "errors.py"
    elsewhere = []
    for mod, path in modules().items():
        if path == errors_py:
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ClassDef) and any(
                re.search(r"(Error|Exception|Exit|Wait|Lost|Failure)$", ast.unparse(b))
                for b in node.bases
            ):
                elsewhere.append(f"{mod}.{node.name}")
    assert not elsewhere, f"exception classes outside errors.py: {elsewhere}"
    tree = ast.parse(errors_py.read_text())
    doc = ast.get_docstring(tree) or ""
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert len(classes) > 20
    undrawn = [c for c in classes if not re.search(rf"[─└├]── {c}\b|^\s*{c}$", doc, re.M)]
    assert not undrawn, f"classes missing from the drawn tree: {undrawn}"


def test_no_bare_memoryd_error_is_raised() -> None:
    raised = []
    for mod, path in modules().items():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Raise) and node.exc is not None:
                call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(call, ast.Name) and call.id == "MemorydError":
                    raised.append(f"{mod}:{node.lineno}")
    assert not raised


def architecture_table() -> set[str]:
    text = (REPO / "ARCHITECTURE.md").read_text()
    section = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        first_cell = row.split("|")[1]
        names.update(re.findall(r"`([^`]+)`", first_cell))
    return names


def test_architecture_lists_exactly_the_modules_in_the_tree() -> None:
    listed = {n for n in architecture_table() if n.endswith(".py")}
    actual = {str(p.relative_to(PKG)) for p in PKG.rglob("*.py")}
    missing = sorted(actual - listed)
    gone = sorted(listed - actual)
    assert not missing and not gone, f"not in ARCHITECTURE.md: {missing}; listed but gone: {gone}"
