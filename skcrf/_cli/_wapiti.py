r"""``skcrf wapiti train``, ``label`` and ``dump``: Wapiti 1.5's modes.

The options and files of Wapiti 1.5.0's ``wapiti`` over the public API:
the patterns are a :class:`~skcrf.TemplateFeaturizer` (``syntax='wapiti'``),
the column files are read by :func:`skcrf.io.read_columns` (a blank line
ends a sequence) and the model is a :class:`~skcrf.CRFTagger` that carries
its patterns, saved with :meth:`~skcrf.CRFTagger.save`. ``label`` and
``dump`` also open Wapiti's own model files
(:meth:`~skcrf.CRFTagger.from_wapiti`), and CRFsuite's, CRF++'s and skcrf's.

Wapiti's objective and skcrf's (CRFsuite's)
-------------------------------------------
Wapiti minimises ``NLL(w) + rho1 ||w||_1 + rho2 / 2 ||w||^2``
(``src/gradient.c``: ``grd_gradient`` adds ``rho1 * nl1 + rho2 * nl2 / 2``
to the summed negative log-likelihood, and ``rho2 * w`` to the gradient);
CRFsuite's L-BFGS minimises ``NLL(w) + c1 ||w||_1 + c2 ||w||^2``. So
``c1 = rho1`` and ``c2 = rho2 / 2``: the same objective, the same optimum
(defaults ``-1 0.5 -2 0.0001``, ``src/options.c``). Every observation of
Wapiti's model has a weight for every label (``u``) or label pair (``b``),
the pairs into the first token unused, as here with
``all_possible_states``, ``all_possible_transitions`` and
``all_possible_conditioned_transitions``. Two exceptions: two bare bigram
patterns (``b`` and ``*``) are two blocks of pair weights in Wapiti, one
plain transition here; with no bare bigram pattern Wapiti has no plain
pair weights, skcrf (CRFsuite's model) always learns them (logged).

``train -W`` writes the model in Wapiti's text format (``mdl_save``:
each attribute an observation, the plain transitions in the first bare
``b`` / ``*`` pattern's observation), which ``wapiti label`` reads.

Stopping (``src/lbfgs.c``, ``src/progress.c``): Wapiti's L-BFGS stops when
``||g|| / max(||w||, 1) <= 1e-5`` (CRFsuite's ``epsilon`` test, here with
``epsilon=1e-5``), after ``-i`` iterations (0: no limit), or when the
objective's relative change over the last ``-o`` values (``|f(k-o+1) -
f(k)| / f(k-o+1)``) is below ``-e``: here CRFsuite's ``delta`` test with
``period = o - 1`` and ``delta = e`` (relative to the newer value, where
Wapiti divides by the older). Wapiti also stops when the error rate of the
development data (``-d``, or the training data) spread less than ``-e``
points over the last ``-w`` iterations; skcrf has no such test and does not
apply it (the log says so); ``-d`` is evaluated after training. L-BFGS
keeps Wapiti's 5 pairs (``--histsz``) and 40 line-search steps
(``--maxls``). ``-a sgd-l1`` (Wapiti's SGD with cumulative L1 penalty)
minimises the same objective: here it is L-BFGS (OWL-QN), and the log
says so. ``-T maxent`` and ``memm``, ``-a bcd`` and ``rprop``, ``-m``
(warm start from a model) and ``--me`` are refused.

Output
------
``label`` writes each input line, a TAB and the label (``-l``: the label
only), a blank line after each sequence. ``-s`` heads each
labelling with ``# N SCORE`` and adds ``label/SCORE`` to each token: with
``-p`` the posterior marginal and their product (Wapiti decodes each
token's largest marginal), without it the labelling's score (the sum of
its weights, unnormalised) and the token's part of it, from the tagger's
featurizer and weights (``_Lattice``, Wapiti's ``tag_expsc``). ``-p`` with
``-n`` > 1 (Wapiti's n-best over the marginals) is refused. ``-n``'s labellings of
equal score may come in another order than Wapiti's. ``-c`` reads the last
column as the reference label and writes Wapiti's error rates and
per-label precision, recall and F1 to the standard error.
"""

import math
import sys
import time
from typing import Any, TextIO

from .._template._parse import parse_templates
from .._utils._data_files import DataFileError, column_sequences, read_columns
from ._common import ArgumentParser, CommandError, open_output
from ._crfpp import _check_columns, _read_template
from ._models import open_model, template_model, token_features, train_template_model

USAGE = """\
usage: skcrf wapiti train -p PATTERNS [OPTIONS] INPUT MODEL
       skcrf wapiti label -m MODEL [OPTIONS] [INPUT [OUTPUT]]
       skcrf wapiti dump MODEL [OUTPUT]
Wapiti's train, label and dump modes, on skcrf: the same patterns, column
files, options and outputs. 'skcrf wapiti train -h', 'label -h', 'dump -h'.
"""

TRAIN_USAGE = """\
usage: skcrf wapiti train -p PATTERNS [OPTIONS] INPUT MODEL
Train a CRF from Wapiti patterns and a column file (INPUT, '-': the standard
input; the last column the label, a blank line between sequences)
and save it, patterns included, as an skcrf model file (CRFTagger.save),
which 'skcrf wapiti label' reads.

options:
  -p, --pattern FILE   the patterns (required)
  -T, --type STRING    crf (the only type skcrf trains)
  -a, --algo STRING    l-bfgs (default) or sgd-l1 (the same objective,
                       minimised by L-BFGS / OWL-QN here)
  -1, --rho1 FLOAT     L1 penalty (default 0.5): c1 = rho1
  -2, --rho2 FLOAT     L2 penalty (default 0.0001): c2 = rho2 / 2
  -i, --maxiter INT    at most INT iterations (default 0: no limit)
  -o, --objwin INT     the objective's window (default 5)
  -e, --stopeps FLOAT  stop when the objective changes less than FLOAT
                       (relative) over the window (default 0.02)
  -w, --stopwin INT    Wapiti's error-rate window: not applied by skcrf
  -d, --devel FILE     development data, evaluated after training
  -t, --nthread INT    threads (default 1)
      --histsz INT     L-BFGS pairs kept (default 5)
      --maxls INT      line-search steps (default 40)
  -W, --wapiti-model   write MODEL in Wapiti's text format (which wapiti
                       label reads) instead of skcrf's
  -h, --help           show this help and exit
"""

LABEL_USAGE = """\
usage: skcrf wapiti label -m MODEL [OPTIONS] [INPUT [OUTPUT]]
Label a column file (INPUT, '-' or none: the standard input) with a model
that 'skcrf wapiti train' trained, a Wapiti model, or any model with a
template, writing wapiti label's output: each line, a TAB and its label, a
blank line after each sequence.

options:
  -m, --model FILE     the model file
  -l, --label          write the labels only
  -c, --check          the last column is the reference label: write the
                       error rates to the standard error
  -s, --score          add the scores ('# N SCORE' and 'label/SCORE')
  -p, --post           label each token with its largest posterior marginal
  -n, --nbest INT      the INT best labellings (default 1)
  -h, --help           show this help and exit
"""

DUMP_USAGE = """\
usage: skcrf wapiti dump MODEL [OUTPUT]
Write a model's weights as wapiti dump does: 'observation TAB # TAB label
TAB weight' for a label's weight, 'observation TAB previous TAB label TAB
weight' for a pair's, a blank line after each observation; the plain
transitions last, as the observation 'b'. Zero weights are left out.

options:
  -p, --prec INT       digits after the point (default 5)
  -h, --help           show this help and exit
"""

#: Wapiti's defaults (src/options.c).
RHO1, RHO2, OBJWIN, STOPWIN, STOPEPS, HISTSZ, MAXLS = 0.5, 0.0001, 5, 5, 0.02, 5, 40
#: Wapiti's L-BFGS gradient test (src/lbfgs.c), hard-coded there.
GRADIENT_EPS = 1e-5
#: Sequences labelled per call of the tagger.
LABEL_BATCH = 256


def regularization(rho1: float, rho2: float) -> dict[str, float]:
    """CRFsuite's ``c1`` and ``c2`` for Wapiti's ``-1`` and ``-2``: the same objective."""
    for name, value in (("-1 (rho1)", rho1), ("-2 (rho2)", rho2)):
        if not (value >= 0 and math.isfinite(value)):
            raise CommandError(f"skcrf wapiti train: {name} must be a number >= 0, got {value!r}")
    return {"c1": rho1, "c2": rho2 / 2.0}


def _train_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="skcrf wapiti train", add_help=False)
    parser.add_argument("-p", "--pattern", default="")
    parser.add_argument("-T", "--type", default="crf")
    parser.add_argument("-a", "--algo", default="l-bfgs")
    parser.add_argument("-1", "--rho1", type=float, default=RHO1)
    parser.add_argument("-2", "--rho2", type=float, default=RHO2)
    parser.add_argument("-i", "--maxiter", type=int, default=0)
    parser.add_argument("-o", "--objwin", type=int, default=OBJWIN)
    parser.add_argument("-e", "--stopeps", type=float, default=STOPEPS)
    parser.add_argument("-w", "--stopwin", type=int, default=STOPWIN)
    parser.add_argument("-d", "--devel", default="")
    parser.add_argument("-t", "--nthread", type=int, default=1)
    parser.add_argument("--histsz", type=int, default=HISTSZ)
    parser.add_argument("--maxls", type=int, default=MAXLS)
    parser.add_argument("-W", "--wapiti-model", action="store_true")
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("files", nargs="*")
    return parser


def _check_train_args(args: Any) -> None:
    if len(args.files) > 2:
        raise CommandError("skcrf wapiti train: give at most INPUT and MODEL (see -h)")
    if len(args.files) < 2:
        raise CommandError(
            "skcrf wapiti train: give the MODEL file (skcrf's model file is binary: "
            "it is not written to the standard output)"
        )
    if not args.pattern:
        raise CommandError(
            "skcrf wapiti train: give the patterns with -p PATTERNS (skcrf does not use "
            "the data's columns as observations)"
        )
    if args.type != "crf":
        raise CommandError(
            f"skcrf wapiti train: -T {args.type!r}: skcrf trains linear-chain CRFs (crf) only"
        )
    if args.algo not in ("l-bfgs", "sgd-l1"):
        raise CommandError(
            f"skcrf wapiti train: unknown algorithm {args.algo!r} (l-bfgs or sgd-l1; "
            "bcd and rprop are not available)"
        )
    for name in ("nthread", "histsz", "maxls"):
        if getattr(args, name) < 1:
            raise CommandError(f"skcrf wapiti train: --{name} must be at least 1")
    if args.maxiter < 0 or args.stopwin < 0 or args.objwin < 2:
        raise CommandError(
            "skcrf wapiti train: -i and -w take a count >= 0, -o a window of at least 2"
        )
    if not (args.stopeps >= 0 and math.isfinite(args.stopeps)):
        raise CommandError("skcrf wapiti train: -e must be a number >= 0")


def _read_labelled(path: str, patterns: str, what: str) -> tuple[list[Any], list[Any]]:
    X: list[Any] = []
    y: list[Any] = []
    for sequence in read_columns(path):
        if not X:
            _check_columns(patterns, sequence, path, "patterns", syntax="wapiti")
        X.append(sequence.tokens)
        y.append(sequence.labels)
    if not X:
        raise DataFileError(path, None, f"no sequence in the {what}")
    return X, y


def train(argv: list[str]) -> int:
    """``skcrf wapiti train -p PATTERNS [INPUT] MODEL``: wapiti train."""
    args = _train_parser().parse_args(argv)
    if args.help:
        sys.stdout.write(TRAIN_USAGE)
        return 0
    _check_train_args(args)
    train_path, model_path = args.files
    settings = regularization(args.rho1, args.rho2)

    log = sys.stderr  # wapiti writes its log to the standard error
    start = time.perf_counter()
    log.write("* Load patterns\n")
    patterns = _read_template(args.pattern)
    if args.wapiti_model and not parse_templates(patterns, "wapiti").transitions:
        raise CommandError(_NEEDS_BARE_PATTERN)
    log.write("* Load training data\n")
    X, y = _read_labelled(train_path, patterns, "training data")
    dev = None
    if args.devel:
        log.write("* Load development data\n")
        dev = _read_labelled(args.devel, patterns, "development data")
    plan = parse_templates(patterns, "wapiti")
    params = {
        "algorithm": "lbfgs",
        "c1": settings["c1"],
        "c2": settings["c2"],
        "max_iterations": args.maxiter or None,
        "epsilon": GRADIENT_EPS,
        "period": args.objwin - 1,
        "delta": args.stopeps,
        "num_memories": args.histsz,
        "max_linesearch": args.maxls,
        "all_possible_states": True,
        "all_possible_transitions": True,
        "all_possible_conditioned_transitions": True,
        "n_jobs": args.nthread,
    }
    log.write("* Summary\n")
    log.write(f"    nb train:    {len(X)}\n")
    if dev is not None:
        log.write(f"    nb devel:    {len(dev[0])}\n")
    log.write(f"    c1, c2:      {settings['c1']:g}, {settings['c2']:g}\n")
    if args.algo == "sgd-l1":
        log.write("    note: sgd-l1's objective is minimised by L-BFGS (OWL-QN) here\n")
    if args.stopwin:
        log.write(f"    note: -w {args.stopwin} (the error-rate window) is not applied by skcrf\n")
    if not plan.transitions:
        log.write("    note: no bare b or * pattern: skcrf learns label pairs all the same\n")
    log.write(f"* Train the model with {args.algo}\n")
    log.flush()
    last = [start]

    def report(info: Any) -> None:
        now = time.perf_counter()
        active = int((info.weights != 0).sum())
        log.write(
            f"  [{info.iteration:4d}] obj={info.loss:<10.2f} act={active:<8d} "
            f"time={now - last[0]:.2f}s/{now - start:.2f}s\n"
        )
        log.flush()
        last[0] = now

    # the log says how training stopped: no ConvergenceWarning
    model = train_template_model(plan, X, y, params, callback=report)
    status = model.state.status
    log.write(f"    nb features: {model.model.n_features}\n")
    log.write(f"    stopped:     {status.name if status is not None else '-'}\n")
    if dev is not None:
        token_error, sequence_error, _ = _error_rates(model.predict(dev[0]), dev[1])
        log.write(f"    devel error: {token_error:5.2f}%/{sequence_error:5.2f}%\n")
    log.write("* Save the model\n")
    if args.wapiti_model:
        _save_wapiti_model(model, _read_template(args.pattern), model_path)
    else:
        model.save(model_path)
    log.write(f"* Done ({time.perf_counter() - start:.2f} s)\n")
    return 0


_NEEDS_BARE_PATTERN = (
    "skcrf wapiti train: -W needs a bare b (or *) pattern: skcrf learns label pairs, "
    "which a Wapiti model holds only in such a pattern's observation"
)


def _pattern_lines(text: str) -> list[str]:
    """The patterns as Wapiti keeps them (``rdr_loadpat``): no comment, space or empty line."""
    lines = []
    for line in text.split("\n"):
        line = line.split("#", 1)[0].rstrip(" \t\n\v\f\r")
        if line:
            lines.append(line[0].lower() + line[1:])
    return lines


def _hex(value: float) -> str:
    """C's ``%la`` of a finite double (``0x1.8p+1``, ``-0x1p-3``)."""
    text = float(value).hex()
    mantissa, exponent = text.split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}"


def _save_wapiti_model(model: Any, patterns: str, path: str) -> None:
    """Write ``model`` (trained on Wapiti patterns) as a Wapiti 1.5 model file (``mdl_save``).

    Each attribute is an observation (its name starts with its kind, ``u``,
    ``b`` or ``*``), with its ``L`` label weights then its ``L * L`` pair
    weights; the plain transitions go to the first bare ``b`` or ``*``
    pattern's observation. The file is written whole, then renamed
    (:func:`~skcrf._utils._atomic.write_atomically`).
    """
    from .._utils._atomic import write_atomically

    lines = _pattern_lines(patterns)
    bare = [line for line in lines if line[0] in "b*" and "%" not in line]
    plan = model.plan
    if not bare:
        raise CommandError(_NEEDS_BARE_PATTERN)
    labels = list(model.classes)
    index = {label_: k for k, label_ in enumerate(labels)}
    n = len(labels)
    observations: dict[str, list[float]] = {}

    def weights_of(name: str) -> list[float]:
        if name not in observations:
            kind = name[0]
            if kind not in "ub*":
                raise CommandError(f"skcrf wapiti train: -W: {name!r} is not a Wapiti observation")
            size = (n if kind != "b" else 0) + (n * n if kind != "u" else 0)
            observations[name] = [0.0] * size
        return observations[name]

    for (name, label_), weight in model.model.state_features().items():
        weights_of(name)[index[label_]] = weight
    for (name, i, j), weight in model.model.conditioned_transition_features().items():
        offset = n if name[0] == "*" else 0
        weights_of(name)[offset + index[i] * n + index[j]] = weight
    plain = weights_of(bare[0])
    offset = n if bare[0][0] == "*" else 0
    for (i, j), weight in model.model.transition_features().items():
        plain[offset + index[i] * n + index[j]] += weight
    columns = [
        part.column for feature in plan.features for part in feature.key if hasattr(part, "column")
    ]
    out = []
    flat = [w for weights in observations.values() for w in weights]
    active = sum(w != 0.0 for w in flat)
    out.append(f"#mdl#2#{active}\n")
    out.append(f"#rdr#{len(lines)}/{max(columns, default=-1) + 1}/0\n")
    out += [f"{len(line.encode())}:{line},\n" for line in lines]
    out.append(f"#qrk#{n}\n")
    out += [f"{len(str(label_).encode())}:{label_},\n" for label_ in labels]
    out.append(f"#qrk#{len(observations)}\n")
    out += [f"{len(name.encode())}:{name},\n" for name in observations]
    out += [f"{k}={_hex(w)}\n" for k, w in enumerate(flat) if w != 0.0]
    text = "".join(out).encode("utf-8")
    write_atomically(path, lambda file: file.write(text))


def _error_rates(paths: list[Any], references: list[Any]) -> tuple[float, float, int]:
    """Wapiti's token and sequence error rates (percent), and the tokens counted."""
    tokens = errors = wrong_sequences = 0
    for path, reference in zip(paths, references):
        wrong = sum(str(p) != r for p, r in zip(path, reference))
        errors += wrong
        tokens += len(reference)
        wrong_sequences += wrong > 0
    return 100.0 * errors / tokens, 100.0 * wrong_sequences / len(paths), tokens


def _label_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="skcrf wapiti label", add_help=False)
    parser.add_argument("-m", "--model", default="")
    parser.add_argument("-l", "--label", action="store_true")
    parser.add_argument("-c", "--check", action="store_true")
    parser.add_argument("-s", "--score", action="store_true")
    parser.add_argument("-p", "--post", action="store_true")
    parser.add_argument("-n", "--nbest", type=int, default=1)
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("files", nargs="*")
    return parser


class _CheckStats:
    """What ``wapiti label -c`` counts (``tag_label``): errors, and per label."""

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels
        self.index = {label: k for k, label in enumerate(labels)}
        self.tokens = self.token_errors = self.sequences = self.sequence_errors = 0
        self.reference = [0] * len(labels)
        self.predicted = [0] * len(labels)
        self.matched = [0] * len(labels)

    def add(self, path: list[Any], reference: list[str]) -> None:
        wrong = False
        for predicted, expected in zip(path, reference):
            if expected not in self.index:  # a label unseen in training: not counted
                continue
            p, r = self.index[str(predicted)], self.index[expected]
            self.reference[r] += 1
            self.predicted[p] += 1
            if p != r:
                self.token_errors += 1
                wrong = True
            else:
                self.matched[p] += 1
        self.tokens += len(reference)
        self.sequences += 1
        self.sequence_errors += wrong

    def report(self) -> str:
        token_error = _percent(self.token_errors, self.tokens)
        sequence_error = _percent(self.sequence_errors, self.sequences)
        lines = [
            f"    Nb sequences  : {self.sequences}\n",
            f"    Token error   : {_c_float(token_error):>5s}%\n",
            f"    Sequence error: {_c_float(sequence_error):>5s}%\n",
            "* Per label statistics\n",
        ]
        for k, label in enumerate(self.labels):
            recall = _ratio(self.matched[k], self.reference[k])
            precision = _ratio(self.matched[k], self.predicted[k])
            f1 = _ratio(2.0 * precision * recall, precision + recall)
            lines.append(
                f"    {label:<6s}  Pr={_c_float(precision)}  Rc={_c_float(recall)}"
                f"  F1={_c_float(f1)}\n"
            )
        return "".join(lines)


def _percent(count: int, total: int) -> float:
    return 100.0 * count / total if total else math.nan


def _ratio(a: float, b: float) -> float:
    if b == 0 or math.isnan(a) or math.isnan(b):
        return math.nan
    return a / b


def _c_float(value: float) -> str:
    """C's ``%.2f`` of a ratio, 0/0 printed as glibc prints x86's default NaN."""
    return "-nan" if math.isnan(value) else f"{value:.2f}"


class _Lattice:
    """Wapiti's score lattice (``tag_expsc``) of a fitted model, for ``-s``.

    ``psi[t, i, j]``: the weights of token ``t``'s attributes for label
    ``j`` plus, from the second token on, those of the pair (``i``, ``j``)
    (the plain transition and the token's transition attributes), from the
    model's template and its weights. A labelling's score is the
    sum of its ``psi[t, y[t-1], y[t]]`` (``psi[0, 0, y[0]]`` first).
    """

    def __init__(self, model: Any) -> None:
        import numpy as np

        self.plan = model.plan
        self.index = {label: k for k, label in enumerate(model.classes)}
        n = len(self.index)
        self.states: dict[str, Any] = {}
        for (attribute, label_), weight in model.model.state_features().items():
            self.states.setdefault(attribute, np.zeros(n))[self.index[label_]] = weight
        self.pairs: dict[str, Any] = {}
        for (attribute, i, j), weight in model.model.conditioned_transition_features().items():
            self.pairs.setdefault(attribute, np.zeros((n, n)))[self.index[i], self.index[j]] = (
                weight
            )
        self.transitions = np.zeros((n, n))
        for (i, j), weight in model.model.transition_features().items():
            self.transitions[self.index[i], self.index[j]] = weight

    def token_scores(self, xseq: Any, paths: list[Any]) -> list[list[float]]:
        """Each path's ``psi[t, y[t-1], y[t]]``, token by token."""
        import numpy as np

        n = len(self.index)
        tokens = token_features(self.plan, [xseq])[0]
        psi = np.zeros((len(tokens), n, n))
        for t, token in enumerate(tokens):
            unigram = np.zeros(n)
            for attribute, value in token.items():
                if attribute != "__transition__" and attribute in self.states:
                    unigram += value * self.states[attribute]
            psi[t] = unigram
            if t > 0:
                psi[t] += self.transitions
                for attribute, value in token.get("__transition__", {}).items():
                    if attribute in self.pairs:
                        psi[t] += value * self.pairs[attribute]
        out = []
        for path in paths:
            y = [self.index[label_] for label_ in path]
            out.append([float(psi[t, y[t - 1] if t else 0, y[t]]) for t in range(len(y))])
        return out


def _label_batch(model: Any, batch: list[Any], args: Any, stats: Any, lattice: Any) -> str:
    """The output of wapiti label for ``batch``, ``(sequence, its lines' text)`` pairs."""
    X = [sequence.tokens for sequence, _ in batch]
    out: list[str] = []
    if args.nbest > 1:
        candidates = [[path for path, _ in paths] for paths in model.nbest(X, args.nbest)]
    else:
        candidates = [[path] for path in model.predict(X)]
    marginals = model.marginals(X) if args.score and args.post else None
    for s, (sequence, lines) in enumerate(batch):
        if not args.score:
            scores: list[list[float]] = [[] for _ in candidates[s]]
        elif args.post:
            assert marginals is not None
            scores = [[marginals[s][t][y] for t, y in enumerate(path)] for path in candidates[s]]
        else:
            scores = lattice.token_scores(X[s], candidates[s])
        for n, path in enumerate(candidates[s]):
            if args.score:
                # Wapiti's Viterbi multiplies (-p) or adds the lattice's terms
                total = math.prod(scores[n]) if args.post else _c_sum(scores[n])
                out.append(f"# {n} {total:f}\n")
            for t, label_ in enumerate(path):
                line = str(label_) if args.label else f"{lines[t]}\t{label_}"
                if args.score:
                    line += f"\t{label_}/{scores[n][t]:f}"
                out.append(line + "\n")
            out.append("\n")
        if stats is not None:
            stats.add(candidates[s][0], sequence.labels)
    return "".join(out)


def _c_sum(values: list[float]) -> float:
    """The sum left to right, as Wapiti's Viterbi accumulates it."""
    total = 0.0
    for value in values:
        total += value
    return total


def label(argv: list[str]) -> int:
    """``skcrf wapiti label -m MODEL [INPUT [OUTPUT]]``: wapiti label."""
    args = _label_parser().parse_args(argv)
    if args.help:
        sys.stdout.write(LABEL_USAGE)
        return 0
    if not args.model:
        raise CommandError("skcrf wapiti label: give the model with -m MODEL (see -h)")
    if args.nbest < 1:
        raise CommandError("skcrf wapiti label: -n takes a count >= 1")
    if len(args.files) > 2:
        raise CommandError("skcrf wapiti label: give at most INPUT and OUTPUT (see -h)")
    if args.post and args.nbest > 1:
        raise CommandError("skcrf wapiti label: -p labels one path: give -n 1")
    sys.stderr.write("* Load model\n")
    model = template_model(open_model(args.model), args.model)
    sys.stderr.write("* Label sequences\n")
    if args.post:
        model.decoding = model.decoding._replace(method="posterior")
    input_path = args.files[0] if args.files else "-"
    output_path = args.files[1] if len(args.files) == 2 and args.files[1] != "-" else ""
    stats = _CheckStats([str(c) for c in model.classes]) if args.check else None
    lattice = _Lattice(model) if args.score and not args.post else None
    out: TextIO = sys.stdout
    if output_path:
        out = open_output(output_path, "skcrf wapiti label", args.model, input_path)
    try:
        batch: list[Any] = []
        sequences = column_sequences(input_path, labelled=args.check, keep_text=not args.label)
        for sequence, texts in sequences:
            if not batch:
                _check_columns(model.plan, sequence, input_path, "model's patterns")
            batch.append((sequence, texts))
            if len(batch) == LABEL_BATCH:
                out.write(_label_batch(model, batch, args, stats, lattice))
                batch = []
        if batch:
            out.write(_label_batch(model, batch, args, stats, lattice))
    finally:
        if out is not sys.stdout:
            out.close()
    if stats is not None:
        sys.stderr.write(stats.report())
    sys.stderr.write("* Done\n")
    return 0


def dump(argv: list[str]) -> int:
    """``skcrf wapiti dump MODEL [OUTPUT]``: wapiti dump."""
    parser = ArgumentParser(prog="skcrf wapiti dump", add_help=False)
    parser.add_argument("-p", "--prec", type=int, default=5)
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    if args.help:
        sys.stdout.write(DUMP_USAGE)
        return 0
    if not 1 <= len(args.files) <= 2:
        raise CommandError("skcrf wapiti dump: give MODEL [OUTPUT] (see -h)")
    if not 0 <= args.prec <= 60:
        raise CommandError("skcrf wapiti dump: -p takes a precision from 0 to 60")
    sys.stderr.write("* Load model\n")
    model = open_model(args.files[0])
    sys.stderr.write("* Dump model\n")
    text = "".join(_dump_lines(model, args.prec))
    if len(args.files) == 2:
        with open_output(args.files[1], "skcrf wapiti dump", args.files[0]) as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _dump_lines(model: Any, prec: int) -> Any:
    """The lines of wapiti dump: each observation's nonzero weights, then a blank line."""
    labels = [str(c) for c in model.classes]
    states: dict[str, dict[str, float]] = {}
    for (attribute, label_), weight in model.model.state_features().items():
        states.setdefault(attribute, {})[str(label_)] = weight
    pairs: dict[str, dict[tuple[str, str], float]] = {}
    conditioned = model.model.conditioned_transition_features()
    for (attribute, previous, label_), weight in conditioned.items():
        pairs.setdefault(attribute, {})[(str(previous), str(label_))] = weight
    pairs_only = [attribute for attribute in pairs if attribute not in states]
    transitions = {(str(i), str(j)): w for (i, j), w in model.model.transition_features().items()}
    # a Wapiti model's bare 'b' and '*' patterns are among its conditioned
    # observations already; the plain transitions are their sum
    plain = [] if "b" in pairs or "*" in pairs else [None]
    for attribute in [*states, *pairs_only, *plain]:
        block = []
        if attribute is not None:
            weights = states.get(attribute, {})
            block += [
                f"{attribute}\t#\t{label_}\t{weights[label_]:.{prec}f}\n"
                for label_ in labels
                if weights.get(label_, 0.0) != 0.0
            ]
        pair_weights = pairs.get(attribute, {}) if attribute is not None else transitions
        block += [
            f"{'b' if attribute is None else attribute}\t{i}\t{j}\t{pair_weights[i, j]:.{prec}f}\n"
            for i in labels
            for j in labels
            if pair_weights.get((i, j), 0.0) != 0.0
        ]
        if block:
            yield from block
            yield "\n"


def main(argv: list[str]) -> int:
    """``skcrf wapiti train|label|dump ...``."""
    if not argv or argv[0] in ("-h", "--help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else 1
    commands = {"train": train, "label": label, "dump": dump}
    if argv[0] not in commands:
        raise CommandError(
            f"skcrf wapiti: unknown mode {argv[0]!r} (train, label or dump; update is not "
            "available)"
        )
    return commands[argv[0]](argv[1:])
