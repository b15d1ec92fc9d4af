"""The documentation: its code runs, its API reference is complete, its tables are current.

- Every ``python`` and ``pycon`` code block of README.md and of the user
  guide (``docs/user_guide/*.md``, the migration guides) runs, in order, in
  one namespace per page; ``pycon`` blocks are doctests, so their printed
  output is checked too. A block fenced as ``{code-block}`` is shown, not run
  (cluster set-ups, long runs).
- Every public name exported by skcrf (``skcrf.__all__`` and the ``__all__``
  of its public modules) has an entry in ``docs/api.rst``.
- No public docstring points into a private module (``skcrf._...``).
- README.md's benchmark table is the one rendered from
  ``benchmarks/results/treebank.json``.

The Sphinx build itself (with ``-W``, the gallery executed) runs in ``.ci/run``.
"""

import doctest
import importlib
import inspect
import os
import re
import sys
import warnings
from pathlib import Path

import pytest

import skcrf

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PUBLIC_MODULES = [
    "skcrf.metrics",
    "skcrf.io",
    "skcrf.nltk",
    "skcrf.datasets",
    "skcrf.templates",
    "skcrf.dask",
    "skcrf.pycrfsuite",
    "skcrf.torch",  # needs PyTorch: checked when it is installed
]

FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence) *$",
    re.DOTALL | re.MULTILINE,
)


def code_blocks(path):
    """(language, code, line) of every fenced block of a Markdown file, in order."""
    text = path.read_text(encoding="utf-8")
    for match in FENCE.finditer(text):
        info = match.group("info").strip()
        indent = len(match.group("indent"))
        body = "\n".join(line[indent:] for line in match.group("body").splitlines()) + "\n"
        yield info.split()[0] if info else "", body, text.count("\n", 0, match.start()) + 2


def run_page(path, tmp_path):
    """Run every python / pycon block of ``path`` in one namespace; fail on the first error."""
    path = Path(path).resolve()
    namespace = {"__name__": f"docs_{path.stem}"}
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    parser = doctest.DocTestParser()
    ran = 0
    cwd = os.getcwd()
    os.chdir(tmp_path)  # files a page writes land here
    try:
        for language, code, line in code_blocks(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            if language == "python":
                exec(compile(code, where, "exec"), namespace)
            elif language == "pycon":
                test = parser.get_doctest(code, namespace, where, str(path), line)
                runner = doctest.DocTestRunner(optionflags=flags)
                runner.run(test, clear_globs=False)
                namespace.update(test.globs)  # DocTest works on a copy
                failures = runner.summarize(verbose=False).failed
                assert failures == 0, f"{failures} doctest example(s) failed in {where}"
            else:
                continue
            ran += 1
    finally:
        os.chdir(cwd)
    return ran


PAGES = sorted((DOCS / "user_guide").glob("*.md")) + [
    DOCS / "migration.md",
    DOCS / "migration_nltk.md",
    DOCS / "install.md",
]
TREEBANK_PAGES = set()  # pages that read the NLTK treebank (filled by the scan below)
for _page in PAGES:
    if _page.is_file() and "load_treebank(" in _page.read_text(encoding="utf-8"):
        TREEBANK_PAGES.add(_page.name)


@pytest.mark.parametrize("page", [p for p in PAGES if p.is_file()], ids=lambda p: p.name)
def test_docs_page_code_runs(page, tmp_path, request, capsys):
    if page.name in TREEBANK_PAGES:
        request.getfixturevalue("treebank")
    if "import nltk" in page.read_text(encoding="utf-8") or "skcrf.nltk" in page.read_text(
        encoding="utf-8"
    ):
        pytest.importorskip("nltk")
    if "import eli5" in page.read_text(encoding="utf-8"):
        try:
            import eli5  # noqa: F401
        except ImportError as exc:  # missing, or not importable with this scikit-learn
            pytest.skip(f"eli5 is not importable: {exc}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pages show warnings on purpose (ConvergenceWarning)
        run_page(page, tmp_path)


def test_readme_code_runs(tmp_path):
    assert run_page(ROOT / "README.md", tmp_path) >= 1


def documented_names():
    """{module: names} of the autosummary entries of docs/api.rst."""
    names, module = {}, "skcrf"
    in_autosummary = False
    for line in (DOCS / "api.rst").read_text(encoding="utf-8").splitlines():
        current = re.match(r"\.\. currentmodule:: (\S+)", line)
        if current:
            module = current.group(1)
            continue
        if line.startswith(".. autosummary::"):
            in_autosummary = True
            continue
        if in_autosummary:
            if line.startswith("   :") or not line.strip():
                continue
            if line.startswith("   "):
                names.setdefault(module, set()).add(line.strip())
                continue
            in_autosummary = False
    return names


def public_modules():
    modules = {"skcrf": skcrf}
    for name in PUBLIC_MODULES:
        try:
            modules[name] = importlib.import_module(name)
        except ImportError:  # an optional dependency is missing
            continue
    return modules


def test_every_public_name_has_an_api_page():
    documented = documented_names()
    missing = []
    for module_name, module in public_modules().items():
        for name in module.__all__:
            if inspect.ismodule(getattr(module, name)):
                assert f"{module.__name__}.{name}" in PUBLIC_MODULES, (
                    f"{module_name}.{name} is a module that docs/api.rst does not cover "
                    "(add it to PUBLIC_MODULES here and a section to docs/api.rst)"
                )
                continue
            if name not in documented.get(module_name, set()):
                missing.append(f"{module_name}.{name}")
    assert not missing, "exported but without an entry in docs/api.rst: " + ", ".join(missing)
    for module_name in PUBLIC_MODULES:
        assert module_name in documented, f"docs/api.rst has no section for {module_name}"


def public_docstrings():
    """(qualified name, docstring) of every public object and its public members."""
    seen = set()
    for module_name, module in public_modules().items():
        yield module_name, module.__doc__ or ""
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.ismodule(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            qualified = f"{module_name}.{name}"
            yield (
                qualified,
                inspect.getdoc(obj) or "" if not isinstance(obj, (dict, int, str)) else "",
            )
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_") and member != "__init__":
                        continue
                    doc = getattr(value, "__doc__", None)
                    if isinstance(value, property):
                        doc = value.fget.__doc__
                    if isinstance(doc, str):
                        yield f"{qualified}.{member}", doc


def test_no_public_docstring_names_a_private_module():
    offenders = [name for name, doc in public_docstrings() if re.search(r"skcrf\._[a-z]", doc)]
    assert not offenders, "docstrings that point into private modules: " + ", ".join(offenders)


def test_readme_benchmark_table_is_current():
    sys.path.insert(0, str(DOCS / "_tools"))
    try:
        import render_benchmarks
    finally:
        sys.path.pop(0)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert render_benchmarks.START in text and render_benchmarks.END in text
    assert render_benchmarks.update_readme(text) == text, (
        "README.md's benchmark table is stale: python docs/_tools/render_benchmarks.py --readme"
    )
