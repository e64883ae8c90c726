"""The shape of the package, checked: what ARCHITECTURE.md promises.

* every module belongs to one layer (:data:`LAYERS`), and imports only from its own layer or the
  layers before it; function-level imports count (a late import is still a dependency: it only
  moves the cost), imports under ``if TYPE_CHECKING:`` do not (they never run);
* no import cycle, function-level imports included;
* ARCHITECTURE.md names the layers in this order and files each module under its layer;
* every module name is distinct across the tree (and none is named like one of the packages);
* at most 16 modules loose in ``memoryd/``; no module over 600 lines, no class over 300;
* no ``_private`` name is imported from another module;
* every exception class lives in ``memoryd/errors.py`` and is drawn in its tree;
* ARCHITECTURE.md's module table lists exactly the modules in the tree.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import memoryd

PKG = Path(memoryd.__file__).resolve().parent
REPO = PKG.parent

# The layers, lowest first: (name, the modules and packages in it). A module may import from its
# own layer and from any layer before it, never from one after it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundations",
        (
            "memoryd",
            "memoryd.errors",
            "memoryd.exitcodes",
            "memoryd.tuning",
            "memoryd.clock",
            "memoryd.paths",
            "memoryd.settings",
            "memoryd.fsutil",
            "memoryd.owner",
            "memoryd.prompts",
            "memoryd.scopes",
            "memoryd.child",
            "memoryd.tokenizer",
            "memoryd.redact",
        ),
    ),
    ("store", ("memoryd.store",)),
    ("host", ("memoryd.host",)),
    ("folder", ("memoryd.folder",)),
    ("exchange", ("memoryd.extensions", "memoryd.sync")),
    ("read", ("memoryd.read",)),
    ("tools", ("memoryd.tools",)),
    ("runner", ("memoryd.runner",)),
    ("write", ("memoryd.write",)),
    ("admin", ("memoryd.tools.admin",)),
    (
        "edges",
        (
            "memoryd.__main__",
            "memoryd.toolcall",
            "memoryd.mcp_handshake",
            "memoryd.cli",
            "memoryd.web",
            "memoryd.runtime",
        ),
    ),
]
LAYER_NAMES = [name for name, _ in LAYERS]
MAX_LOOSE_MODULES = 16


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layer_of(mod: str) -> str | None:
    """The layer whose longest member is ``mod`` or a package holding it (``memoryd`` itself is
    only the package's ``__init__``, not everything under it)."""
    best: tuple[int, str] | None = None
    for name, members in LAYERS:
        for m in members:
            inside = mod == m or (m != "memoryd" and mod.startswith(m + "."))
            if inside and (best is None or len(m) > best[0]):
                best = (len(m), name)
    return best[1] if best else None


def _resolve(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skip.update(id(n) for n in ast.walk(stmt))
    return skip


def imports(mod: str, path: Path, known: set[str]) -> dict[str, str]:
    """memoryd modules ``mod`` imports, anywhere in the file, each with where: ``"module"`` when
    one import of it runs at import time, else ``"function"``. TYPE_CHECKING blocks are left out."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    top = {
        id(n) for n in ast.walk(tree) if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    in_functions: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            in_functions.update(id(n) for n in ast.walk(fn))
    top -= in_functions
    out: dict[str, str] = {}

    def add(target: str, node: ast.AST) -> None:
        while target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in known and target != mod:
            where = "module" if id(node) in top else "function"
            if out.get(target) != "module":
                out[target] = where

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("memoryd"):
                    add(a.name, node)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(mod, node, path.name == "__init__.py")
            if not target.startswith("memoryd"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                add(sub if sub in known else target, node)
    return out


def graph() -> dict[str, dict[str, str]]:
    mods = modules()
    known = set(mods)
    return {m: imports(m, p, known) for m, p in mods.items()}


def test_the_graph_sees_real_edges() -> None:
    g = graph()
    # guards the test itself: a parser that saw no edges would pass every rule below
    assert g["memoryd.store"]["memoryd.store.db"] == "module"
    assert g["memoryd.fsutil"]["memoryd.errors"] == "module"
    assert g["memoryd.write.passes"]["memoryd.write.phase1"] == "module"
    # function-level imports are edges too; TYPE_CHECKING ones are not
    assert g["memoryd.cli.mcp"]["memoryd.cli.mcp_server"] == "function"
    assert g["memoryd.toolcall"]["memoryd.tools.shim"] == "function"
    assert "memoryd.tools.index" not in g["memoryd.tools.search"]


def test_every_module_is_in_one_layer_and_the_layers_are_known() -> None:
    assert [m for m in modules() if layer_of(m) is None] == []
    members = [m for _, ms in LAYERS for m in ms]
    assert len(members) == len(set(members))
    assert all(m in modules() for m in members), "a layer names a module that is gone"


def test_no_module_imports_from_a_later_layer() -> None:
    rank = {name: i for i, name in enumerate(LAYER_NAMES)}
    upward = [
        f"{m} ({layer_of(m)}) -> {n} ({layer_of(n)}, {where} level)"
        for m, deps in graph().items()
        for n, where in sorted(deps.items())
        if rank[layer_of(n) or ""] > rank[layer_of(m) or ""]
    ]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_no_import_cycles_function_level_imports_included() -> None:
    g = graph()
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


def test_module_names_are_distinct_across_the_tree() -> None:
    files = [p for p in PKG.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    names = Counter(p.stem for p in files)
    packages = {p.parent.name for p in PKG.rglob("__init__.py")}
    twice = sorted(n for n, c in names.items() if c > 1)
    like_a_package = sorted(n for n in names if n in packages)
    assert not twice and not like_a_package, (twice, like_a_package)


def test_few_modules_are_loose_in_the_package() -> None:
    loose = sorted(p.name for p in PKG.glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_no_private_name_is_imported_from_another_module() -> None:
    private = []
    for mod, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(mod, node, path.name == "__init__.py")
                if target.startswith("memoryd"):
                    private += [
                        f"{mod}: {target}.{a.name}"
                        for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")
                    ]
    assert not private, private


def test_no_module_over_600_lines_and_no_class_over_300() -> None:
    long_modules, long_classes = [], []
    for mod, path in modules().items():
        text = path.read_text()
        if text.count("\n") > 600:
            long_modules.append((mod, text.count("\n")))
        for node in ast.walk(ast.parse(text)):
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
        for node in ast.walk(ast.parse(path.read_text())):
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
        for node in ast.walk(ast.parse(path.read_text())):
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


def _modules_section() -> str:
    text = (REPO / "ARCHITECTURE.md").read_text()
    return text.split("## Modules", 1)[1].split("\n## ", 1)[0]


def test_architecture_names_the_layers_in_order() -> None:
    rows = re.findall(r"^\| ([a-z]+) \| ", _modules_section(), re.M)
    assert [r for r in rows if r in LAYER_NAMES or r not in ("module", "layer")] == LAYER_NAMES


def test_architecture_files_each_module_under_its_layer() -> None:
    misfiled, current = [], None
    for row in _modules_section().splitlines():
        heading = re.match(r"^\*\*(\w+)\*\*", row)
        if heading:
            current = heading.group(1).lower()
        elif row.startswith("| `") and current is not None:
            for rel in re.findall(r"`([^`]+\.py)`", row.split("|")[1]):
                mod = module_name(PKG / rel)
                if layer_of(mod) != current:
                    misfiled.append(f"{rel}: under {current}, in layer {layer_of(mod)}")
    assert not misfiled, misfiled


# Same name and value in two modules, on purpose: each names a different thing.
SAME_BY_DESIGN = {
    "MEMORY_FILE": "Codex's own file names (extensions/codex.py) match ours because we port its layout",
    "SUMMARY_FILE": "as MEMORY_FILE",
    "STAGED": "two different staging folders (review mode, held agent edits)",
    "META": "as STAGED",
}


def test_no_constant_is_defined_twice() -> None:
    """A module-level UPPER_CASE constant with one name and one value is defined once (tuning
    knobs in ``tuning.py``, names of things beside what they name); the others import it."""
    seen: dict[tuple[str, str], list[str]] = {}
    for mod, path in modules().items():
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and len(t.id) > 1 and t.id.isupper() and t.id[0] != "_":
                    value = ast.unparse(node.value)
                    seen.setdefault((t.id, value), []).append(mod)
    twice = {k: v for k, v in seen.items() if len(v) > 1 and k[0] not in SAME_BY_DESIGN}
    assert not twice, twice


def test_the_racy_window_and_git_modes_are_tuning_constants() -> None:
    offenders = []
    for mod, path in modules().items():
        if mod == "memoryd.tuning":
            continue
        text = path.read_text()
        if re.search(r"^\w*RACY\w* = |= 0o(100644|100755|040000)\b", text, re.M):
            offenders.append(mod)
    assert not offenders, offenders


# The one package that is an API of its own: the memory tools, one surface for the CLI, the MCP
# server and the web UI (its admin tools load on first use, so `memoryd tool` stays lean).
REEXPORTING = {"memoryd.tools"}


def test_no_module_re_exports_what_another_defines() -> None:
    """Every importer names the module that defines a name: ``__all__`` lists only a module's
    own definitions (mypy --strict refuses implicit re-exports of the rest)."""
    offenders = {}
    for mod, path in modules().items():
        if mod in REEXPORTING:
            continue
        tree = ast.parse(path.read_text())
        defined, listed = set(), []
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            if not isinstance(node, ast.Assign | ast.AnnAssign):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    defined.add(t.id)
                    if t.id == "__all__" and isinstance(node.value, ast.List | ast.Tuple):
                        listed = [ast.literal_eval(e) for e in node.value.elts]
        foreign = [n for n in listed if n not in defined]
        if foreign:
            offenders[mod] = foreign
    assert not offenders, offenders
