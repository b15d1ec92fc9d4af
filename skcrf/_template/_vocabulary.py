"""A model's vocabulary that encodes raw tokens through its compiled template.

:class:`TemplateVocabulary` is a :class:`~skcrf._featurize._vocabulary.Vocabulary`
(the attribute names, what the fit driver, the monitor and the predictor use)
whose ``encode`` takes raw token sequences and runs the compiled expander
(:func:`skcrf._template._expand.expand`) over its :class:`ByteIndex` of the
same names: the fit, ``X_dev``, early stopping and every decoding method go
through the one encoding entry point (``_featurize._stream.encode_data``)
as with feature dicts, with no Python object per feature.
"""

import numpy as np

from .._featurize._encoded import concatenate
from .._featurize._validation import check_nonempty
from .._featurize._vocabulary import Vocabulary
from .._utils._byte_index import ByteIndex
from .._utils._threads import thread_map
from ._expand import expand

__all__ = ["TemplateVocabulary"]


class TemplateVocabulary(Vocabulary):
    """The attribute names of a model featurized by a template.

    Parameters
    ----------
    compiled : CompiledPlan
    attributes, transition_attributes : list of str
        The names known so far (a warm start's, a fitted model's), in id
        order; ``attributes`` may be a model file's lazy names
        (:class:`~skcrf._utils._cqdb_index.LazyNames` over a packed table).
    """

    reads_raw_tokens = True

    def __init__(self, compiled, attributes=(), transition_attributes=()):
        packed = getattr(getattr(attributes, "string_index", None), "packed", None)
        if packed is None:
            attributes = list(attributes)
            self.index = ByteIndex(attributes)
        else:  # a model file's packed names: no str per name (listed when needed)
            self.index = ByteIndex()
            self.index.add_packed(*packed)
        super().__init__(attributes, compiled.plan.separator)
        self.compiled = compiled
        self.transition_index = ByteIndex(transition_attributes)
        # the ids of the constant names (bias, BOS...): set when the index
        # changes (here and by a growing encode), only read by predictions
        self.constant_ids = compiled.constant_ids(self.index)

    def __reduce__(self):
        return (
            TemplateVocabulary,
            (self.compiled, self.attributes, self.transition_index.names()),
        )

    def encode(self, sequences, *, grow, name="X", dense=False, transitions=None, n_threads=1):
        """Encode raw token sequences (see the module's notes).

        ``transitions`` (a :class:`TransitionParts`) receives the
        transition rows already encoded, and, when growing, the names of
        the transition index. ``n_threads`` threads featurize a prediction's
        sequences (contiguous shards; the index is only read).
        """
        sequences = sequences if type(sequences) is list else list(sequences)
        wanted = transitions is not None and self.compiled.has_transitions
        if not grow:
            # the index is only read: nothing to undo when this fails
            encoded = _expand_in_threads(
                self.compiled,
                sequences,
                self.index,
                self.transition_index if wanted else None,
                name=name,
                n_threads=n_threads,
                constant_ids=self.constant_ids,
            )
        else:
            check_nonempty(sequences, sum(map(len, sequences)), name)
            encoded = self._grow(sequences, transitions if wanted else None, name)
        if encoded.transitions is None:
            return encoded
        transitions.found = True
        transitions.encoded = encoded.transitions
        return encoded._replace(transitions=None)

    def _grow(self, sequences, transitions, name):
        """A fit's encoding, undone when it fails.

        New names are numbered in both indexes, then join the dict
        vocabulary in id order.
        """
        before = len(self.index)
        before_transitions = len(self.transition_index)
        try:
            encoded = expand(
                self.compiled,
                sequences,
                self.index,
                None if transitions is None else self.transition_index,
                grow=True,
                name=name,
            )
        except BaseException:
            self.index.truncate(before)
            self.transition_index.truncate(before_transitions)
            raise
        if len(self.index) > before:
            new = self.index.names(before)
            Vocabulary.encode(self, [[dict.fromkeys(new, 1.0)]], grow=True)
            if len(self) != len(self.index):
                raise RuntimeError("template vocabulary out of step with its index")
            self.constant_ids = self.compiled.constant_ids(self.index)
        if transitions is not None:
            transitions.names = self.transition_index.names(0)
            transitions.first_new = before_transitions
        return encoded


#: Fewer tokens than this per thread are featurized by one thread.
_TOKENS_PER_THREAD = 2048
#: Shards per featurizing thread.
_SHARDS_PER_THREAD = 4


def _expand_in_threads(compiled, sequences, index, transitions, *, name, n_threads, constant_ids):
    """A prediction's :func:`expand`: contiguous shards in threads, rows joined."""
    if n_threads <= 1 or len(sequences) < 2:
        return expand(
            compiled,
            sequences,
            index,
            transitions,
            name=name,
            constant_ids=constant_ids,
        )

    def run(start, stop):
        return expand(
            compiled,
            sequences[start:stop],
            index,
            transitions,
            name=name,
            first_sequence=start,
            constant_ids=constant_ids,
        )

    lengths = np.fromiter(map(len, sequences), dtype=np.intp, count=len(sequences))
    n_tokens = int(lengths.sum())
    n_threads = max(1, min(n_threads, n_tokens // _TOKENS_PER_THREAD))
    if n_threads == 1:
        return run(0, len(sequences))
    # Several shards a thread: a thread reads its next shard's tokens (with
    # the GIL) while the others expand theirs (without). Shard k ends where
    # the running token count passes k / n of the total.
    n_shards = n_threads * _SHARDS_PER_THREAD
    ends = np.searchsorted(np.cumsum(lengths), np.arange(1, n_shards) * n_tokens / n_shards)
    bounds = [0, *sorted(set(int(e) + 1 for e in ends)), len(sequences)]
    bounds = sorted(set(min(b, len(sequences)) for b in bounds))
    parts = thread_map(run, n_threads, bounds[:-1], bounds[1:])
    return concatenate(parts)
