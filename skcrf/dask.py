"""Training on a Dask cluster: data-parallel L-BFGS over dask.distributed.

:class:`DaskCRFTagger` trains the model :class:`skcrf.CRFTagger` trains (the
same features in the same order, the same objective, the same L-BFGS /
OWL-QN) on data spread over the workers of a ``dask.distributed`` cluster,
and :func:`read_conll` reads CoNLL-style column files where they lie, into a
``dask.bag.Bag``. Needs ``dask[distributed]`` (``pip install 'skcrf[dask]'``);
importing this module does not.

How a fit runs
--------------
1. **Vocabulary, by map-reduce.** Each partition of ``X`` and ``y`` is
   validated and encoded on its worker with a vocabulary of its own; the
   stats of the partitions (attribute names in order of first appearance,
   labels, value sums per (attribute, label) pair and label-pair counts) are
   merged by a tree of tasks over the partitions *in order*, which gives the
   attribute order of one pass over the whole data. One task turns the
   merged stats into the model's features (``classes``, ``all_possible_*``,
   ``min_freq``), as a local fit chooses them.
2. **Vectorized partitions stay on their workers.** Each partition's
   encoding is mapped onto the model's attribute ids; then each worker gets
   one *group* of consecutive partitions (``partition_groups``, where
   most of the group's data already is) and keeps it as one objective, with
   one model layout and one set of evaluation buffers (a Dask future).
3. **L-BFGS on the driver.** Every objective evaluation sends the weights
   once to every worker (straight from the driver unless the client has
   ``direct_to_workers=False``); each group evaluates its partitions on its
   worker's threads and sends back one log-partition sum and one vector of
   expected counts. The driver adds them up in group order, subtracts the
   observed counts, adds the L2 term (once), and runs skcrf's own L-BFGS /
   OWL-QN.

The driver holds the model, the optimizer's vectors and the attribute names,
never the corpus. Every task of the fit descends from the partitions of the
bags, so a lost worker's groups are rebuilt from the bags' lineage on the
workers that remain, and the fit goes on. The groups depend only on the
numbers of partitions and workers at the start, and are summed in order, so
the result does not depend on where the tasks ran.

Examples
--------
A sketch (needs a cluster)::

    from dask.distributed import Client
    from .dask import DaskCRFTagger, read_conll

    client = Client("tcp://scheduler:8786")
    data = read_conll("corpus/*.conll", columns=("word", "pos", "chunk"),
                      label_column="chunk", feature_func=features)
    X, y = data.pluck(0), data.pluck(1)
    tagger = DaskCRFTagger(c2=0.1).fit(X, y)
    tagger.predict(X)          # a Bag of label sequences
    local = tagger.to_local()  # a skcrf.CRFTagger
"""

import inspect
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast, overload

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import clone

from ._compat import _fit_context
from ._dask import _tasks as tasks
from ._dask._conll import PathsLike, conll_blocks, iter_conll, read_blocks
from ._featurize._vocabulary import Vocabulary
from ._model import FittedState
from ._persist._estimator_files import check_model_filename
from ._tagger import CRFTagger
from ._training import _fit as fit_driver
from ._training._lbfgs import Handover
from ._training._monitor import CallbackInfo
from ._training._weights import check_sample_weight
from ._typing import LabelSequencesLike, SequencesLike
from ._version import __version__

if TYPE_CHECKING:  # optional dependencies: imported when used
    from dask.bag import Bag
    from distributed import Client

__all__ = ["DaskCRFTagger", "iter_conll", "read_conll"]

_INSTALL_HINT = "pip install 'skcrf[dask]' (or 'dask[distributed]')"


def _distributed():
    """``(dask, dask.bag, distributed)``, or an ImportError saying what to install."""
    try:
        import dask
        import dask.bag
        import distributed
    except ImportError as exc:
        raise ImportError(
            f"skcrf.dask needs dask and distributed, which are not installed: {_INSTALL_HINT}."
        ) from exc
    return dask, dask.bag, distributed


def _is_bag(obj):
    try:
        import dask.bag
    except ImportError:
        return False
    return isinstance(obj, dask.bag.Bag)


# -- reading corpora ------------------------------------------------------------


@overload
def read_conll(
    paths: PathsLike,
    columns: Sequence[str],
    *,
    label_column: str | None = ...,
    feature_func: Callable[[list[dict[str, str]]], Any] | None = ...,
    comment: str | None = ...,
    delimiter: str | None = ...,
    encoding: str = ...,
    blocksize: int | None = ...,
    bag: Literal[True] = ...,
) -> "Bag": ...


@overload
def read_conll(
    paths: PathsLike,
    columns: Sequence[str],
    *,
    label_column: str | None = ...,
    feature_func: Callable[[list[dict[str, str]]], Any] | None = ...,
    comment: str | None = ...,
    delimiter: str | None = ...,
    encoding: str = ...,
    blocksize: int | None = ...,
    bag: Literal[False],
) -> Iterator[Any]: ...


@overload
def read_conll(
    paths: PathsLike,
    columns: Sequence[str],
    *,
    label_column: str | None = ...,
    feature_func: Callable[[list[dict[str, str]]], Any] | None = ...,
    comment: str | None = ...,
    delimiter: str | None = ...,
    encoding: str = ...,
    blocksize: int | None = ...,
    bag: bool = ...,
) -> "Bag | Iterator[Any]": ...


def read_conll(
    paths: PathsLike,
    columns: Sequence[str],
    *,
    label_column: str | None = None,
    feature_func: Callable[[list[dict[str, str]]], Any] | None = None,
    comment: str | None = "#",
    delimiter: str | None = None,
    encoding: str = "utf-8",
    blocksize: int | None = None,
    bag: bool = True,
) -> "Bag | Iterator[Any]":
    r"""Sequences of CoNLL-style column files, as a ``dask.bag.Bag`` (or a generator).

    One token per line, its fields separated by whitespace; a blank line
    ends a sequence; comment lines and ``-DOCSTART-`` lines are skipped.

    Parameters
    ----------
    paths : str, os.PathLike or list of them
        Files, globs (``'data/*.conll'``, expanded and sorted) or fsspec URLs
        (``'s3://bucket/*.conll'``, with fsspec and the file system's
        package installed). Every worker must be able to open them.
    columns : sequence of str
        The names of the fields of a line, in order.
    label_column : str, optional
        The column holding the labels. With it, every item is a pair
        ``(tokens, labels)``: ``X, y = bag.pluck(0), bag.pluck(1)``.
    feature_func : callable, optional
        ``feature_func(rows) -> list of token features``, where ``rows`` is
        the sequence's tokens as ``{column: value}`` dicts (the label column
        left out). Applied on the workers, where the partition is read.
        Without it the token features are the rows themselves (``{'word':
        'The', 'pos': 'DT'}`` gives the attributes ``word:The`` and
        ``pos:DT``).
    comment : str or None, default='#'
        Lines starting with it are skipped. None: no comment lines.
    delimiter : str or None, default=None
        Field separator; None splits on runs of whitespace (use ``'\t'``
        when a field may hold spaces, as in CoNLL-U).
    encoding : str, default='utf-8'
        ASCII-compatible when ``blocksize`` is given.
    blocksize : int or None, default=None
        None: one partition per file. An int: partitions of about that many
        bytes of a file, cut at blank lines (a sequence is never split).
    bag : bool, default=True
        False: a plain generator of the items, file after file, which needs
        no Dask (``blocksize`` is then ignored).

    Returns
    -------
    dask.bag.Bag or generator

    Raises
    ------
    FileNotFoundError
        If a path or glob names no file.
    ValueError
        When read: a line with another number of fields than ``columns``
        (naming the file and line).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.conll")
    >>> _ = open(path, "w").write("# doc 1\nThe DT\ndog NN\n\nRuns VBZ\n")
    >>> list(read_conll(path, columns=("word", "tag"), label_column="tag", bag=False))
    [([{'word': 'The'}, {'word': 'dog'}], ['DT', 'NN']), ([{'word': 'Runs'}], ['VBZ'])]
    """
    options: dict[str, Any] = dict(
        label_column=label_column,
        feature_func=feature_func,
        comment=comment,
        delimiter=delimiter,
        encoding=encoding,
    )
    if not bag:
        return iter_conll(paths, columns, **options)
    _, db, _ = _distributed()
    from ._dask._conll import _check_options

    options["columns"] = _check_options(columns, label_column)
    blocks = conll_blocks(paths, blocksize)
    return db.from_sequence(blocks, npartitions=len(blocks)).map_partitions(
        _read_partition, **options
    )


def _read_partition(blocks, columns, **options):
    return read_blocks(list(blocks), columns=columns, **options)


# -- the estimator ----------------------------------------------------------------


class DaskCRFTagger(CRFTagger):
    r"""A linear-chain CRF trained on a Dask cluster; the model of :class:`~skcrf.CRFTagger`.

    Every parameter of :class:`skcrf.CRFTagger`, with the same meaning, and
    ``client``. Only ``algorithm='lbfgs'`` (the default) is supported: the
    other trainers are online methods that visit one sequence after another.
    ``fit`` takes ``dask.bag.Bag``\ s of sequences and of label sequences
    with the same partitions (or lists, made into bags); the fitted
    estimator predicts locally like a ``CRFTagger``, and on a ``Bag``
    returns a ``Bag``. See the module's docstring for how a fit runs, and
    ``docs/dask.md`` for running it on a cluster.

    Parameters
    ----------
    algorithm, min_freq, c1, c2, ..., n_jobs, random_state, warm_start, ...
        Every parameter of :class:`skcrf.CRFTagger` (the signature follows
        it), with the same meaning. ``n_jobs``: threads of each worker's
        evaluation (None: the threads the worker was started with), and of
        local prediction.
        ``early_stopping=True`` needs ``X_dev``/``y_dev`` in ``fit``;
        ``warm_start=True`` from a fitted model is not supported yet.
    client : distributed.Client, str or None, default=None
        The cluster: a client, a scheduler address (a client is opened for
        the fit and closed after it), or None for the current client
        (``distributed.get_client()``). A client is not copied by
        ``clone`` and not pickled.

    Attributes
    ----------
    classes_, attributes_, coef_, transition_, n_iter_, training_log_, status_, n_features_
        As :class:`skcrf.CRFTagger`.
    fit_info_ : dict
        Figures of the last fit: ``n_partitions``, ``n_groups`` (one per
        worker at the start: consecutive partitions evaluated together),
        ``n_workers``, ``n_evaluations``, ``setup_seconds`` (vocabulary and
        vectorization), ``vectorized_bytes`` (the encoded corpus held by the
        workers) and ``weights_bytes`` (one weight vector; each evaluation
        sends it once to every worker, and the driver receives one gradient
        of that size per group).

    Examples
    --------
    >>> from skcrf.dask import DaskCRFTagger
    >>> DaskCRFTagger(c2=0.1, max_iterations=50)
    DaskCRFTagger(c2=0.1, max_iterations=50)
    """

    _parameter_constraints: dict = {
        **CRFTagger._parameter_constraints,
        "client": "no_validation",
    }

    def __init__(self, *args: Any, client: "Client | str | None" = None, **kwargs: Any) -> None:
        # Every CRFTagger parameter, whatever they are now: the signature
        # scikit-learn reads (get_params, clone) is CRFTagger's plus `client`.
        super().__init__(*args, **kwargs)
        self.client = client

    # -- scikit-learn plumbing -----------------------------------------------------

    def __sklearn_clone__(self):
        # A Client cannot be deep-copied: the clone shares it.
        params = self.get_params(deep=False)
        client = params.pop("client")
        return type(self)(**{k: clone(v, safe=False) for k, v in params.items()}, client=client)

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("client") is not None and not isinstance(state["client"], str):
            state["client"] = None  # a live connection does not travel
        return state

    def _get_fitted_state(self):
        state = super()._get_fitted_state()
        state.params.pop("client", None)
        return state

    def to_local(self) -> CRFTagger:
        """The fitted model as a :class:`skcrf.CRFTagger` (no Dask needed to use it).

        Returns
        -------
        CRFTagger
            Predicts exactly what this estimator predicts.
        """
        state = self._get_fitted_state()
        return CRFTagger._from_fitted_state(
            FittedState(
                params=state.params,
                model=state.model,
                n_iter=state.n_iter,
                status=state.status,
                training_log=state.training_log,
            )
        )

    def partial_fit(
        self,
        X: SequencesLike,
        y: LabelSequencesLike,
        classes: Iterable[Any] | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> NoReturn:
        """Not supported: DaskCRFTagger trains with L-BFGS over all the data (use fit)."""
        raise ValueError(
            "DaskCRFTagger has no partial_fit: it trains with L-BFGS ('lbfgs') over all "
            "the data at once. Use fit, or skcrf.CRFTagger with an online algorithm."
        )

    # -- fit ---------------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self,
        X: "Bag | SequencesLike",
        y: "Bag | LabelSequencesLike",
        X_dev: SequencesLike | None = None,
        y_dev: LabelSequencesLike | None = None,
        *,
        sample_weight: "Bag | ArrayLike | None" = None,
        callback: Callable[[CallbackInfo], Any] | None = None,
        npartitions: int | None = None,
    ) -> "DaskCRFTagger":
        """Train the CRF on the cluster.

        Parameters
        ----------
        X : dask.bag.Bag or list of sequences of tokens
            A Bag whose items are sequences of tokens, or a list (made into a
            Bag of ``npartitions`` partitions).
        y : dask.bag.Bag or list of sequences of labels
            The label sequences: a Bag with the same partitions as ``X``
            (partition ``k`` of ``y`` labels partition ``k`` of ``X``), or a
            list when ``X`` is one.
        X_dev, y_dev : list of sequences, optional
            Held-out data, evaluated on the driver at every iteration
            (``training_log_``), as in :meth:`skcrf.CRFTagger.fit`; with
            ``early_stopping=True`` they are the validation data (required:
            a validation split of a Bag is not supported).
        sample_weight : dask.bag.Bag or array-like, optional
            One weight per sequence, as in :meth:`skcrf.CRFTagger.fit`: a
            Bag with the partitions of ``X`` (one number per sequence), or an
            array when ``X`` is a list. Sequences of weight 0 are left out on
            their workers after validation.
        callback : callable, optional
            As in :meth:`skcrf.CRFTagger.fit`: ``callback(info)`` on the
            driver after every iteration; True stops training.
        npartitions : int, optional
            Partitions of the Bags made from lists; default: the worker
            threads of the cluster.

        Returns
        -------
        self : DaskCRFTagger

        Raises
        ------
        ValueError
            For an algorithm other than 'lbfgs', bags whose partitions
            disagree, or invalid input: the message names the place as
            ``X.partitions[k][i][j]`` (sequence ``i`` of partition ``k``).
        """
        algorithm, settings = self._settings()
        if algorithm != "lbfgs":
            raise ValueError(
                f"DaskCRFTagger trains with algorithm='lbfgs' only; got {algorithm!r}. "
                "The other algorithms ('l2sgd', 'asgd', 'ap', 'pa', 'arow') are online "
                "trainers that update the weights after each sequence, which does not distribute "
                "as a sum over partitions; use skcrf.CRFTagger for them."
            )
        if self.class_weight is not None:
            raise ValueError(
                "DaskCRFTagger does not support class_weight yet: leave it None, or "
                "train with skcrf.CRFTagger (which supports it)."
            )
        if (X_dev is None) != (y_dev is None):
            raise ValueError("X_dev and y_dev must be given together.")
        if X_dev is not None and (_is_bag(X_dev) or _is_bag(y_dev)):
            raise TypeError("X_dev and y_dev are evaluated on the driver: pass lists.")
        if self.early_stopping and X_dev is None:
            raise ValueError(
                "DaskCRFTagger: early_stopping needs X_dev and y_dev (the validation "
                "data, evaluated on the driver); a validation split of a Bag is not "
                "supported."
            )
        if self.warm_start and self.__dict__.get("_model") is not None:
            raise ValueError(
                "DaskCRFTagger does not support warm_start from a fitted model yet; "
                "fit from scratch (warm_start=False), or continue with skcrf.CRFTagger "
                "(to_local())."
            )
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable; got {type(callback).__name__}.")
        check_model_filename(self.model_filename)
        _, _, distributed = _distributed()
        client, own_client = self._connect(distributed)
        try:
            check_worker_versions(client)
            X, y, weights = _as_bags(X, y, npartitions, client, sample_weight)
            with _DistributedObjective(client, X, y, settings, self.n_jobs, weights) as objective:
                model = objective.model
                vocabulary = Vocabulary(model.attributes, model.value_separator)
                monitor = fit_driver.make_monitor(
                    model,
                    vocabulary,
                    settings,
                    n_jobs=self.n_jobs,
                    **self._monitor_options(
                        X_dev, y_dev, (X_dev, y_dev) if self.early_stopping else None, callback
                    ),
                )
                result = fit_driver.minimize(
                    objective,
                    Handover(np.zeros(model.n_features)),
                    settings,
                    monitor,
                    owner="DaskCRFTagger",
                    stacklevel=3,  # past _fit_context's wrapper
                )
                info = objective.info()
        finally:
            if own_client:
                client.close()
        status, weights = fit_driver.outcome(algorithm, result, monitor, stacklevel=3)
        self._store_fit(
            fit_driver.FitResult(
                model.with_weights(weights),
                vocabulary,
                result.n_iter,
                status,
                monitor.log,
                None,
                monitor.best_iteration,
            )
        )
        self.fit_info_ = info
        return self

    def _connect(self, distributed):
        """The client of the fit, and whether the fit opened it (and closes it)."""
        if isinstance(self.client, str):
            return distributed.Client(self.client, set_as_default=False), True
        if self.client is not None:
            return self.client, False
        try:
            return distributed.get_client(), False
        except ValueError:
            raise ValueError(
                "DaskCRFTagger needs a dask.distributed cluster: start a client first "
                "(distributed.Client() for a local cluster, Client('tcp://host:8786') "
                "for a running scheduler) or pass client=..."
            ) from None

    # -- prediction on bags ----------------------------------------------------------

    def _on_bag(self, X, method):
        dask, _, _ = _distributed()
        local = dask.delayed(self.to_local(), name=f"skcrf-model-{uuid.uuid4().hex}")
        return X.map_partitions(_predict_partition, local, method)

    @overload  # type: ignore[override]
    def predict(self, X: "Bag") -> "Bag": ...

    @overload
    def predict(self, X: SequencesLike) -> list[list[Any]]: ...

    def predict(self, X: "Bag | SequencesLike") -> "Bag | list[list[Any]]":
        """Most likely label sequences; a Bag of them for a Bag of sequences.

        Parameters
        ----------
        X : list of sequences of tokens, or dask.bag.Bag of them

        Returns
        -------
        list of list, or dask.bag.Bag
            For a Bag: a Bag with the same partitions, decoded on the workers.
        """
        if _is_bag(X):
            return self._on_bag(X, "predict")
        return super().predict(X)

    @overload  # type: ignore[override]
    def predict_marginals(self, X: "Bag") -> "Bag": ...

    @overload
    def predict_marginals(self, X: SequencesLike) -> list[list[dict[Any, float]]]: ...

    def predict_marginals(self, X: "Bag | SequencesLike") -> "Bag | list[list[dict[Any, float]]]":
        """Label marginals of every token; a Bag of them for a Bag of sequences."""
        if _is_bag(X):
            return self._on_bag(X, "predict_marginals")
        return super().predict_marginals(X)

    def score(
        self,
        X: "Bag | SequencesLike",
        y: "Bag | LabelSequencesLike",
        sample_weight: "Bag | ArrayLike | None" = None,
    ) -> float:
        """Token accuracy; with Bags, computed on the workers.

        Parameters
        ----------
        X : list of sequences of tokens, or dask.bag.Bag of them
        y : list of sequences of labels, or dask.bag.Bag with the same partitions
        sample_weight : array-like, or dask.bag.Bag with the same partitions, optional
            One weight per sequence, given to each of its tokens.

        Returns
        -------
        float
        """
        if not (_is_bag(X) or _is_bag(y)):
            if _is_bag(sample_weight):
                raise TypeError("score: sample_weight is a Bag but X and y are lists.")
            return super().score(X, y, sample_weight=cast("ArrayLike | None", sample_weight))
        dask, db, _ = _distributed()
        if not (_is_bag(X) and _is_bag(y)):
            raise TypeError("score: X and y must both be Bags, or both lists.")
        _check_partitions(X, y)
        local = dask.delayed(self.to_local(), name=f"skcrf-model-{uuid.uuid4().hex}")
        if sample_weight is None:
            counts = db.map_partitions(_score_partition, X, y, local).compute()
            correct, total = np.sum(np.asarray(counts, dtype=np.int64).reshape(-1, 2), axis=0)
        else:
            if not _is_bag(sample_weight):
                raise TypeError(
                    "score: with Bags, sample_weight must be a Bag with their partitions."
                )
            _check_partitions(X, sample_weight)
            counts = db.map_partitions(_score_partition, X, y, local, sample_weight).compute()
            correct, total = np.sum(np.asarray(counts, dtype=np.float64).reshape(-1, 2), axis=0)
        if not total:
            raise ValueError("score needs at least one token; all sequences are empty.")
        return float(correct / total)


def _signature_with_client():
    signature = inspect.signature(CRFTagger.__init__)
    client = inspect.Parameter(
        "client",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation="Client | str | None",
    )
    return signature.replace(parameters=[*signature.parameters.values(), client])


DaskCRFTagger.__init__.__signature__ = _signature_with_client()  # type: ignore[attr-defined]


def _predict_partition(sequences, tagger, method):
    return getattr(tagger, method)(list(sequences))


def _score_partition(X_part, y_part, tagger, w_part=None):
    X_part, y_part = list(X_part), list(y_part)
    predicted = tagger.predict(X_part)
    weights = None
    if w_part is not None:
        weights = check_sample_weight(list(w_part), len(X_part))
    if len(y_part) != len(predicted):
        raise ValueError(
            f"a partition of X has {len(predicted)} sequences but the one of y has {len(y_part)}."
        )
    correct = total = 0
    for i, (true, pred) in enumerate(zip(y_part, predicted)):
        if len(true) != len(pred):
            raise ValueError(
                f"y[{i}] (in its partition) has {len(true)} labels but X[{i}] "
                f"has {len(pred)} tokens."
            )
        w = 1 if weights is None else float(weights[i])
        correct += w * sum(a == b for a, b in zip(true, pred))
        total += w * len(true)
    return [(correct, total)]


# -- the fit's pieces -----------------------------------------------------------------


def check_worker_versions(client: "Client") -> None:
    """Raise unless every worker imports the driver's skcrf version.

    The partition tasks check it again, for workers that join later.
    """
    try:
        versions = client.run(_skcrf_version)
    except (ImportError, AttributeError) as exc:
        raise tasks.VersionMismatchError(
            f"skcrf cannot be imported on a worker ({exc}); install skcrf "
            f"{__version__} on every worker."
        ) from exc
    wrong = {address: v for address, v in versions.items() if v != __version__}
    if wrong:
        listed = ", ".join(f"{address}: {v}" for address, v in sorted(wrong.items()))
        raise tasks.VersionMismatchError(
            f"the driver runs skcrf {__version__} but some workers run another version "
            f"({listed}); install the same skcrf everywhere."
        )


def _skcrf_version():
    from ._version import __version__ as installed  # the worker's own

    return installed


def _check_partitions(X, y):
    if X.npartitions != y.npartitions:
        raise ValueError(
            f"X has {X.npartitions} partitions but y has {y.npartitions}: they must have "
            "the same partitions (partition k of y labels partition k of X), e.g. "
            "X, y = bag.pluck(0), bag.pluck(1) from one bag of (tokens, labels) pairs."
        )


def _as_bags(X, y, npartitions, client, sample_weight=None):
    """``X``, ``y`` and ``sample_weight`` (or None) as Bags with the same partitions."""
    _, db, _ = _distributed()
    if _is_bag(X) and _is_bag(y):
        _check_partitions(X, y)
        if sample_weight is not None:
            if not _is_bag(sample_weight):
                raise TypeError(
                    "X is a Bag: sample_weight must be a Bag with its partitions (one "
                    f"weight per sequence); got {type(sample_weight).__name__}."
                )
            _check_partitions(X, sample_weight)
        return X, y, sample_weight
    if _is_bag(sample_weight):
        raise TypeError("sample_weight is a Bag but X and y are lists: give an array.")
    if _is_bag(X) or _is_bag(y):
        raise TypeError(
            "X and y must both be dask.bag.Bags (with the same partitions) or both lists; "
            f"got {type(X).__name__} and {type(y).__name__}."
        )
    for name, data in (("X", X), ("y", y)):
        if not isinstance(data, (Sequence, np.ndarray)):
            raise TypeError(
                f"{name} must be a dask.bag.Bag or a list of sequences; got {type(data).__name__}."
            )
    if len(X) != len(y):
        raise ValueError(
            f"X has {len(X)} sequences but y has {len(y)} label sequences; they must have "
            "one label sequence per sequence."
        )
    if npartitions is None:
        npartitions = sum(client.nthreads().values()) or 1
    npartitions = max(1, min(int(npartitions), len(X) or 1))
    weights = None
    if sample_weight is not None:
        checked = check_sample_weight(sample_weight, len(X))
        weights = db.from_sequence(checked.tolist(), npartitions=npartitions)
    # the same length and count give the same partition boundaries
    return (
        db.from_sequence(list(X), npartitions=npartitions),
        db.from_sequence(list(y), npartitions=npartitions),
        weights,
    )


def partition_groups(n_partitions, n_groups):
    """Consecutive runs of partitions, one per worker: ``[(start, stop), ...]``.

    They depend only on the two counts (not on where tasks ran), so a fit
    sums the same groups in the same order whatever the placement, and after
    a worker is lost (its groups are rebuilt elsewhere from lineage).

    Examples
    --------
    >>> partition_groups(8, 2)
    [(0, 4), (4, 8)]
    >>> partition_groups(5, 3)
    [(0, 1), (1, 3), (3, 5)]
    """
    n_groups = max(1, min(n_groups, n_partitions))
    bounds = [n_partitions * g // n_groups for g in range(n_groups + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _tree(items, combine, fan_in=2):
    """Combine consecutive groups of ``fan_in`` items, level by level, into one.

    The grouping depends only on the number of items, so the order of the
    sums (and their rounding) does not depend on where the tasks run.
    """
    while len(items) > 1:
        groups = [items[i : i + fan_in] for i in range(0, len(items), fan_in)]
        items = [group[0] if len(group) == 1 else combine(group) for group in groups]
    return items[0]


class _DistributedObjective:
    """The CRF objective over the partitions held by the workers.

    ``objective(w) -> (loss, gradient)``, as
    :meth:`skcrf._training._objective.CRFObjective.loss_gradient` on the whole data:
    ``sum log Z - w . observed + c2 ||w||^2``. Built as a context manager:
    leaving it releases the partitions held by the workers.
    """

    def __init__(self, client, X, y, settings, n_jobs, sample_weight=None):
        self.client = client
        self.c2 = settings["c2"]
        self.token = uuid.uuid4().hex[:12]
        self.n_evaluations = 0
        started = time.perf_counter()
        self._futures = []
        try:
            self._build(X, y, settings, n_jobs, sample_weight)
        except BaseException:
            self.close()
            raise
        self.setup_seconds = time.perf_counter() - started

    def _build(self, X, y, settings, n_jobs, sample_weight=None):
        dask, _, distributed = _distributed()
        delayed = dask.delayed
        token = self.token
        # no graph optimization: X and y from one bag keep sharing its tasks
        x_parts = X.to_delayed(optimize_graph=False)
        y_parts = y.to_delayed(optimize_graph=False)
        w_parts = (
            [None] * len(x_parts)
            if sample_weight is None
            else sample_weight.to_delayed(optimize_graph=False)
        )
        scans = [
            delayed(tasks.scan_partition, pure=False)(
                xp, yp, k, __version__, wp, dask_key_name=f"skcrf-scan-{token}-{k}"
            )
            for k, (xp, yp, wp) in enumerate(zip(x_parts, y_parts, w_parts))
        ]
        stats = [
            delayed(tasks.partition_stats)(scan, dask_key_name=f"skcrf-stats-{token}-{k}")
            for k, scan in enumerate(scans)
        ]
        depth = iter(range(10**9))
        root = _tree(
            stats,
            lambda group: delayed(tasks.merge_stats)(
                *group, dask_key_name=f"skcrf-merge-{token}-{next(depth)}"
            ),
        )
        bundle = delayed(tasks.build_model)(
            root,
            all_possible_states=settings["all_possible_states"],
            all_possible_transitions=settings["all_possible_transitions"],
            min_freq=settings["min_freq"],
            dask_key_name=f"skcrf-model-{token}",
        )
        parts = [
            delayed(tasks.vectorize_partition)(
                scan, bundle, __version__, dask_key_name=f"skcrf-partition-{token}-{k}"
            )
            for k, scan in enumerate(scans)
        ]
        self.n_partitions = len(parts)
        futures = self.client.compute([bundle, *parts])
        self._futures = futures
        self._bundle_future, part_futures = futures[0], futures[1:]
        bundle_value = self._bundle_future.result()  # the first input error, if any
        self.model, self.observed = bundle_value.model, bundle_value.observed
        distributed.wait(part_futures)
        for future in part_futures:
            if future.status == "error":
                future.result()  # raises the partition's error
        self.groups = self._group(part_futures, n_jobs)
        self._futures = [self._bundle_future, *self.groups]
        # the vectorized partitions are released once the groups hold their
        # data; the groups keep them in their lineage, for a lost worker
        del futures, part_futures
        sizes = self.client.gather(
            self.client.map(
                tasks.encoded_nbytes,
                self.groups,
                key=[f"skcrf-nbytes-{token}-{g}" for g in range(len(self.groups))],
            )
        )
        self.vectorized_bytes = int(sum(sizes))
        self.n_tokens = bundle_value.n_tokens

    def _group(self, part_futures, n_jobs):
        """One group of consecutive partitions per worker, held where most of its data is.

        An evaluation then costs one weight vector in and one gradient out
        per worker, not per partition. Each group is asked of a worker of its
        own (a loose restriction: on a lost worker it is rebuilt elsewhere).
        """
        client, token = self.client, self.token
        who_has = client.who_has(part_futures)
        nbytes = client.nbytes([future.key for future in part_futures], summary=False)
        free = list(client.nthreads())
        groups = []
        for g, (start, stop) in enumerate(partition_groups(len(part_futures), len(free) or 1)):
            held = dict.fromkeys(free, 0)
            for future in part_futures[start:stop]:
                for address in who_has.get(future.key, ()):
                    if address in held:
                        held[address] += nbytes.get(future.key, 0)
            address = max(held, key=held.__getitem__) if held else None
            if address is not None:
                free.remove(address)
            groups.append(
                client.submit(
                    tasks.group_partitions,
                    part_futures[start:stop],
                    self._bundle_future,
                    n_jobs,
                    __version__,
                    key=f"skcrf-group-{token}-{g}",
                    workers=None if address is None else [address],
                    allow_other_workers=True,
                )
            )
        _, _, distributed = _distributed()
        distributed.wait(groups)
        for future in groups:
            if future.status == "error":
                future.result()  # raises the group's error
        return groups

    def __call__(self, w):
        """Loss and gradient at ``w`` (one distributed evaluation)."""
        client = self.client
        self.n_evaluations += 1
        tag = f"{self.token}-{self.n_evaluations}"
        w = np.ascontiguousarray(w, dtype=np.float64)
        # the weights travel once to each worker, straight from the driver
        # (unless the client was told not to reach the workers); each group
        # sends back one gradient
        direct = client.direct_to_workers is not False
        weights = client.scatter(w, broadcast=True, hash=False, direct=direct)
        partial = [
            client.submit(tasks.partition_loss, group, weights, key=f"skcrf-loss-{tag}-{g}")
            for g, group in enumerate(self.groups)
        ]
        # summed here in group order: the same sums wherever the groups ran
        log_z, expected = tasks.add_losses(*client.gather(partial, direct=direct))
        del partial, weights
        with np.errstate(over="ignore", invalid="ignore"):
            gradient = np.asarray(expected, dtype=np.float64)
            gradient -= self.observed
            loss = log_z - w @ self.observed
            if self.c2:
                loss += self.c2 * (w @ w)
                gradient += 2.0 * self.c2 * w
        return float(loss), gradient

    def info(self):
        return {
            "n_partitions": self.n_partitions,
            "n_groups": len(self.groups),
            "n_workers": len(self.client.nthreads()),
            "n_evaluations": self.n_evaluations,
            "n_tokens": int(self.n_tokens),
            "setup_seconds": self.setup_seconds,
            "vectorized_bytes": self.vectorized_bytes,
            "weights_bytes": int(self.model.n_features * 8),
        }

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        """Release the partitions on the workers."""
        # Released, not cancelled: a cancel walks the dependents of the model
        # bundle, among them the vectorized partitions that no future holds
        # (the groups' lineage), which the scheduler does not allow.
        for future in self._futures:
            try:
                future.release()
            except Exception:  # noqa: BLE001 - a closed client has released them already
                pass
        self._futures = []
        self.groups = []
