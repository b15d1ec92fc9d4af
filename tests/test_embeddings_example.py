"""Smoke test of examples/embeddings.py on a small slice of the treebank."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.treebank
def test_embeddings_example(treebank):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "embeddings.py"),
            "--max-sentences",
            "80",
            "--max-iterations",
            "15",
            "--n-jobs",
            "1",
            "--dim",
            "10",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "train: 80 sentences" in out and "10-dimensional vectors" in out
    assert re.search(r"^template \+ vectors\s+0\.\d+\s+0\.\d+", out, flags=re.MULTILINE)
    accuracy = float(re.search(r"^test token accuracy: ([0-9.]+)$", out, re.MULTILINE)[1])
    assert 0.5 < accuracy <= 1.0
