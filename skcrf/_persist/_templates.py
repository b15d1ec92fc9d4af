"""A featurizer's template in the estimator's files (``save`` / ``load``, CRFsuite files).

``save`` keeps the compiled plan's plain data in the state's ``extra``
(:func:`template_extra`); ``load`` rebuilds the plan and a
:class:`~skcrf.TemplateFeaturizer` for the parameter. A CRFsuite file holds
weights only: read back through ``model_filename``, the template comes from
the ``featurizer`` parameter; written by ``to_crfsuite``, it warns.
"""

import warnings

from .._template._expand import CompiledPlan
from .._template._plan import plan_from_data, plan_to_data

__all__ = ["state_featurizer", "state_template", "template_extra", "warn_template_not_written"]


def template_extra(template):
    """The ``extra`` entries that keep ``template`` (a CompiledPlan or None) in a file."""
    return {} if template is None else {"template": plan_to_data(template.plan)}


def state_featurizer(state):
    """The ``featurizer`` parameter of a loaded state (None without a template)."""
    data = state.extra.get("template")
    if data is None:
        return None
    # an estimator (scikit-learn): imported only when an estimator is built
    from .._template._featurizer import TemplateFeaturizer

    return TemplateFeaturizer(plan_from_data(data))


def state_template(state, featurizer=None):
    """The compiled plan of a loaded state: its own, else ``featurizer``'s, else None."""
    data = state.extra.get("template")
    if data is not None:
        return CompiledPlan(plan_from_data(data))
    return None if featurizer is None else featurizer.compile()


def warn_template_not_written(template, stacklevel=3):
    """Warn that a CRFsuite file written from a template model holds no template."""
    if template is not None:
        warnings.warn(
            "The CRFsuite file holds the model's weights, not its template: "
            "CRFsuite, python-crfsuite and CRFTagger.from_crfsuite tag it with "
            "feature dicts (TemplateFeaturizer.transform gives them). Use save() "
            "to keep the template with the model.",
            UserWarning,
            stacklevel=stacklevel,
        )
