"""The package's floors: every import points down (or sideways), never up, no circles.

Every import of every module counts: module level, inside functions,
under ``TYPE_CHECKING``, and the ``cimport``/``import`` lines of the
compiled modules. ``docs/architecture.md`` draws the same floors.
"""

import ast
import re
from pathlib import Path

import skcrf

PACKAGE = Path(skcrf.__file__).parent

# Lowest first. A module may import modules of its own floor or of lower
# ones. The key is a module name or a package prefix (longest match wins).
FLOORS = [
    ["skcrf._version", "skcrf._typing", "skcrf._compat", "skcrf._model", "skcrf._utils"],
    ["skcrf._featurize"],
    ["skcrf._template"],
    ["skcrf._inference"],
    ["skcrf._training"],
    ["skcrf._persist"],
    ["skcrf.metrics", "skcrf._dask"],
    ["skcrf._tagger_view", "skcrf._predictor"],
    ["skcrf._tagger"],
    ["skcrf._cv", "skcrf._interop"],
    [
        "skcrf",
        "skcrf.io",
        "skcrf.nltk",
        "skcrf.dask",
        "skcrf.datasets",
        "skcrf.templates",
        "skcrf.pycrfsuite",
        # imports the moved modules by name (importlib), not by import lines
        "skcrf._moved",
    ],
    # the command line: a layer over the public modules
    ["skcrf._cli", "skcrf.__main__"],
]


def _floor(module):
    best, best_len = None, -1
    for level, names in enumerate(FLOORS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = level, len(name)
    return best


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(module, level, current, is_package):
    if level == 0:
        return module
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


_COMPILED_IMPORT = re.compile(
    r"^\s*(?:from\s+([\w.]+)\s+c?import\b|c?import\s+([\w.]+))", re.MULTILINE
)


def _imports(path):
    """The skcrf modules that the file at ``path`` imports (anywhere in it)."""
    current = _module_name(path)
    found = set()
    if path.suffix == ".py":
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(node.module, node.level, current, is_package)
                found.add(target)
                # ``from skcrf._inference import _kernels`` imports a module
                found.update(f"{target}.{alias.name}" for alias in node.names)
    else:
        text = path.read_text(encoding="utf-8")
        for match in _COMPILED_IMPORT.finditer(text):
            found.add(match.group(1) or match.group(2))
    modules = _all_modules()
    return {name for name in found if name in modules and name != current}


def _all_modules():
    names = set()
    for path in PACKAGE.rglob("*"):
        if path.suffix in (".py", ".pyx", ".pxd"):
            names.add(_module_name(path))
    return names


def _files():
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".pyx", ".pxd"))


def _graph():
    graph = {}
    for path in _files():
        graph.setdefault(_module_name(path), set()).update(_imports(path))
    return graph


def test_every_module_has_a_floor():
    unplaced = sorted(m for m in _all_modules() if _floor(m) is None)
    assert not unplaced, f"modules missing from FLOORS (and docs/architecture.md): {unplaced}"


def test_imports_point_down():
    upward = []
    for module, targets in _graph().items():
        for target in targets:
            if target == "skcrf":
                upward.append(f"{module} -> {target}")
            elif _floor(target) > _floor(module):
                upward.append(f"{module} (floor {_floor(module)}) -> {target} ({_floor(target)})")
    assert not upward, "imports that point up: " + "; ".join(sorted(upward))


def test_no_import_circles():
    graph = _graph()
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(node):  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, f"import circles: {cycles}"


def test_the_checker_sees_upward_and_circular_imports(tmp_path, monkeypatch):
    # the test above would catch a lazy upward import inside a function
    fake = tmp_path / "skcrf"
    (fake / "_utils").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "_tagger.py").write_text("from ._utils import _threads\n")
    (fake / "_utils" / "__init__.py").write_text("")
    (fake / "_utils" / "_threads.py").write_text(
        "def f():\n    from .._tagger import CRFTagger\n    return CRFTagger\n"
    )
    monkeypatch.setattr(f"{__name__}.PACKAGE", fake)
    graph = _graph()
    assert graph["skcrf._utils._threads"] == {"skcrf._tagger"}
    assert graph["skcrf._tagger"] == {"skcrf._utils", "skcrf._utils._threads"}
    assert _floor("skcrf._utils._threads") < _floor("skcrf._tagger")
