"""A model's vocabulary that encodes raw tokens through its compiled template.

:class:`TemplateVocabulary` is a :class:`~skcrf._featurize._vocabulary.Vocabulary`
(the attribute names, what the fit driver, the monitor and the predictor use)
whose ``encode`` takes raw token sequences and runs the compiled expander
(:func:`skcrf._template._expand.expand`) over its :class:`ByteIndex` of the
same names: the fit, ``X_dev``, early stopping and every decoding method go
through the one encoding entry point (``_featurize._stream.encode_data``)
as with feature dicts, with no Python object per feature.
"""

from .._featurize._validation import check_nonempty
from .._featurize._vocabulary import Vocabulary
from .._utils._byte_index import ByteIndex
from ._expand import expand

__all__ = ["TemplateVocabulary"]


class TemplateVocabulary(Vocabulary):
    """The attribute names of a model featurized by a template.

    Parameters
    ----------
    compiled : CompiledPlan
    attributes, transition_attributes : list of str
        The names known so far (a warm start's, a fitted model's), in id
        order.
    """

    reads_raw_tokens = True

    def __init__(self, compiled, attributes=(), transition_attributes=()):
        attributes = list(attributes)
        super().__init__(attributes, compiled.plan.separator)
        self.compiled = compiled
        self.index = ByteIndex(attributes)
        self.transition_index = ByteIndex(transition_attributes)

    def __reduce__(self):
        return (
            TemplateVocabulary,
            (self.compiled, self.attributes, self.transition_index.names()),
        )

    def encode(self, sequences, *, grow, name="X", dense=False, transitions=None):
        """Encode raw token sequences (see the module's notes).

        ``transitions`` (a :class:`TransitionParts`) receives the
        transition rows already encoded, and, when growing, the names of
        the transition index.
        """
        sequences = [seq if type(seq) is list else list(seq) for seq in sequences]
        wanted = transitions is not None and self.compiled.has_transitions
        if grow:
            check_nonempty(sequences, sum(map(len, sequences)), name)
        before = len(self.index)
        before_transitions = len(self.transition_index)
        try:
            encoded = expand(
                self.compiled,
                sequences,
                self.index,
                self.transition_index if wanted else None,
                grow=grow,
                name=name,
            )
        except BaseException as exc:
            # a failed fit leaves the vocabulary as it was
            self.index.truncate(before)
            self.transition_index.truncate(before_transitions)
            if isinstance(exc, TypeError) and "got dict" in str(exc):
                raise TypeError(
                    f"{exc}. This tagger featurizes raw tokens with its template "
                    "(featurizer=...): give it the tokens, not feature dicts."
                ) from None
            raise
        if grow and len(self.index) > before:
            # the names join the dict vocabulary once each, in id order
            new = self.index.names(before)
            Vocabulary.encode(self, [[dict.fromkeys(new, 1.0)]], grow=True)
            if len(self) != len(self.index):
                raise RuntimeError("template vocabulary out of step with its index")
        if wanted:
            transitions.found = True
            transitions.encoded = encoded.transitions
            if grow:
                transitions.names = self.transition_index.names(0)
                transitions.first_new = before_transitions
        return encoded._replace(transitions=None)
