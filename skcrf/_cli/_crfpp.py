r"""``skcrf crfpp learn`` and ``skcrf crfpp test``: CRF++'s crf_learn and crf_test.

``crfpp test`` also opens crf_learn's and Wapiti's models
(:meth:`~skcrf.CRFTagger.from_crfpp`, :meth:`~skcrf.CRFTagger.from_wapiti`).

The options and files of CRF++ 0.58's tools, over the public API: the
template is a :class:`~skcrf.TemplateFeaturizer` (``syntax='crfpp'``), the
column files are read by :func:`skcrf.io.read_columns` (CRF++'s
convention: a blank line, or one starting with a space or a TAB, ends a
sentence) and the model is a :class:`~skcrf.CRFTagger` that carries its
template, saved with :meth:`~skcrf.CRFTagger.save`.

CRF++'s objective and skcrf's (CRFsuite's)
-------------------------------------------
crf_learn minimises ``NLL(w) + ||w||^2 / (2 C)`` (``-a CRF-L2``) or
``NLL(w) + ||w||_1 / C`` (``-a CRF-L1``): ``encoder.cpp``'s ``runCRF`` adds
``alpha[k]^2 / (2 C)`` (and ``alpha[k] / C`` to the gradient), or
``|alpha[k]| / C``, to the summed negative log-likelihood. CRFsuite's
L-BFGS minimises ``NLL(w) + c1 ||w||_1 + c2 ||w||^2``. So ``-c C`` is
``c2 = 1 / (2 C)`` with CRF-L2 and ``c1 = 1 / C`` with CRF-L1: the same
objective, so the same optimum. CRF++ generates a unigram template's
feature for every label and a bigram one's for every label pair: here
``all_possible_states=True`` and ``all_possible_transitions=True``.

Stopping: crf_learn stops when the objective's relative change is below
``-e eta`` three iterations in a row, or after ``-m`` iterations; here
CRFsuite's test on the relative improvement over the last 3 iterations
(``period=3``, ``delta=eta``), or the iteration limit (``max_iterations``),
or the gradient test (``epsilon``, 1e-5). L-BFGS keeps crf_learn's 5
correction pairs (``lbfgs.h``'s ``msize``; CRFsuite's default is 6): with
every attribute x label as a feature, those vectors are most of the
memory. ``-f`` is CRFsuite's
``feature.minfreq`` (``min_freq``): counted per attribute and label, where
CRF++ counts the template's expanded string over every label.
"""

import math
import sys
import time
from typing import Any, TextIO

from .._template._parse import parse_templates
from .._utils._data_files import DataFileError, read_columns
from ._common import ArgumentParser, CommandError, open_output
from ._models import open_model, template_model, token_features, train_template_model

#: crf_learn's L-BFGS memory: the correction pairs it keeps.
CRFPP_LBFGS_PAIRS = 5

USAGE = """\
usage: skcrf crfpp learn [OPTIONS] TEMPLATE TRAIN MODEL
       skcrf crfpp test -m MODEL [OPTIONS] [FILE ...]
CRF++'s crf_learn and crf_test, on skcrf: the same templates, column files,
options and crf_test outputs. 'skcrf crfpp learn -h', 'skcrf crfpp test -h'.
"""

LEARN_USAGE = """\
usage: skcrf crfpp learn [OPTIONS] TEMPLATE TRAIN MODEL
Train a CRF from a CRF++ template and a column file (the last column the
label; a blank line between sentences) and save it, template included, as an
skcrf model file (CRFTagger.save), which 'skcrf crfpp test' reads.

options:
  -a, --algorithm=NAME  CRF-L2 (default; 'CRF' too) or CRF-L1
  -c, --cost=FLOAT      CRF++'s C (default 1): c2 = 1/(2C), or c1 = 1/C with
                        CRF-L1 (the same objective as crf_learn's)
  -f, --freq=INT        keep the features seen at least INT times (default 1)
  -m, --maxiter=INT     at most INT iterations (default 100000)
  -e, --eta=FLOAT       stop when the objective improves less than FLOAT
                        (relative) over 3 iterations (default 0.0001)
  -p, --thread=INT      threads (default 1)
  -t, --textmodel       also write MODEL.txt, the model as CRFsuite's text dump
  -h, --help            show this help and exit
"""

TEST_USAGE = """\
usage: skcrf crfpp test -m MODEL [OPTIONS] [FILE ...]
Tag column files ('-' or none: the standard input) with a CRF++ model
(crf_learn's binary or -t text file), a Wapiti model, or one that
'skcrf crfpp learn' trained, writing crf_test's output: each line's columns,
a TAB and the predicted label, a blank line after each sentence.

options:
  -m, --model=FILE      the model file
  -v, --verbose=INT     1: "# P" (the sentence's probability) before each
                        sentence and 'label/P' (its marginal) for each token;
                        2: also every label's 'label/P'
  -n, --nbest=INT       the INT best labellings, each headed by '# K P'
  -o, --output=FILE     write to FILE instead of the standard output
  -c, --cost-factor=F   multiply a CRF++ model's weights by F (crf_test -c)
  -h, --help            show this help and exit
"""

#: The C of crf_learn's CRF-L2 objective -> skcrf's (CRFsuite's) parameters.
_ALGORITHMS = {"CRF": "CRF-L2", "CRF-L2": "CRF-L2", "CRF-L1": "CRF-L1"}

#: Sentences tagged per call of the tagger.
TEST_BATCH = 256


def regularization(algorithm: str, cost: float) -> dict[str, float]:
    """CRFsuite's ``c1`` and ``c2`` for crf_learn's ``-a`` and ``-c``: the same objective."""
    if not (cost > 0 and math.isfinite(cost)):
        raise CommandError(f"skcrf crfpp learn: -c must be a positive number, got {cost!r}")
    if algorithm == "CRF-L1":
        return {"c1": 1.0 / cost, "c2": 0.0}
    return {"c1": 0.0, "c2": 1.0 / (2.0 * cost)}


def _read_template(path: str) -> str:
    from .._utils._data_files import check_regular_file, display_name

    check_regular_file(path, display_name(path), "a template file")
    with open(path, encoding="utf-8") as f:
        return f.read()


def _check_columns(
    template: Any, sequence: Any, path: str, what: str, syntax: "str | None" = None
) -> Any:
    """The template must find its columns in the file's (CRF++ checks ``xsize`` alike).

    ``template``: a plan, or with ``syntax`` a template's text, parsed here
    (a bad template is reported at the file's first line, as when the
    featurizer parsed it then). Returns the plan.
    """
    try:
        plan = template if syntax is None else parse_templates(template, syntax)
        token_features(plan, [sequence.tokens[:1]])
    except (IndexError, TypeError, ValueError) as exc:
        n = len(sequence.tokens[0])
        raise DataFileError(
            path,
            sequence.line,
            f"the {what} reads a column that the file's lines ({n} column(s)) do not have: {exc}",
        ) from None
    return plan


def _learn_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="skcrf crfpp learn", add_help=False)
    parser.add_argument("-a", "--algorithm", default="CRF-L2")
    parser.add_argument("-c", "--cost", type=float, default=1.0)
    parser.add_argument("-f", "--freq", type=int, default=1)
    parser.add_argument("-m", "--maxiter", type=int, default=100000)
    parser.add_argument("-e", "--eta", type=float, default=0.0001)
    parser.add_argument("-p", "--thread", type=int, default=1)
    parser.add_argument("-t", "--textmodel", action="store_true")
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("files", nargs="*")
    return parser


def learn(argv: list[str]) -> int:
    """``skcrf crfpp learn TEMPLATE TRAIN MODEL``: crf_learn."""
    args = _learn_parser().parse_args(argv)
    if args.help:
        sys.stdout.write(LEARN_USAGE)
        return 0
    if len(args.files) != 3:
        raise CommandError("skcrf crfpp learn: give TEMPLATE TRAIN MODEL (see -h)")
    if args.algorithm not in _ALGORITHMS:
        raise CommandError(
            f"skcrf crfpp learn: unknown algorithm {args.algorithm!r} (CRF-L2 or CRF-L1; "
            "MIRA is not available)"
        )
    for name in ("freq", "maxiter", "thread"):
        if getattr(args, name) < 1:
            raise CommandError(f"skcrf crfpp learn: --{name} must be at least 1")
    if not args.eta >= 0:
        raise CommandError("skcrf crfpp learn: --eta must be a number >= 0")
    template_path, train_path, model_path = args.files
    settings = regularization(_ALGORITHMS[args.algorithm], args.cost)

    out = sys.stdout
    start = time.perf_counter()
    template = _read_template(template_path)
    out.write("reading training data: ")
    X: list[Any] = []
    y: list[Any] = []
    plan = None
    for sequence in read_columns(train_path, sequence_break="crfpp"):
        if plan is None:
            plan = _check_columns(template, sequence, train_path, "template", syntax="crfpp")
        X.append(sequence.tokens)
        y.append(sequence.labels)
        if len(X) % 100 == 0:
            out.write(f"{len(X)}.. ")
            out.flush()
    out.write(f"\nDone!{time.perf_counter() - start:.2f} s\n\n")
    if not X:
        raise DataFileError(train_path, None, "no sentence to train on")
    params = {
        "algorithm": "lbfgs",
        "max_iterations": args.maxiter,
        "delta": args.eta,
        "period": 3,
        "num_memories": CRFPP_LBFGS_PAIRS,
        "min_freq": args.freq if args.freq > 1 else 0,
        "all_possible_states": True,
        "all_possible_transitions": True,
        "n_jobs": args.thread,
        "c1": settings["c1"],
        "c2": settings["c2"],
    }
    out.write(f"Number of sentences: {len(X)}\n")
    out.write(f"Number of thread(s): {args.thread}\n")
    out.write(f"Freq:                {args.freq}\n")
    out.write(f"eta:                 {args.eta:.5f}\n")
    out.write(f"C:                   {args.cost:.5f}\n")
    out.write(f"c1, c2:              {settings['c1']:g}, {settings['c2']:g}\n\n")
    out.flush()
    previous = [math.inf]

    def report(info: Any) -> None:
        diff = 1.0 if math.isinf(previous[0]) else abs(previous[0] - info.loss) / previous[0]
        previous[0] = info.loss
        active = int((info.weights != 0).sum())
        out.write(f"iter={info.iteration - 1} act={active} obj={info.loss:.5f} diff={diff:.5f}\n")
        out.flush()

    # the log says how training stopped: no ConvergenceWarning
    model = train_template_model(plan, X, y, params, callback=report)
    status = model.state.status
    out.write(f"\nNumber of features: {model.model.n_features}\n")
    out.write(f"Stopped: {status.name if status is not None else '-'}\n")
    model.save(model_path)
    if args.textmodel:
        model.dump(model_path + ".txt")
    out.write(f"\nDone!{time.perf_counter() - start:.2f} s\n")
    return 0


def _test_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="skcrf crfpp test", add_help=False)
    parser.add_argument("-m", "--model", default="")
    parser.add_argument("-v", "--verbose", type=int, default=0)
    parser.add_argument("-n", "--nbest", type=int, default=0)
    parser.add_argument("-o", "--output", default="")
    parser.add_argument("-c", "--cost-factor", type=float, default=1.0)
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("files", nargs="*")
    return parser


def _lines(tokens: list[tuple[str, ...]], path: list[Any], marginals: Any, args: Any, labels):
    out = []
    for t, columns in enumerate(tokens):
        line = "\t".join(columns) + "\t" + str(path[t])
        if args.verbose >= 1 and marginals is not None:
            line += f"/{marginals[t][path[t]]:f}"
            if args.verbose >= 2:
                line += "".join(f"\t{name}/{marginals[t][key]:f}" for name, key in labels)
        out.append(line + "\n")
    out.append("\n")
    return out


def _test_batch(model: Any, batch: list[Any], args: Any, labels: list[Any]) -> str:
    X = [sequence.tokens for sequence in batch]
    marginals = model.marginals(X) if args.verbose >= 1 else [None] * len(X)
    out: list[str] = []
    if args.nbest >= 1:
        for s, lists in enumerate(model.nbest(X, args.nbest)):
            for k, (path, log_probability) in enumerate(lists):
                out.append(f"# {k} {math.exp(log_probability):f}\n")
                out += _lines(X[s], path, marginals[s], args, labels)
        return "".join(out)
    paths = model.predict(X)
    log_probabilities = model.sequence_log_proba(X) if args.verbose >= 1 else None
    for s, path in enumerate(paths):
        if log_probabilities is not None:
            out.append(f"# {math.exp(log_probabilities[s]):f}\n")
        out += _lines(X[s], path, marginals[s], args, labels)
    return "".join(out)


def test(argv: list[str]) -> int:
    """``skcrf crfpp test -m MODEL FILE...``: crf_test."""
    args = _test_parser().parse_args(argv)
    if args.help:
        sys.stdout.write(TEST_USAGE)
        return 0
    if not args.model:
        raise CommandError("skcrf crfpp test: give the model with -m MODEL (see -h)")
    if args.verbose not in (0, 1, 2) or args.nbest < 0:
        raise CommandError("skcrf crfpp test: -v takes 0, 1 or 2 and -n a count >= 0")
    if not (args.cost_factor > 0 and math.isfinite(args.cost_factor)):
        raise CommandError("skcrf crfpp test: -c must be a positive number")
    model = template_model(open_model(args.model, cost_factor=args.cost_factor), args.model)
    # crf_test lists the labels in byte order (CRF++ keeps them in a std::set)
    labels = sorted(((str(c), c) for c in model.classes), key=lambda p: p[0].encode())
    out: TextIO = sys.stdout
    if args.output:
        out = open_output(args.output, "skcrf crfpp test", args.model, *(args.files or ["-"]))
    try:
        for path in args.files or ["-"]:
            _test_file(model, path, args, labels, out)
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def _test_file(model: Any, path: str, args: Any, labels: list[Any], out: TextIO) -> None:
    batch: list[Any] = []
    first = True
    for sequence in read_columns(path, labelled=False, sequence_break="crfpp"):
        if first:  # every line has the first one's columns (read_columns checks)
            _check_columns(model.plan, sequence, path, "model's template")
            first = False
        batch.append(sequence)
        if len(batch) == TEST_BATCH:
            out.write(_test_batch(model, batch, args, labels))
            batch = []
    if batch:
        out.write(_test_batch(model, batch, args, labels))


def main(argv: list[str]) -> int:
    """``skcrf crfpp learn|test ...``."""
    if not argv or argv[0] in ("-h", "--help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else 1
    if argv[0] == "learn":
        return learn(argv[1:])
    if argv[0] == "test":
        return test(argv[1:])
    raise CommandError(f"skcrf crfpp: unknown command {argv[0]!r} (learn or test)")
