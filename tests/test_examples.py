"""Smoke tests of the example scripts on a small slice of the treebank.

Each example runs as a user would run it (``python examples/NAME.py ...``) in
a subprocess, with ``--max-sentences 60`` and few iterations, so each takes a
few seconds. They need the NLTK treebank sample: the ``treebank`` fixture
skips them when it is missing, except in CI where that is a failure.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT = 120  # seconds per example; a quick run takes a few

QUICK = ["--max-sentences", "60", "--max-iterations", "20"]


def run_example(name, *args):
    """Run ``examples/name`` with ``args``; return its stdout (exit code 0)."""
    env = dict(os.environ)  # keeps NLTK_DATA
    # Import skcrf from this checkout, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert completed.returncode == 0, (
        f"{name} exited with {completed.returncode}\n"
        f"--- stdout ---\n{completed.stdout}\n--- stderr ---\n{completed.stderr}"
    )
    return completed.stdout


def accuracy(stdout, label="test token accuracy"):
    match = re.search(rf"^{label}: ([0-9.]+)$", stdout, flags=re.MULTILINE)
    assert match, f"no '{label}' line in:\n{stdout}"
    return float(match.group(1))


@pytest.mark.treebank
def test_treebank_pos(treebank):
    stdout = run_example("treebank_pos.py", *QUICK, "--n-jobs", "1", "--top", "3")
    assert "train: 60 sentences" in stdout and "features: template" in stdout
    assert 0.5 < accuracy(stdout) <= 1.0
    assert "Top 3 state features:" in stdout and "Top 3 transitions:" in stdout
    assert re.search(r"^tagged: The/\S+ quick/\S+", stdout, flags=re.MULTILINE)
    # the dict version: the same features, so the same model and report
    dicts = run_example(
        "treebank_pos.py", *QUICK, "--n-jobs", "1", "--top", "3", "--features", "dicts"
    )
    assert "features: dicts" in dicts
    assert accuracy(dicts) == accuracy(stdout)
    assert dicts.split("Top 3 state features:")[1] == stdout.split("Top 3 state features:")[1]


@pytest.mark.treebank
def test_treebank_pos_plots(treebank, tmp_path):
    pytest.importorskip("matplotlib")
    prefix = tmp_path / "tb"
    stdout = run_example(
        "treebank_pos.py", *QUICK, "--n-jobs", "1", "--plot", "--plot-prefix", str(prefix)
    )
    for suffix in ("_learning_curve.png", "_transitions.png"):
        path = Path(f"{prefix}{suffix}")
        assert path.is_file() and path.stat().st_size > 0, path
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "saved" in stdout


@pytest.mark.treebank
def test_grid_search(treebank):
    stdout = run_example(
        "grid_search.py",
        *QUICK,
        "--n-jobs",
        "2",
        "--cv",
        "2",
        "--c1",
        "0",
        "0.1",
        "--c2",
        "0.01",
        "1",
    )
    assert "4 candidates x 2 folds = 8 fits" in stdout
    assert re.search(r"^rank\s+c1\s+c2\s+accuracy \(mean ± std\)", stdout, flags=re.MULTILINE)
    table = re.findall(r"^\s+(\d)\s+(\S+)\s+(\S+)\s+([0-9.]+) ± ", stdout, flags=re.MULTILINE)
    assert sorted(int(rank) for rank, *_ in table) == [1, 2, 3, 4]
    assert table[0][0] == "1"  # best first
    assert re.search(r"^best params: \{'c1': .*, 'c2': .*\}", stdout, flags=re.MULTILINE)
    assert 0.5 < accuracy(stdout) <= 1.0
    assert re.search(
        r"^test macro +precision [0-9.]+ +recall [0-9.]+ +F1 [0-9.]+$", stdout, flags=re.MULTILINE
    )
    assert "test sentence accuracy:" in stdout


@pytest.mark.treebank
def test_pipeline(treebank):
    stdout = run_example(
        "pipeline.py", *QUICK, "--n-jobs", "2", "--cv", "2", "--window", "0", "1", "--c2", "0.1"
    )
    assert "grid search: 2 candidates x 2 folds" in stdout
    assert re.search(
        r"^best params: \{'crftagger__c2': 0.1, 'sequencefeaturizer__window': [01]\}",
        stdout,
        flags=re.MULTILINE,
    )
    assert 0.5 < accuracy(stdout) <= 1.0
    assert re.search(r"^tagged: The/\S+ quick/\S+", stdout, flags=re.MULTILINE)


@pytest.mark.parametrize(
    "name",
    [
        "treebank_pos.py",
        "grid_search.py",
        "pipeline.py",
        "cv_treebank.py",
        "early_stopping.py",
        "explain_tagger.py",
    ],
)
def test_help(name):
    stdout = run_example(name, "--help")
    assert "--max-sentences" in stdout


@pytest.mark.treebank
def test_explain_tagger(treebank):
    stdout = run_example("explain_tagger.py", *QUICK, "--n-jobs", "1", "--top", "3", "--plot")
    assert "Top 3 state features (by |weight|):" in stdout
    assert re.search(r"^explained: The/\S+ old/\S+", stdout, flags=re.MULTILINE)
    assert re.search(r"^least sure: '\S+' \(\d\.\d\d\)", stdout, flags=re.MULTILINE)


@pytest.mark.treebank
def test_structured_outputs(treebank):
    stdout = run_example("structured_outputs.py", "--sentences", "300", "--max-iterations", "8")
    probabilities = [float(p) for p in re.findall(r"^\s+\d\. p=([0-9.]+)", stdout, flags=re.M)]
    assert len(probabilities) == 5 and probabilities == sorted(probabilities, reverse=True)
    assert re.search(r"allowed_transitions='BIO': 0 BIO errors", stdout)
    assert "missing_label fit" in stdout


@pytest.mark.treebank
def test_cv_treebank(treebank, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "cv_grid.png"
    stdout = run_example(
        "cv_treebank.py",
        *QUICK,
        "--n-jobs",
        "1",
        "--cv",
        "2",
        "--c1",
        "0",
        "0.1",
        "--c2",
        "0.1",
        "1",
        "--plot",
        str(plot),
    )
    assert "train: 60 sentences" in stdout
    assert "search: 8 fits (2 c1 x 2 c2 x 2 folds)" in stdout
    assert re.search(
        r"^chosen: c1=\S+, c2=\S+ \(mean cv token accuracy [0-9.]+\)$", stdout, flags=re.MULTILINE
    )
    assert 0.5 < accuracy(stdout) <= 1.0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def early_stopping_rows(stdout):
    """{early_stopping: (iterations, best, status)} from the example's table."""
    rows = re.findall(
        r"^early_stopping=(True|False)\s+(\d+)\s+(\d+|-)\s+(\w+)\s+[0-9.]+\s+([0-9.]+)$",
        stdout,
        flags=re.MULTILINE,
    )
    assert len(rows) == 2, f"no table of the two fits in:\n{stdout}"
    for *_, test_accuracy in rows:
        assert 0.5 < float(test_accuracy) <= 1.0
    return {flag == "True": (int(n), best, status) for flag, n, best, status, _ in rows}


@pytest.mark.treebank
def test_early_stopping(treebank, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "early_stopping.png"
    stdout = run_example(
        "early_stopping.py",
        "--max-sentences",
        "60",
        "--max-iterations",
        "40",
        "--n-iter-no-change",
        "3",
        "--n-jobs",
        "1",
        "--plot",
        str(plot),
    )
    assert "train: 60 sentences" in stdout
    rows = early_stopping_rows(stdout)
    n_iter, best, status = rows[True]
    # 3 iterations without improvement after the best one stop the fit
    assert status == "EARLY_STOPPING" and n_iter == int(best) + 3 < 40
    assert rows[False][1] == "-" and rows[False][0] <= 40  # no early stopping: no best
    match = re.search(r"^best iteration (\d+): validation accuracy ([0-9.]+) ", stdout, re.M)
    assert match and match.group(1) == best and 0.5 < float(match.group(2)) <= 1.0
    assert re.search(rf"^  [0-9.]+ at iteration {n_iter} \(where", stdout, flags=re.M)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.treebank
def test_early_stopping_online_trainer(treebank):
    stdout = run_example(
        "early_stopping.py",
        "--algorithm",
        "ap",
        "--max-sentences",
        "60",
        "--max-iterations",
        "10",
        "--n-iter-no-change",
        "2",
        "--n-jobs",
        "1",
    )
    rows = early_stopping_rows(stdout)
    n_iter, best, status = rows[True]
    assert best != "-" and int(best) <= n_iter <= 10
    assert status in ("EARLY_STOPPING", "MAX_ITERATIONS")
    assert rows[False][1] == "-" and "saved" not in stdout


@pytest.mark.treebank
def test_bilstm_crf(treebank, tmp_path):
    """The BiLSTM-CRF example trains a few steps (needs PyTorch; .ci/run's torch step)."""
    pytest.importorskip("torch", reason="examples/bilstm_crf.py needs PyTorch (the torch extra)")
    pytest.importorskip("matplotlib")
    plot = tmp_path / "curves.png"
    stdout = run_example(
        "bilstm_crf.py",
        *("--max-sentences", "60", "--epochs", "1", "--max-steps", "4", "--threads", "1"),
        *("--plot", str(plot)),
    )
    assert "train: 60 sentences" in stdout
    assert re.search(
        r"^epoch 1: loss per token [0-9.]+, test accuracy", stdout, flags=re.MULTILINE
    )
    assert 0.0 < accuracy(stdout) <= 1.0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_class_weight(treebank):
    stdout = run_example("class_weight.py", *QUICK, "--n-jobs", "1")
    assert "train: 60 sentences" in stdout
    recall = re.search(
        r"^macro recall over the rare tags: none ([0-9.]+), balanced ([0-9.]+)$",
        stdout,
        flags=re.MULTILINE,
    )
    assert recall, stdout
    for class_weight in ("None", "'balanced'"):
        assert re.search(
            rf"^class_weight={class_weight}: test token accuracy 0\.\d+",
            stdout,
            flags=re.MULTILINE,
        )


def test_conditioned_transitions(treebank, tmp_path):
    plot = tmp_path / "conditioned.png"
    stdout = run_example(
        "conditioned_transitions.py", *QUICK, "--n-jobs", "1", "--plot", str(plot)
    )
    plain = re.search(r"^plain: test token accuracy 0\.\d+, \d+ features \(0 ", stdout, re.M)
    conditioned = re.search(
        r"^previous word: test token accuracy 0\.\d+, \d+ features \(([1-9]\d*) input",
        stdout,
        re.M,
    )
    assert plain and conditioned, stdout
    assert re.search(r"^  prev:\S+ +\S+ -> \S+ +[+-]\d\.\d{3}$", stdout, re.M), stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
