"""Sphinx configuration of the skcrf documentation.

Build (from the repository root, with ``pip install -e ".[docs]"``)::

    python -m sphinx -W -b html docs docs/_build/html

The build never uses the network. Cross-references to Python, numpy, scipy,
scikit-learn and NLTK go through intersphinx only when an inventory
(``objects.inv``) is on this machine: Debian's documentation packages, or a
folder named by ``SKCRF_INTERSPHINX_DIR`` holding ``python.inv``,
``numpy.inv``, ``scipy.inv``, ``sklearn.inv``, ``nltk.inv``. The build says
which it found and which it skipped. The gallery runs ``examples/*.py`` on a
small slice of the NLTK Penn Treebank sample (``NLTK_DATA`` must point at a
folder holding ``corpora/treebank.zip`` when it is not in NLTK's data path).
"""

import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_tools"))

import render_benchmarks  # noqa: E402

import skcrf  # noqa: E402

project = "skcrf"
author = "the skcrf developers"
copyright = "the skcrf developers"
version = release = skcrf.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # MathJax from the site's own _static/mathjax, not a CDN: the math
    # renders offline (tools/check_docs_browser.py checks every page)
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_tools", "_templates", "README.md", "**/README.md"]
# The benchmark tables are included into benchmarks.md below its title.
suppress_warnings = ["myst.header"]
templates_path = ["_templates"]

# -- MyST (Markdown pages) ---------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# -- autodoc, autosummary, numpydoc ------------------------------------------
autosummary_generate = True
# inherited members only where a template asks (":inherited-members:"); a False
# default here would override the directive option (Sphinx 9)
autodoc_default_options = {"members": True}
autodoc_typehints = "none"
# skcrf.torch needs PyTorch (an optional extra): without it, its API page is
# built from a mocked torch (CI installs torch before the docs build).
autodoc_mock_imports = []
try:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        autodoc_mock_imports.append("torch")
except (ImportError, ValueError):
    autodoc_mock_imports.append("torch")
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- intersphinx, offline only -------------------------------------------------
# name -> (URL the links point to, local inventories to try, in order)
_INVENTORIES = {
    "python": (
        "https://docs.python.org/3",
        [
            "/usr/share/doc/python3/html/objects.inv",
            f"/usr/share/doc/python3.{sys.version_info.minor}/html/objects.inv",
            f"/usr/share/doc/python3.{sys.version_info.minor}-doc/html/objects.inv",
        ],
    ),
    "numpy": (
        "https://numpy.org/doc/stable",
        [
            "/usr/share/doc/python-numpy/html/objects.inv",
            "/usr/share/doc/python-numpy-doc/html/objects.inv",
        ],
    ),
    "scipy": (
        "https://docs.scipy.org/doc/scipy",
        [
            "/usr/share/doc/python-scipy-doc/html/objects.inv",
        ],
    ),
    "sklearn": (
        "https://scikit-learn.org/stable",
        [
            "/usr/share/doc/python-sklearn-doc/html/objects.inv",
        ],
    ),
    "nltk": ("https://www.nltk.org", []),
}


def _local_inventories():
    found, missing = {}, []
    folder = os.environ.get("SKCRF_INTERSPHINX_DIR")
    for name, (url, paths) in _INVENTORIES.items():
        candidates = ([os.path.join(folder, f"{name}.inv")] if folder else []) + paths
        path = next((p for p in candidates if os.path.isfile(p)), None)
        if path is None:
            missing.append(name)
        else:
            found[name] = (url, path)  # a local file: intersphinx never fetches
    return found, missing


intersphinx_mapping, _missing_inventories = _local_inventories()
if intersphinx_mapping:
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_timeout = 1
print(
    "skcrf docs: intersphinx "
    + (
        f"uses local inventories for {', '.join(sorted(intersphinx_mapping))}"
        if intersphinx_mapping
        else "is off"
    )
    + (
        f"; skipped (no local inventory, no network): {', '.join(_missing_inventories)}"
        if _missing_inventories
        else ""
    )
)

# -- sphinx-gallery -------------------------------------------------------------
# Every example runs at build time on a small slice of the treebank
# (docs/_tools/gallery_argv.py gives the options of each), except
# bilstm_crf.py: shown, not run (it needs PyTorch, an optional extra, and
# minutes of CPU; tests/test_examples.py trains it a few steps instead).
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/(?!bilstm_crf\.py$)[^/]*\.py$",
    "ignore_pattern": r"(__init__|_helpers)\.py$",
    "reset_argv": "gallery_argv.reset_argv",
    "doc_module": ("skcrf",),
    "backreferences_dir": "generated/backreferences",
    "remove_config_comments": True,
    "min_reported_time": 1,
    "only_warn_on_example_error": False,  # an example that raises fails the build
    "download_all_examples": False,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "show_memory": False,
    "write_computation_times": True,
}

# -- HTML ------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skcrf {release}"
html_static_path = []
html_theme_options = {
    "navbar_end": ["navbar-icon-links"],
    "secondary_sidebar_items": ["page-toc"],
    "show_prev_next": True,
    "navigation_with_keys": False,
}
html_show_sourcelink = False
html_context = {"default_mode": "light"}


# -- generated pages and checks ------------------------------------------------------
def _generate(app):
    """Benchmark tables from benchmarks/results/*.json, before reading sources."""
    out = DOCS / "generated"
    out.mkdir(exist_ok=True)
    render_benchmarks.write_docs_tables(out / "benchmark_tables.md")


def _dask_toctree(app, docname, source):
    """Link docs/dask.md (written separately) once it exists."""
    marker = "<!-- dask-page -->"
    if marker not in source[0]:
        return
    if (DOCS / "dask.md").is_file():
        block = "```{toctree}\n:maxdepth: 1\n\n/dask\n```\n"
    else:
        block = ":::{note}\nThe Dask guide (`docs/dask.md`) is being written.\n:::\n"
    source[0] = source[0].replace(marker, block)


def _offline_execution_times(app, docname, source):
    """Drop the CDN scripts (jQuery, DataTables) from sphinx-gallery's timing pages.

    The table stays (unsorted); the site loads nothing from another host
    (tools/check_docs_browser.py fails on any such request).
    """
    if not docname.endswith("sg_execution_times"):
        return
    source[0] = re.sub(
        r"\n  \.\. raw:: html\n\n.*?(?=\n  \.\. list-table::)", "\n", source[0], flags=re.S
    )


def _wheel_table(app, docname, source):
    """The table of benchmarks/results/wheels.json (tools/build_wheels.py) in install.md."""
    marker = "<!-- wheel-table -->"
    if marker not in source[0]:
        return
    import json

    sys.path.insert(0, str(ROOT / "tools"))
    from build_wheels import table

    path = ROOT / "benchmarks" / "results" / "wheels.json"
    if not path.is_file():
        source[0] = source[0].replace(marker, "(No run of tools/build_wheels.py recorded.)")
        return
    result = json.loads(path.read_text())
    built = result.get("wheels_built_by")
    note = (
        f"\n\n(`{result['command']}`: {result['machine']['platform']}, "
        f"{result['machine']['cpus']} cores, {result['total_minutes']} min with "
        f"`--jobs {result['jobs']}` on a shared machine"
        + (
            f"; the wheels and their build times from `{built['command']}`, "
            f"{built['total_minutes']} min"
            if built
            else ""
        )
        + ". The build and install times depend on the load. *tests passed* counts "
        "the tests marked `wheel`.)\n"
    )
    source[0] = source[0].replace(marker, table(result["rows"]) + note)


def _private_reference(app, env, node, contnode):
    """A reference into skcrf that does not resolve is an error (-W)."""
    target = node.get("reftarget", "")
    if node.get("refdomain") == "py" and (
        target.startswith("skcrf.") or target.startswith("~skcrf.")
    ):
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            "unresolved reference to %s (a private or undocumented name?)",
            target,
            location=node,
        )
    return None


def _skip_member(app, what, name, obj, skip, options):
    """Leave out scikit-learn's metadata-routing setters (set_fit_request, ...)."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("builder-inited", _generate)
    app.connect("source-read", _dask_toctree)
    app.connect("source-read", _wheel_table)
    app.connect("source-read", _offline_execution_times)
    app.connect("missing-reference", _private_reference)
