"""The command-line options of each example when the docs build runs it (sphinx-gallery).

A small slice of the treebank and few iterations keep the whole build within
a few minutes on two cores; the figures are illustrations, not results.
"""

from pathlib import Path

GALLERY_ARGS = {
    "treebank_pos.py": [
        "--max-sentences",
        "300",
        "--max-iterations",
        "30",
        "--n-jobs",
        "1",
        "--plot",
        "--plot-prefix",
        "",
    ],
    "grid_search.py": [
        "--max-sentences",
        "200",
        "--max-iterations",
        "20",
        "--n-jobs",
        "1",
        "--cv",
        "2",
        "--c1",
        "0",
        "0.1",
        "--c2",
        "0.01",
        "1",
        "--plot",
    ],
    "pipeline.py": [
        "--max-sentences",
        "200",
        "--max-iterations",
        "20",
        "--n-jobs",
        "1",
        "--cv",
        "2",
        "--window",
        "1",
        "2",
        "--c2",
        "0.01",
        "0.1",
        "--plot",
    ],
    "structured_outputs.py": ["--sentences", "400", "--max-iterations", "20"],
    # the figure stays open for the gallery; the file it is saved to is not needed
    "cv_treebank.py": [
        "--max-sentences",
        "200",
        "--max-iterations",
        "20",
        "--n-jobs",
        "1",
        "--cv",
        "2",
        "--c1",
        "0",
        "0.1",
        "--c2",
        "0.01",
        "1",
        "--plot",
        "/dev/null",
    ],
    "explain_tagger.py": [
        "--max-sentences",
        "300",
        "--max-iterations",
        "30",
        "--n-jobs",
        "1",
        "--plot",
    ],
    "embeddings.py": ["--max-sentences", "300", "--max-iterations", "30", "--n-jobs", "1"],
    # the figure stays open for the gallery; the file it is saved to is not needed
    "class_weight.py": [
        "--max-sentences",
        "300",
        "--max-iterations",
        "50",
        "--n-jobs",
        "1",
        "--plot",
        "/dev/null",
    ],
    "conditioned_transitions.py": [
        "--max-sentences",
        "300",
        "--max-iterations",
        "50",
        "--n-jobs",
        "1",
        "--plot",
        "/dev/null",
    ],
    # the figure stays open for the gallery; the file it is saved to is not needed
    "early_stopping.py": [
        "--max-sentences",
        "300",
        "--max-iterations",
        "50",
        "--n-jobs",
        "1",
        "--plot",
        "/dev/null",
    ],
}


def reset_argv(gallery_conf, script_vars):
    """sys.argv[1:] for the example being run."""
    return list(GALLERY_ARGS.get(Path(script_vars["src_file"]).name, []))
