"""The package's shape: no import cycles, the oracle stays an oracle, kernels stand alone, docs match the tree."""
import ast
import os
import re

import ube_stream

PACKAGE_DIR = os.path.dirname(ube_stream.__file__)
REPO = os.path.dirname(PACKAGE_DIR)


def _modules():
    """``{dotted name: path}`` of every Python module of the package (kernels as leaves, path None)."""
    mods = {}
    for dirpath, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                dotted = os.path.relpath(path[:-3], REPO).replace(os.sep, ".")
                mods[dotted[:-len(".__init__")] if dotted.endswith(".__init__") else dotted] = path
    for kernel in ube_stream.KERNEL_MODULES:
        mods[f"ube_stream.{kernel}"] = None
    return mods


def _import_graph():
    """Every import statement counts: module level, function-local and TYPE_CHECKING alike."""
    mods = _modules()
    graph = {m: set() for m in mods}
    for mod, path in mods.items():
        if path is None:
            continue
        package = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                while target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in mods and target != mod:
                    graph[mod].add(target)
    return graph


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(_import_graph()) == []


def test_production_never_imports_the_reference_twins():
    graph = _import_graph()
    users = sorted(m for m, targets in graph.items() if "ube_stream._reference" in targets)
    assert users == []


def test_top_level_holds_about_a_dozen_modules():
    top = sorted(n for n in os.listdir(PACKAGE_DIR) if n.endswith(".py"))
    assert len(top) <= 14, top


def test_kernels_never_import_the_package():
    for name in sorted(os.listdir(os.path.join(REPO, "cython_src"))):
        if name.endswith((".pyx", ".pxd")):
            text = open(os.path.join(REPO, "cython_src", name), encoding="utf-8").read()
            assert not re.search(r"^\s*(from|import|cimport)\s+ube_stream", text, re.M), name


def test_layout_lists_every_subpackage():
    """The layout in docs/development.md (moved there from the README) names every module."""
    development = open(os.path.join(REPO, "docs", "development.md"), encoding="utf-8").read()
    layout = development[development.index("## Layout"):]
    subpackages = sorted(n for n in os.listdir(PACKAGE_DIR)
                         if os.path.isfile(os.path.join(PACKAGE_DIR, n, "__init__.py")))
    for name in subpackages:
        assert f"{name}/" in layout, name
    for name in os.listdir(PACKAGE_DIR):
        if name.endswith(".py") and name not in ("__init__.py", "__main__.py"):
            assert name in layout, name


def test_design_doc_is_in_the_repository():
    assert os.path.isfile(os.path.join(REPO, "docs", "DESIGN.md"))
