"""The package's import graph has no cycles and no package imports a package above it: data and imports
flow one way, up the floors of :data:`LAYERS`.

The graph is read from the source with ``ast`` (nothing is imported): every ``import`` and
``from ... import`` of a ``spacy_sapbert`` module, at module level or inside a function (lazy imports
are still dependencies), except those under ``if TYPE_CHECKING:`` (annotations only).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spacy_sapbert"
ROOT = PACKAGE.name

#: The floors of the package, bottom first (docs/development.md draws them). A module may import modules of its
#: own floor and of the floors below, never of a floor above. The package root (``spacy_sapbert/__init__.py``) is
#: the front door: it may import anything (lazily).
LAYERS: List[Tuple[str, ...]] = [
    ("about", "errors", "base"),
    ("kb", "assets"),
    ("mentions",),
    ("encoding",),
    ("index", "rerank", "calibration"),
    ("training",),
    ("context",),
    ("linker",),
    ("commands",),
    ("corpus", "ner", "evaluation"),
    ("cli", "__main__"),
]


def module_names(package: Path) -> Dict[str, Path]:
    """``dotted module name -> file`` for every ``.py`` under ``package`` (packages as their ``__init__``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST) -> List[ast.stmt]:
    """Import statements of ``tree``, skipping the bodies of ``if TYPE_CHECKING:``."""
    found: List[ast.stmt] = []
    stack: List[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _resolve(name: str, modules: Dict[str, Path]) -> Optional[str]:
    """The longest known module that ``name`` is or lies in (``a.b.func`` -> ``a.b``)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph(package: Path) -> Dict[str, Set[str]]:
    """``module -> modules of the package it imports``."""
    modules = module_names(package)
    graph: Dict[str, Set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf8"), str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one
                targets = [f"{base}.{alias.name}" for alias in node.names] or [base]
            for target in targets:
                if target.split(".")[0] != ROOT:
                    continue
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def find_cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """One cycle (as a path ``a -> b -> ... -> a``) per strongly connected component with a cycle."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    components: List[List[str]] = []

    def visit(v: str) -> None:  # Tarjan; the package has ~100 modules, recursion depth is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, set(comp)) for comp in components]


def _cycle_in(graph: Dict[str, Set[str]], comp: Set[str]) -> List[str]:
    start = min(comp)
    paths = {start: [start]}
    queue = [start]
    while queue:  # breadth first from start, back to start, inside the component
        v = queue.pop(0)
        for w in sorted(graph[v] & comp):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")  # a strongly connected component always has one


def test_package_import_graph_has_no_cycles():
    graph = import_graph(PACKAGE)
    assert len(graph) > 20 and "spacy_sapbert.encoding.torch_encoder" in graph["spacy_sapbert.encoding.onnx_encoder"]
    cycles = find_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _write_package(root: Path, files: Dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf8")
    return root / ROOT


def test_graph_sees_lazy_relative_and_submodule_imports(tmp_path):
    package = _write_package(tmp_path, {
        "__init__.py": "",
        "a.py": "from .b import thing\n",
        "b.py": "def f():\n    from .sub import c\n",
        "sub/__init__.py": "from . import c\n",
        "sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\nimport spacy_sapbert.a\n",
        "d.py": "from spacy_sapbert import a\nimport os\n",
    })
    graph = import_graph(package)
    assert graph == {
        "spacy_sapbert": set(),
        "spacy_sapbert.a": {"spacy_sapbert.b"},
        "spacy_sapbert.b": {"spacy_sapbert.sub.c"},
        "spacy_sapbert.sub": {"spacy_sapbert.sub.c"},
        "spacy_sapbert.sub.c": {"spacy_sapbert.a"},
        "spacy_sapbert.d": {"spacy_sapbert.a"},
    }
    assert find_cycles(graph) == [["spacy_sapbert.a", "spacy_sapbert.b", "spacy_sapbert.sub.c", "spacy_sapbert.a"]]


@pytest.mark.parametrize("guard", ["TYPE_CHECKING", "typing.TYPE_CHECKING"])
def test_type_checking_imports_make_no_cycle(tmp_path, guard):
    package = _write_package(tmp_path, {
        "__init__.py": "",
        "a.py": "from .b import thing\n",
        "b.py": f"import typing\nfrom typing import TYPE_CHECKING\nif {guard}:\n    from .a import other\n",
    })
    assert find_cycles(import_graph(package)) == []


def floor_of(module: str) -> Optional[int]:
    """The floor (index into :data:`LAYERS`) of a module, or None for the package root."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    for level, names in enumerate(LAYERS):
        if parts[1] in names:
            return level
    raise AssertionError(f"{module} is on no floor: add its top-level name to LAYERS (and to docs/development.md)")


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    """``a -> b`` for every import of a module on a higher floor than the importer's."""
    found = []
    for name in sorted(graph):
        here = floor_of(name)
        if here is None:
            continue
        for target in sorted(graph[name]):
            there = floor_of(target)
            if there is not None and there > here:
                found.append(f"{name} -> {target}")
    return found


def test_no_package_imports_a_package_above_it():
    graph = import_graph(PACKAGE)
    assert {floor_of(m) for m in graph} - {None} == set(range(len(LAYERS))), "a floor in LAYERS holds no module"
    upward = upward_imports(graph)
    assert not upward, "imports from a floor above: " + "; ".join(upward)


def test_upward_import_is_found(tmp_path):
    package = _write_package(tmp_path, {
        "__init__.py": "",
        "base/__init__.py": "",
        "base/util.py": "def f():\n    from ..linker.component import X\n",
        "linker/__init__.py": "",
        "linker/component.py": "from ..base.util import f\n",
    })
    assert upward_imports(import_graph(package)) == [
        "spacy_sapbert.base.util -> spacy_sapbert.linker.component"]


def drawn_floors(page: str) -> List[Tuple[str, ...]]:
    """The floors the first ``text`` block of docs/development.md draws, bottom first: a numbered line starts a
    floor; the names stand left of the description column (where the first line's description begins) and may go
    on in the next lines."""
    lines = page.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    column = re.match(r"\s*\d+\s+\S.*?\s{2,}(?=\S)", lines[0]).end()  # type: ignore[union-attr]
    floors: List[List[str]] = []
    for line in lines:
        names = line[:column].strip()
        head, _, rest = names.partition(" ")
        if head.isdigit():
            floors.append([])
            names = rest
        floors[-1].extend(n.strip().rstrip("/") for n in names.split(",") if n.strip())
    return [tuple(f) for f in floors]


def test_the_development_page_draws_the_floors():
    page = (PACKAGE.parent / "docs" / "development.md").read_text(encoding="utf8")
    assert drawn_floors(page) == LAYERS


def _function_level_imports(tree: ast.AST) -> List[ast.stmt]:
    """Import statements inside a function (any depth), skipping ``if TYPE_CHECKING:`` bodies."""
    found: List[ast.stmt] = []
    stack: List[Tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((child, in_function) for child in node.orelse)
            continue
        if in_function and isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inside) for child in ast.iter_child_nodes(node))
    return found


def lazy_imports_without_reason(package: Path) -> List[str]:
    """``file:line`` of every import of the package's own modules placed inside a function without a trailing
    ``# lazy: <reason>`` comment (the reason: the heavy dependency it keeps off the import path, or why else)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf8")
        lines = source.splitlines()
        for node in _function_level_imports(ast.parse(source, str(path))):
            own = node.level > 0 if isinstance(node, ast.ImportFrom) else False
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == ROOT:
                own = True
            if isinstance(node, ast.Import):
                own = any(alias.name.split(".")[0] == ROOT for alias in node.names)
            if own and "# lazy:" not in lines[node.lineno - 1] and "# lazy:" not in lines[node.end_lineno - 1]:
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return found


def test_own_imports_sit_at_the_top_unless_they_say_why():
    missing = lazy_imports_without_reason(PACKAGE)
    assert not missing, ("imports of the package inside a function without '# lazy: <reason>' (move them to the "
                         "top of the file, or say which heavy dependency keeps them there): " + ", ".join(missing))


def test_a_silent_lazy_import_is_found(tmp_path):
    package = _write_package(tmp_path, {
        "__init__.py": "",
        "a.py": "def f():\n    from .b import x\n    from .b import y  # lazy: torch\n    import json\n",
        "b.py": "x = y = 1\n",
    })
    assert lazy_imports_without_reason(package) == ["spacy_sapbert/a.py:2"]
