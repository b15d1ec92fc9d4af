"""``skcrf learn``, ``skcrf tag`` and ``skcrf dump``: CRFsuite's frontend, on skcrf.

The options, the data files and the outputs of ``crfsuite learn``, ``tag``
and ``dump`` (CRFsuite 0.12's ``frontend/``). Training goes through
:class:`skcrf.pycrfsuite.Trainer`'s engine (the model and the log CRFsuite
writes), tagging through the predictor a :class:`skcrf.CRFTagger` holds
(``_models``: no scikit-learn).
"""

import math
import os
import sys
import time
from typing import Any, TextIO

from .._utils._data_files import (
    CRFsuiteInstance,
    check_regular_file,
    display_name,
    open_binary,
    read_crfsuite_data,
)
from ._common import ArgumentParser, ByteProgress, CommandError, utc_timestamp
from ._models import attribute_model, open_model

#: Sequences tagged per call of the tagger (streaming, in batches).
TAG_BATCH = 256

LEARN_USAGE = """\
usage: skcrf learn [OPTIONS] [DATA ...]
Train a CRF on data files in CRFsuite's format and store a CRFsuite model.
With several DATA files, the instances of the i-th one form group i (for -e
and -x); '-' or no DATA reads the standard input.

options:
  -t, --type=1d          the graphical model (only '1d', CRFsuite's crf1d)
  -a, --algorithm=NAME   lbfgs (default), l2sgd, ap (averaged-perceptron),
                         pa (passive-aggressive) or arow
  -p, --set=NAME=VALUE   a parameter of the algorithm, by CRFsuite's name
                         (-H lists them with their defaults)
  -m, --model=FILE       where to store the model (none when not given)
  -g, --split=N          shuffle the instances into N groups
  -e, --holdout=M        train without group M and evaluate on it at every
                         iteration
  -x, --cross-validate   a holdout evaluation of each group in turn (N-fold
                         cross-validation); stores no model
  -l, --log-to-file      write the log to a file named from -L, the algorithm
                         and the parameters instead of to the standard output
  -L, --logbase=BASE     that file name's start (default 'log.crfsuite')
  -h, --help             show this help and exit
  -H, --help-parameters  list the parameters of the algorithm (-a) and exit
"""

TAG_USAGE = """\
usage: skcrf tag -m MODEL [OPTIONS] [DATA ...]
Tag the sequences of data files in CRFsuite's format ('-' or no DATA: the
standard input) with a model (CRFsuite's, or saved by skcrf). Each line's
first field is its reference label (any text when unknown).

options:
  -m, --model=MODEL      the model file
  -t, --test             report the model's performance against the reference
                         labels
  -r, --reference        write each reference label before the predicted one
                         ('(null)' for a label the model does not know, as
                         crfsuite tag writes it)
  -p, --probability      write each sequence's score, log-partition and
                         probability
  -i, --marginal         write the marginal probability of each predicted label
  -l, --marginal-all     write the marginal probability of every label
  -q, --quiet            write no labels (with -t: the report alone)
  -h, --help             show this help and exit
"""

DUMP_USAGE = """\
usage: skcrf dump MODEL
Write a model (CRFsuite's, or saved by skcrf) in CRFsuite's text dump format.
"""


# -- learn -------------------------------------------------------------------------


class _GlibcRandom:
    """glibc's ``rand()`` from its default seed: the order ``crfsuite learn -g`` shuffles in."""

    def __init__(self, seed: int = 1) -> None:
        r = [seed]
        for i in range(1, 31):
            hi, lo = divmod(r[i - 1], 127773)
            word = 16807 * lo - 2836 * hi
            r.append(word + 2147483647 if word < 0 else word)
        r += [r[i - 31] for i in range(31, 34)]
        for i in range(34, 344):
            r.append((r[i - 31] + r[i - 3]) & 0xFFFFFFFF)
        self._r = r

    def __call__(self) -> int:
        r = self._r
        value = (r[-31] + r[-3]) & 0xFFFFFFFF
        r.append(value)
        del r[0]
        return value >> 1


def _learn_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="skcrf learn", add_help=False)
    parser.add_argument("-t", "--type", default="1d")
    parser.add_argument("-a", "--algorithm", default="lbfgs")
    parser.add_argument("-p", "--set", dest="params", action="append", default=[])
    parser.add_argument("-m", "--model", default="")
    parser.add_argument("-g", "--split", type=int, default=0)
    parser.add_argument("-e", "--holdout", type=int, default=0)
    parser.add_argument("-x", "--cross-validate", action="store_true")
    parser.add_argument("-l", "--log-to-file", action="store_true")
    parser.add_argument("-L", "--logbase", default="log.crfsuite")
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("-H", "--help-parameters", action="store_true")
    parser.add_argument("data", nargs="*")
    return parser


_ALGORITHM_NAMES = {
    "lbfgs": "lbfgs",
    "l2sgd": "l2sgd",
    "ap": "averaged-perceptron",
    "averaged-perceptron": "averaged-perceptron",
    "pa": "passive-aggressive",
    "passive-aggressive": "passive-aggressive",
    "arow": "arow",
}
_KIND_NAMES = {int: "int", float: "float", str: "string"}


def _trainer(algorithm: str, log: TextIO) -> Any:
    from ..pycrfsuite import BaseTrainer

    class LogTrainer(BaseTrainer):
        def message(self, message: str) -> None:
            log.write(message)
            log.flush()

    return LogTrainer(algorithm)


def _help_parameters(trainer: Any, algorithm: str, out: TextIO) -> None:
    out.write(f"PARAMETERS for {algorithm} (crf1d):\n\n")
    for name in trainer.params():
        parameter = trainer._parameters[name]
        value = parameter.text(trainer._values[name])
        out.write(f"{_KIND_NAMES[parameter.kind]} {name} = {value};\n{trainer.help(name)}\n\n")


def _read_into(
    trainer: Any, path: str, group: int, log: TextIO, pending: "list[CRFsuiteInstance] | None"
) -> tuple[int, set[str], set[str], int]:
    """Read one data file into ``trainer`` (or ``pending``) with CRFsuite's progress dots."""
    name = display_name(path)
    size = check_regular_file(path, name) if path != "-" else 0
    file, owned = open_binary(path, name)
    n_instances = n_items = 0
    attributes: set[str] = set()
    labels: set[str] = set()
    shown = 0
    log.write("0")

    def show(percent: int) -> None:
        nonlocal shown
        while shown < percent:
            shown += 1
            if shown % 2 == 0:
                log.write(str(shown // 10) if shown % 10 == 0 else ".")

    try:
        for instance in read_crfsuite_data(file):
            n_instances += 1
            n_items += len(instance.labels)
            labels.update(instance.labels)
            for token in instance.tokens:
                attributes.update(token)
            if pending is None:
                trainer._append_weighted(instance.tokens, instance.labels, group, instance.weight)
            else:
                pending.append(instance)
            if size:
                show(min(100, int(file.tell() * 100 / size)))
    finally:
        if owned:
            file.close()
    show(100)
    log.write("\n")
    return n_instances, attributes, labels, n_items


def learn(argv: list[str]) -> int:
    """``skcrf learn``: train on CRFsuite data files; CRFsuite's log and model file."""
    args = _learn_parser().parse_args(argv)
    if args.help:
        sys.stdout.write(LEARN_USAGE)
        return 0
    if args.type != "1d":
        raise CommandError(f"skcrf learn: unknown graphical model: {args.type} (only '1d')")
    if args.algorithm not in _ALGORITHM_NAMES:
        raise CommandError(f"skcrf learn: unknown algorithm: {args.algorithm}")
    algorithm = _ALGORITHM_NAMES[args.algorithm]
    log: TextIO = sys.stdout
    if args.log_to_file:
        name = "_".join([args.logbase, algorithm, *args.params])
        log = open(name, "w", encoding="utf-8")
    try:
        return _learn(args, algorithm, log)
    finally:
        if log is not sys.stdout:
            log.close()


def _learn(args: Any, algorithm: str, log: TextIO) -> int:
    from .._version import __version__

    trainer = _trainer(algorithm, log)
    if args.help_parameters:
        _help_parameters(trainer, algorithm, log)
        return 0
    for setting in args.params:
        name, equals, value = setting.partition("=")
        if not equals:
            raise CommandError(f"skcrf learn: -p takes NAME=VALUE, got {setting!r}")
        if name not in trainer.params():
            raise CommandError(f"skcrf learn: no parameter {name!r} for {algorithm} (see -H)")
        trainer.set(name, value)
    sys.stdout.write(f"skcrf {__version__}: crfsuite learn\n\n")
    log.write(f"Start time of the training: {utc_timestamp()}\n\n")
    log.write("Reading the data set(s)\n")
    files = args.data or ["-"]
    pending: list[CRFsuiteInstance] | None = [] if args.split > 0 else None
    totals = [0, 0]
    attributes: set[str] = set()
    labels: set[str] = set()
    for group, path in enumerate(files):
        log.write(f"[{group + 1}] {path}\n")
        start = time.perf_counter()
        n, attrs, labs, n_items = _read_into(trainer, path, group, log, pending)
        totals[0] += n
        totals[1] += n_items
        attributes |= attrs
        labels |= labs
        log.write(f"Number of instances: {n}\n")
        log.write(f"Seconds required: {time.perf_counter() - start:.3f}\n")
    log.write("\n")
    groups = len(files)
    if pending is not None:
        # crfsuite learn -g: swap each instance with one rand() picks, then deal
        # the instances out to the groups in turn. The instances are added in
        # the files' order (CRFsuite's label order is the files'), each with
        # the group its shuffled place gives.
        rand = _GlibcRandom()
        order = list(range(len(pending)))
        for i in range(len(order)):
            j = rand() % len(order)
            order[i], order[j] = order[j], order[i]
        group_of = [0] * len(order)
        for place, k in enumerate(order):
            group_of[k] = place % args.split
        for k, instance in enumerate(pending):
            trainer._append_weighted(
                instance.tokens, instance.labels, group_of[k], instance.weight
            )
        groups = args.split
    log.write("Statistics the data set(s)\n")
    log.write(f"Number of data sets (groups): {groups}\n")
    log.write(f"Number of instances: {totals[0]}\n")
    log.write(f"Number of items: {totals[1]}\n")
    log.write(f"Number of attributes: {len(attributes)}\n")
    log.write(f"Number of labels: {len(labels)}\n\n")
    log.flush()
    if args.cross_validate:
        for group in range(groups):
            log.write(f"===== Cross validation ({group + 1}/{groups}) =====\n")
            trainer.train("", holdout=group)
            log.write("\n")
    else:
        trainer.train(args.model, holdout=args.holdout - 1)
    log.write(f"End time of the training: {utc_timestamp()}\n\n")
    return 0


# -- tag ----------------------------------------------------------------------------


def _tag_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="skcrf tag", add_help=False)
    parser.add_argument("-m", "--model", default="")
    for short, long in [
        ("-t", "--test"),
        ("-r", "--reference"),
        ("-p", "--probability"),
        ("-i", "--marginal"),
        ("-l", "--marginal-all"),
        ("-q", "--quiet"),
        ("-h", "--help"),
    ]:
        parser.add_argument(short, long, action="store_true")
    parser.add_argument("data", nargs="*")
    return parser


class Evaluation:
    """CRFsuite's tagging evaluation (``crfsuite_evaluation_t``): its counts and report.

    As CRFsuite counts: a reference label that the model does not know stops
    the counting of its sequence (the tokens before it counted, the sequence
    not).
    """

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels
        self.index = {label: k for k, label in enumerate(labels)}
        n = len(labels)
        self.correct = [0] * n
        self.model = [0] * n
        self.observed = [0] * n
        self.items = 0
        self.instances = 0
        self.correct_instances = 0

    def add(self, reference: list[str], predicted: list[int]) -> None:
        matches = 0
        for label, guess in zip(reference, predicted):
            truth = self.index.get(label)
            if truth is None:
                return
            self.observed[truth] += 1
            self.model[guess] += 1
            if truth == guess:
                self.correct[truth] += 1
                matches += 1
            self.items += 1
        if matches == len(reference):
            self.correct_instances += 1
        self.instances += 1

    def report(self) -> str:
        lines = ["Performance by label (#match, #model, #ref) (precision, recall, F1):"]
        macro = [0.0, 0.0, 0.0]
        total_correct = 0
        for k, label in enumerate(self.labels):
            counts = f"({self.correct[k]}, {self.model[k]}, {self.observed[k]})"
            if self.observed[k] == 0:
                lines.append(f"    {label}: {counts} (******, ******, ******)")
                continue
            total_correct += self.correct[k]
            precision = self.correct[k] / self.model[k] if self.model[k] else 0.0
            recall = self.correct[k] / self.observed[k]
            f1 = precision * recall * 2 / (precision + recall) if precision + recall > 0 else 0.0
            for m, value in enumerate((precision, recall, f1)):
                macro[m] += value
            lines.append(f"    {label}: {counts} ({precision:1.4f}, {recall:1.4f}, {f1:1.4f})")
        n = len(self.labels)
        macro = [value / n for value in macro] if n else [math.nan] * 3
        item_accuracy = total_correct / self.items if self.items else 0.0
        instance_accuracy = self.correct_instances / self.instances if self.instances else 0.0
        lines.append(
            f"Macro-average precision, recall, F1: ({macro[0]:f}, {macro[1]:f}, {macro[2]:f})"
        )
        lines.append(f"Item accuracy: {total_correct} / {self.items} ({item_accuracy:1.4f})")
        lines.append(
            f"Instance accuracy: {self.correct_instances} / {self.instances} "
            f"({instance_accuracy:1.4f})"
        )
        return "\n".join(lines) + "\n"


class _Scorer:
    """The Viterbi path's score, CRFsuite's ``@score`` (state and transition weights summed)."""

    def __init__(self, model: Any) -> None:
        self.states = model.state_features()
        self.transitions = model.transition_features()

    def __call__(self, tokens: list[dict[str, float]], path: list[Any]) -> float:
        states, score = self.states, 0.0
        for token, label in zip(tokens, path):
            for name, value in token.items():
                score += value * states.get((name, label), 0.0)
        for previous, label in zip(path, path[1:]):
            score += self.transitions.get((previous, label), 0.0)
        return score


def _tag_batch(model: Any, batch: list[CRFsuiteInstance], args: Any, state: dict[str, Any]) -> str:
    X = [instance.tokens for instance in batch]
    paths = model.predict(X)
    index = state["index"]
    evaluation = state["evaluation"]
    if evaluation is not None:
        for instance, path in zip(batch, paths):
            evaluation.add(instance.labels, [index[label] for label in path])
    if args.quiet:
        return ""
    log_probas = model.sequence_log_proba(X) if args.probability else None
    marginals = model.marginals(X) if args.marginal or args.marginal_all else None
    labels = state["labels"]
    out = []
    for s, (instance, path) in enumerate(zip(batch, paths)):
        if log_probas is not None:
            score = state["scorer"](instance.tokens, path)
            log_norm = score - float(log_probas[s])
            out.append(f"@score\t{score:f}\t{log_norm:f}\n")
            out.append(f"@probability\t{math.exp(score - log_norm):f}\n")
        for t, label in enumerate(path):
            if args.reference:
                # as crfsuite tag: a label the model does not know is printed as
                # C's printf prints a null string
                reference = instance.labels[t]
                out.append(f"{reference if reference in index else '(null)'}\t")
            out.append(str(label))
            if marginals is not None:
                probabilities = marginals[s][t]
                if args.marginal:
                    out.append(f":{probabilities[label]:f}")
                if args.marginal_all:
                    for name, key in labels:
                        out.append(f"\t{name}:{probabilities[key]:f}")
            out.append("\n")
        out.append("\n")
    return "".join(out)


def tag(argv: list[str]) -> int:
    """``skcrf tag``: tag CRFsuite data files with a model; CRFsuite's outputs."""
    args = _tag_parser().parse_args(argv)
    if args.help:
        sys.stdout.write(TAG_USAGE)
        return 0
    if not args.model:
        raise CommandError("skcrf tag: give the model with -m MODEL (see skcrf tag -h)")
    model = attribute_model(open_model(args.model), args.model)
    classes = list(model.classes)
    state: dict[str, Any] = {
        "index": {label: k for k, label in enumerate(classes)},
        "labels": [(str(label), label) for label in classes],
        "evaluation": Evaluation([str(label) for label in classes]) if args.test else None,
        "scorer": _Scorer(model.model) if args.probability and not args.quiet else None,
    }
    out = sys.stdout
    start = time.process_time()
    n_instances = 0
    for path in args.data or ["-"]:
        name = display_name(path)
        size = check_regular_file(path, name) if path != "-" else 0
        file, owned = open_binary(path, name)
        progress = ByteProgress(size, os.path.basename(name))
        try:
            batch: list[CRFsuiteInstance] = []
            for instance in read_crfsuite_data(file):
                batch.append(instance)
                if len(batch) == TAG_BATCH:
                    out.write(_tag_batch(model, batch, args, state))
                    n_instances += len(batch)
                    batch = []
                    progress.update_to(file.tell())
            if batch:
                out.write(_tag_batch(model, batch, args, state))
                n_instances += len(batch)
        finally:
            progress.close()
            if owned:
                file.close()
    if state["evaluation"] is not None:
        seconds = time.process_time() - start
        out.write(state["evaluation"].report())
        rate = n_instances / seconds if seconds > 0 else math.inf
        out.write(f"Elapsed time: {seconds:f} [sec] ({rate:.1f} [instance/sec])\n")
    out.flush()
    return 0


# -- dump ---------------------------------------------------------------------------


def dump(argv: list[str]) -> int:
    """``skcrf dump MODEL``: CRFsuite's text dump of a model."""
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        if argv and argv[0] in ("-h", "--help"):
            sys.stdout.write(DUMP_USAGE)
            return 0
        raise CommandError("skcrf dump: give one model file (see skcrf dump -h)")
    model = open_model(argv[0])
    sys.stdout.flush()
    model.dump()
    return 0
