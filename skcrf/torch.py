"""A linear-chain CRF layer for PyTorch: the output layer of a neural tagger.

:class:`CRF` has pytorch-crf's interface (``torchcrf.CRF``: switching is an
import change) and skcrf's decoding: marginals, transition marginals, exact
n-best, sequence log-probabilities, allowed transitions (pairs or a tagging
scheme, as in :class:`skcrf.CRFTagger`) and partial labels.

This module needs PyTorch (``pip install "skcrf[torch]"``); ``import skcrf``
never imports it.

Conventions
-----------
Tensors are time-major, ``(seq_length, batch_size, ...)``, or batch-major
with ``batch_first=True``. ``mask`` marks the tokens of each sequence: it is
on at the first timestep of every sequence and a prefix of the timesteps
(the sequences are padded at the end). A label sequence's score is
``start_transitions[y_0] + sum_t emissions[t, y_t] + sum_t transitions[y_t,
y_t+1] + end_transitions[y_last]``.
"""

import numpy as np
import torch
from torch import nn

from ._inference._constraints import transition_constraints

__all__ = ["CRF"]

_REDUCTIONS = ("none", "sum", "mean", "token_mean")


class CRF(nn.Module):
    """Linear-chain conditional random field layer (pytorch-crf's interface).

    ``forward`` gives the log-likelihood of label sequences given emission
    scores (maximize it, or minimize its negative); ``decode`` gives the best
    label sequences (Viterbi). Beyond pytorch-crf: :meth:`marginals`,
    :meth:`transition_marginals`, :meth:`nbest`, :meth:`sequence_log_proba`,
    ``allowed_transitions`` and partial labels, with the meaning they have in
    :class:`skcrf.CRFTagger`.

    Parameters
    ----------
    num_tags : int
        Number of labels.
    batch_first : bool, default=False
        Whether tensors are ``(batch_size, seq_length, ...)`` rather than
        ``(seq_length, batch_size, ...)``.
    labels : sequence of str, optional, keyword-only
        The names of the labels, in index order (needed to give
        ``allowed_transitions`` as a scheme or as pairs of names).
    allowed_transitions : None, str or collection of pairs, keyword-only
        The decoding constraints of :class:`skcrf.CRFTagger`: a tagging scheme
        (``'BIO'`` = ``'IOB2'``, ``'IOB1'``, ``'IOBES'`` = ``'BIOUL'``,
        ``'BMES'``; the allowed pairs and the allowed first and last labels
        follow from the names in ``labels``), or the allowed ``(from, to)``
        pairs (names of ``labels``, or label indices without ``labels``).
        They apply to every decoding method (``decode``, ``nbest``,
        ``marginals``, ``transition_marginals``, ``sequence_log_proba``),
        not to ``forward``: the training objective is the unconstrained
        likelihood, as ``CRFTagger.fit``'s.

    Attributes
    ----------
    start_transitions : torch.nn.Parameter of shape (num_tags,)
        Score of each label at the first token.
    end_transitions : torch.nn.Parameter of shape (num_tags,)
        Score of each label at the last token.
    transitions : torch.nn.Parameter of shape (num_tags, num_tags)
        ``transitions[i, j]``: score of label ``j`` following label ``i``.

    Notes
    -----
    The log-partition function and its gradient are computed by a scaled
    forward-backward algorithm in float64 (matrix products, one Python step
    per timestep, every sequence of the batch at once), whatever the dtype of
    the emissions; results are returned in the emissions' dtype. When scores
    are so far apart that the scaled recursion underflows, the batch is
    recomputed in log space. Constraints are scores of ``-inf``.

    Examples
    --------
    >>> import torch
    >>> from skcrf.torch import CRF
    >>> crf = CRF(3, batch_first=True)
    >>> emissions = torch.randn(2, 4, 3)
    >>> tags = torch.tensor([[0, 1, 2, 2], [1, 1, 0, 0]])
    >>> mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    >>> loss = -crf(emissions, tags, mask=mask, reduction="mean")
    >>> loss.backward()
    >>> [len(path) for path in crf.decode(emissions, mask=mask)]
    [4, 2]
    """

    def __init__(self, num_tags, batch_first=False, *, labels=None, allowed_transitions=None):
        if isinstance(num_tags, bool) or not isinstance(num_tags, int) or num_tags <= 0:
            raise ValueError(f"invalid number of tags: {num_tags}")
        super().__init__()
        self.num_tags = num_tags
        self.batch_first = batch_first
        self.labels = None if labels is None else list(labels)
        self.allowed_transitions = allowed_transitions
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        allowed, start, end = self._allowed(labels, allowed_transitions)
        # not in state_dict: a state_dict stays pytorch-crf's (three parameters)
        self.register_buffer("allowed_pairs", allowed, persistent=False)
        self.register_buffer("allowed_start", start, persistent=False)
        self.register_buffer("allowed_end", end, persistent=False)
        self.reset_parameters()

    def _allowed(self, labels, allowed_transitions):
        num_tags = self.num_tags
        if labels is not None and len(self.labels) != num_tags:
            raise ValueError(f"labels has {len(self.labels)} names for num_tags={num_tags}.")
        if labels is not None and len(set(self.labels)) != num_tags:
            raise ValueError("labels has repeated names.")
        if isinstance(allowed_transitions, str) and labels is None:
            raise ValueError(
                f"allowed_transitions={allowed_transitions!r} is a tagging scheme: it needs "
                "the label names (labels=[...])."
            )
        classes = np.empty(num_tags, dtype=object)
        classes[:] = self.labels if labels is not None else list(range(num_tags))
        found = transition_constraints(classes, allowed_transitions)
        if found is None:
            found = (np.ones((num_tags, num_tags), bool), np.ones(num_tags, bool))
            found = (*found, found[1])
        return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in found)

    def reset_parameters(self):
        """Draw the parameters uniformly from [-0.1, 0.1] (pytorch-crf's initialization)."""
        nn.init.uniform_(self.start_transitions, -0.1, 0.1)
        nn.init.uniform_(self.end_transitions, -0.1, 0.1)
        nn.init.uniform_(self.transitions, -0.1, 0.1)

    def __repr__(self):
        return f"{self.__class__.__name__}(num_tags={self.num_tags})"

    # -- the public methods --------------------------------------------------

    def forward(self, emissions, tags=None, mask=None, reduction="sum", *, partial_labels=None):
        """Log-likelihood of label sequences given emission scores.

        Parameters
        ----------
        emissions : torch.Tensor of shape (seq_length, batch_size, num_tags)
            ``(batch_size, seq_length, num_tags)`` with ``batch_first``.
        tags : torch.LongTensor of shape (seq_length, batch_size), optional
            The labels (``(batch_size, seq_length)`` with ``batch_first``).
        mask : torch.Tensor of shape (seq_length, batch_size), optional
            bool or uint8: the tokens of each sequence (default all).
        reduction : {'sum', 'none', 'mean', 'token_mean'}, default='sum'
            Sum over the batch, none (one value per sequence), mean over the
            batch, or sum divided by the number of tokens.
        partial_labels : torch.BoolTensor, shape of ``emissions``, optional
            Instead of ``tags``: per token the labels it may have (the true
            one is among them). The likelihood is then that of every
            labelling consistent with them, ``log sum_{y consistent} p(y |
            x)`` (``CRFTagger(missing_label=...)``'s objective): a token with
            every label allowed is unknown.

        Returns
        -------
        torch.Tensor
            Shape ``(batch_size,)`` with ``reduction='none'``, else ``()``.
        """
        if reduction not in _REDUCTIONS:
            raise ValueError(f"invalid reduction: {reduction}")
        if (tags is None) == (partial_labels is None):
            raise ValueError("forward needs either tags or partial_labels (not both).")
        x, mask, lengths = self._prepare(emissions, mask, tags=tags, partial=partial_labels)
        if tags is not None:
            tags = self._time_major(tags)
            numerator = self._path_score(x, self.transitions, tags, mask)
        else:
            numerator = self._log_partition(
                self._restrict(x, self._time_major(partial_labels), mask), self.transitions, mask
            )
            self._check_possible(numerator, "partial_labels")
        llh = numerator - self._log_partition(x, self.transitions, mask)
        if reduction == "none":
            return llh
        if reduction == "sum":
            return llh.sum()
        if reduction == "mean":
            return llh.mean()
        return llh.sum() / mask.sum().to(llh.dtype)

    def decode(self, emissions, mask=None, *, partial_labels=None):
        """The best label sequence of each sequence (Viterbi).

        Parameters
        ----------
        emissions : torch.Tensor
            As in :meth:`forward`.
        mask : torch.Tensor, optional
            As in :meth:`forward`.
        partial_labels : torch.BoolTensor, shape of ``emissions``, optional
            Per token the labels allowed there: decoding is conditioned on
            them (``CRFTagger.predict(partial_labels=...)``).

        Returns
        -------
        list of list of int
            The label indices of each sequence (its own length). Ties go to
            the lower label index.
        """
        with torch.no_grad():
            x, mask, lengths, A = self._constrained(emissions, mask, partial_labels)
            best, paths = _viterbi(x, A, lengths)
        self._check_possible(torch.from_numpy(best), "the constraints")
        return paths

    def nbest(self, emissions, n=5, mask=None, *, partial_labels=None):
        """The ``n`` most probable label sequences of each sequence, exactly.

        Parameters
        ----------
        emissions, mask, partial_labels
            As in :meth:`decode`.
        n : int, default=5

        Returns
        -------
        list of list of (list of int, float)
            Per sequence, ``(labels, log_probability)`` pairs, most probable
            first (fewer than ``n`` when fewer labellings are allowed); the
            probabilities are conditioned on the constraints.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1; got {n!r}.")
        with torch.no_grad():
            x, mask, lengths, A = self._constrained(emissions, mask, partial_labels)
            log_z = self._log_partition(x, A, mask)
            self._check_possible(log_z, "the constraints")
            scores, paths = _nbest(x, A, lengths, n)
        scores = (scores - log_z[:, None].to(scores.dtype)).tolist()
        paths = paths.tolist()
        out = []
        for b, length in enumerate(lengths.tolist()):
            found = [(p[:length], s) for p, s in zip(paths[b], scores[b]) if s != -np.inf]
            out.append(found)
        return out

    def marginals(self, emissions, mask=None, *, partial_labels=None):
        """Marginal probability of every label at every token.

        Parameters
        ----------
        emissions, mask, partial_labels
            As in :meth:`decode`.

        Returns
        -------
        torch.Tensor, shape of ``emissions``
            ``p(y_t = j | x)`` (0 at padding), in the emissions' dtype; not
            differentiable.
        """
        with torch.no_grad():
            mu, _ = self._posteriors(emissions, mask, partial_labels, pairs=False)
        return self._batch_layout(mu)

    def transition_marginals(self, emissions, mask=None, *, partial_labels=None):
        """Marginal probability of every label pair at every pair of neighbours.

        Parameters
        ----------
        emissions, mask, partial_labels
            As in :meth:`decode`.

        Returns
        -------
        torch.Tensor of shape (seq_length - 1, batch_size, num_tags, num_tags)
            ``[t, b, i, j] = p(y_t = i, y_t+1 = j | x)`` (0 at padding);
            ``(batch_size, seq_length - 1, ...)`` with ``batch_first``.
        """
        with torch.no_grad():
            _, xi = self._posteriors(emissions, mask, partial_labels, pairs=True)
        return self._batch_layout(xi)

    def sequence_log_proba(self, emissions, tags=None, mask=None, *, partial_labels=None):
        """Log-probability ``log p(y | x)`` of each sequence's labels.

        Parameters
        ----------
        emissions, mask, partial_labels
            As in :meth:`decode`: probabilities are conditioned on the
            constraints; a labelling that breaks them gets ``-inf``.
        tags : torch.LongTensor, optional
            The labellings to score (as in :meth:`forward`); None: the
            Viterbi path of each sequence.

        Returns
        -------
        torch.Tensor of shape (batch_size,)
            Differentiable when ``tags`` are given.
        """
        if tags is None:
            paths = self.nbest(emissions, 1, mask, partial_labels=partial_labels)
            return emissions.new_tensor([p[0][1] for p in paths])
        x, mask, lengths, A = self._constrained(emissions, mask, partial_labels, tags=tags)
        log_z = self._log_partition(x, A, mask)
        self._check_possible(log_z, "the constraints")
        return self._path_score(x, A, self._time_major(tags), mask) - log_z

    # -- preparation and checks ------------------------------------------------

    def _time_major(self, tensor):
        return tensor.transpose(0, 1) if self.batch_first else tensor

    _batch_layout = _time_major

    def _prepare(self, emissions, mask, tags=None, partial=None):
        """Potentials ``(T, B, K)``: emissions with the start and end scores folded in."""
        self._validate(emissions, tags, mask, partial)
        emissions = self._time_major(emissions)
        seq_length, batch_size = emissions.shape[:2]
        if mask is None:
            mask = torch.ones(seq_length, batch_size, dtype=torch.bool, device=emissions.device)
        else:
            mask = self._time_major(mask).bool()
        lengths = mask.sum(0)
        last = torch.zeros_like(mask)
        last[lengths - 1, torch.arange(batch_size, device=mask.device)] = True
        x = emissions.masked_fill(~mask[..., None], 0.0)
        x = x + last[..., None] * self.end_transitions
        x = torch.cat([x[:1] + self.start_transitions, x[1:]])
        return x, mask, lengths

    def _validate(self, emissions, tags, mask, partial):
        if emissions.dim() != 3:
            raise ValueError(f"emissions must have dimension of 3, got {emissions.dim()}")
        if emissions.size(2) != self.num_tags:
            raise ValueError(
                f"expected last dimension of emissions is {self.num_tags}, got {emissions.size(2)}"
            )
        shape = tuple(emissions.shape[:2])
        if emissions.size(0) == 0 or emissions.size(1) == 0:
            raise ValueError(f"emissions has no token: its shape is {tuple(emissions.shape)}.")
        if not emissions.is_floating_point():
            raise TypeError(f"emissions must be a floating-point tensor, got {emissions.dtype}.")
        bad = torch.isnan(emissions) | torch.isposinf(emissions)
        if bad.any():
            where = tuple(torch.nonzero(bad)[0].tolist())
            raise ValueError(f"emissions has a NaN or +inf at index {where}.")
        if tags is not None:
            if shape != tuple(tags.shape):
                raise ValueError(
                    "the first two dimensions of emissions and tags must match, "
                    f"got {shape} and {tuple(tags.shape)}"
                )
            if tags.dtype not in (torch.long, torch.int, torch.short, torch.uint8, torch.int8):
                raise TypeError(f"tags must be an integer tensor, got {tags.dtype}.")
        if partial is not None:
            if tuple(partial.shape) != tuple(emissions.shape):
                raise ValueError(
                    "partial_labels must have the shape of emissions, got "
                    f"{tuple(partial.shape)} and {tuple(emissions.shape)}"
                )
            if partial.dtype != torch.bool:
                raise TypeError(f"partial_labels must be a bool tensor, got {partial.dtype}.")
        if mask is not None:
            if shape != tuple(mask.shape):
                raise ValueError(
                    "the first two dimensions of emissions and mask must match, "
                    f"got {shape} and {tuple(mask.shape)}"
                )
            on = self._time_major(mask).bool()
            if not on[0].all():
                b = int(torch.nonzero(~on[0])[0])
                raise ValueError(
                    f"mask of the first timestep must all be on (sequence {b} has no token)"
                )
            holes = on[1:] & ~on[:-1]
            if holes.any():
                t, b = torch.nonzero(holes)[0].tolist()
                raise ValueError(
                    f"mask must be on for a prefix of each sequence: sequence {b} is off at "
                    f"timestep {t} and on at timestep {t + 1}."
                )
        if tags is not None:
            tm = self._time_major(tags)
            bad = (tm < 0) | (tm >= self.num_tags)
            if mask is not None:
                bad &= self._time_major(mask).bool()
            if bad.any():
                t, b = torch.nonzero(bad)[0].tolist()
                raise ValueError(
                    f"tags of sequence {b} at timestep {t} is {int(tm[t, b])}, not a label "
                    f"index in [0, {self.num_tags})."
                )

    def _constrained(self, emissions, mask, partial, tags=None):
        """Potentials, mask, lengths and transitions with the constraints as ``-inf``."""
        x, mask, lengths = self._prepare(emissions, mask, tags=tags, partial=partial)
        inf = torch.tensor(-np.inf, dtype=x.dtype, device=x.device)
        first = torch.where(self.allowed_start, 0.0, inf)
        x = torch.cat([x[:1] + first, x[1:]])
        last_t = (lengths - 1).clamp(min=0)
        batch = torch.arange(x.size(1), device=x.device)
        end_mask = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        end_mask[last_t, batch] = ~self.allowed_end
        x = x.masked_fill(end_mask, -np.inf)
        if partial is not None:
            x = self._restrict(x, self._time_major(partial), mask)
        A = self.transitions.masked_fill(~self.allowed_pairs, -np.inf)
        return x, mask, lengths, A

    @staticmethod
    def _restrict(x, partial, mask):
        """``x`` with ``-inf`` at the labels a token's partial label excludes."""
        empty = ~partial.any(-1) & mask
        if empty.any():
            t, b = torch.nonzero(empty)[0].tolist()
            raise ValueError(
                f"partial_labels allows no label at timestep {t} of sequence {b}: a token "
                "must allow at least one label (every label: unknown)."
            )
        return x.masked_fill(~partial & mask[..., None], -np.inf)

    @staticmethod
    def _check_possible(log_z, what):
        bad = torch.isneginf(log_z)
        if bad.any():
            b = int(torch.nonzero(bad)[0])
            raise ValueError(
                f"No labelling of sequence {b} satisfies {what}: the allowed transitions "
                "and partial labels leave no allowed label sequence for it."
            )

    # -- the computations ----------------------------------------------------------

    @staticmethod
    def _path_score(x, A, tags, mask):
        """Score of the label sequences ``tags`` (``(T, B)``) under potentials ``x``."""
        tags = tags.long().masked_fill(~mask, 0)
        unary = x.gather(2, tags[..., None]).squeeze(2)
        score = torch.where(mask, unary, 0.0).sum(0)
        if tags.size(0) > 1:
            pair = A[tags[:-1], tags[1:]]
            score = score + torch.where(mask[1:], pair, 0.0).sum(0)
        return score

    @staticmethod
    def _log_partition(x, A, mask):
        """``log Z`` of each sequence, differentiable in ``x`` and ``A``."""
        log_z = _LogPartition.apply(x, A, mask)
        if not torch.isfinite(log_z).all():
            # the scaled recursion underflowed (or a sequence has no allowed
            # labelling): log space, by autograd
            log_z = _log_partition_logspace(x, A, mask)
        return log_z

    def _posteriors(self, emissions, mask, partial, pairs):
        x, mask, lengths, A = self._constrained(emissions, mask, partial)
        x64, A64 = x.double(), A.double()
        state = _scaled_forward(x64, A64, mask)
        if not torch.isfinite(state["log_z"]).all():
            self._check_possible(_log_partition_logspace(x64, A64, mask), "the constraints")
            # scores too far apart for the scaled recursion: by autograd in log space
            return _posteriors_logspace(x64, A64, mask, pairs, x.dtype)
        beta, w = _scaled_backward(state, mask)
        mu = torch.where(mask[..., None], state["alpha"] * beta, 0.0).to(x.dtype)
        xi = None
        if pairs:
            E = state["E"]
            xi = state["alpha"][:-1, :, :, None] * E * w[1:, :, None, :]
            xi = torch.where(mask[1:, :, None, None], xi, 0.0).to(x.dtype)
        return mu, xi


# -- forward-backward ----------------------------------------------------------------


def _scaled_forward(x, A, mask):
    """Scaled forward recursion in probability space (float64 inputs).

    ``alpha[t]`` sums to 1 over the labels; ``c[t]`` is the scale of step
    ``t``. Beyond a sequence's length its potentials are 0 (``_prepare``), so
    the recursion runs on (finite) padding that the results ignore.
    """
    seq_length, batch_size, _ = x.shape
    x_max = x.amax(-1, keepdim=True)
    x_max = torch.where(torch.isfinite(x_max), x_max, 0.0)
    psi = torch.exp(x - x_max)
    a_max = A.max()
    a_max = torch.where(torch.isfinite(a_max), a_max, 0.0)
    E = torch.exp(A - a_max)
    alpha = torch.empty_like(psi)
    c = torch.empty(seq_length, batch_size, 1, dtype=x.dtype, device=x.device)
    torch.sum(psi[0], -1, keepdim=True, out=c[0])
    torch.div(psi[0], c[0], out=alpha[0])
    for t in range(1, seq_length):
        a = torch.mm(alpha[t - 1], E).mul_(psi[t])
        torch.sum(a, -1, keepdim=True, out=c[t])
        torch.div(a, c[t], out=alpha[t])
    log_c = torch.where(mask, torch.log(c[..., 0]) + x_max[..., 0], 0.0)
    log_z = log_c.sum(0) + (mask.sum(0) - 1) * a_max
    # a scale near float64's smallest normal: the step lost precision (denormals);
    # NaN sends the batch to the log-space recursion
    tiny = ((c[..., 0] < 1e-280) & mask).any(0)
    log_z = torch.where(tiny, torch.nan, log_z)
    return {"alpha": alpha, "psi": psi, "c": c, "E": E, "log_z": log_z}


def _scaled_backward(state, mask):
    """Scaled backward recursion: ``beta`` (marginals = alpha * beta) and ``w``.

    ``w[t] = psi[t] * beta[t] / c[t]``, the factor of the pair marginals
    ``xi[t-1, i, j] = alpha[t-1, i] * E[i, j] * w[t, j]``.
    """
    alpha, psi, c, E = state["alpha"], state["psi"], state["c"], state["E"]
    seq_length = alpha.size(0)
    # 1 at each sequence's last token and on the padding after it
    reset = ~torch.cat([mask[1:], torch.zeros_like(mask[:1])])
    reset = reset[..., None]
    psi_c = psi / c
    beta = torch.empty_like(alpha)
    w = torch.empty_like(alpha)
    beta[-1] = 1.0
    Et = E.t()
    for t in range(seq_length - 1, 0, -1):
        torch.mul(psi_c[t], beta[t], out=w[t])
        beta[t - 1] = torch.where(reset[t - 1], 1.0, torch.mm(w[t], Et))
    w[0] = 0.0
    return beta, w


class _LogPartition(torch.autograd.Function):
    """``log Z`` by the scaled forward pass; its gradient by the backward pass."""

    @staticmethod
    def forward(ctx, x, A, mask):
        state = _scaled_forward(x.detach().double(), A.detach().double(), mask)
        ctx.save_for_backward(mask)
        ctx.state = state
        ctx.dtypes = (x.dtype, A.dtype)
        return state["log_z"].to(x.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        state = ctx.state
        beta, w = _scaled_backward(state, mask)
        g = torch.where(mask, grad.double()[None, :], 0.0)[..., None]
        grad_x = grad_A = None
        if ctx.needs_input_grad[0]:
            grad_x = (state["alpha"] * beta * g).to(ctx.dtypes[0])
        if ctx.needs_input_grad[1]:
            k = w.size(-1)
            weighted = (w[1:] * g[1:]).reshape(-1, k)
            grad_A = (torch.mm(state["alpha"][:-1].reshape(-1, k).t(), weighted) * state["E"]).to(
                ctx.dtypes[1]
            )
        return grad_x, grad_A, None


def _log_partition_logspace(x, A, mask):
    """``log Z`` by the forward recursion in log space (autograd; the fallback)."""
    alpha = x[0]
    for t in range(1, x.size(0)):
        step = torch.logsumexp(alpha[:, :, None] + A, dim=1) + x[t]
        alpha = torch.where(mask[t][:, None], step, alpha)
    return torch.logsumexp(alpha, dim=1)


def _posteriors_logspace(x, A, mask, pairs, dtype):
    """Marginals as gradients of ``log Z`` in log space (the fallback)."""
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        A_ = A.detach()
        if not pairs:
            (mu,) = torch.autograd.grad(_log_partition_logspace(x, A_, mask).sum(), x)
            return mu.to(dtype), None
        # pair marginals: one copy of A per position, whose gradients are the marginals
        steps = A_.expand(x.size(0) - 1, x.size(1), *A_.shape).clone().requires_grad_(True)
        alpha = x[0]
        for t in range(1, x.size(0)):
            step = torch.logsumexp(alpha[:, :, None] + steps[t - 1], dim=1) + x[t]
            alpha = torch.where(mask[t][:, None], step, alpha)
        mu, xi = torch.autograd.grad(torch.logsumexp(alpha, dim=1).sum(), (x, steps))
        xi = torch.where(mask[1:, :, None, None], xi, 0.0)
        return mu.to(dtype), xi.to(dtype)


# -- Viterbi and n-best ----------------------------------------------------------------


def _viterbi(x, A, lengths):
    """Best scores ``(B,)`` (numpy) and label paths (lists) of every sequence.

    The forward pass keeps only the best prefix scores (a max over the
    previous labels, in torch); the backtracking recomputes, for the chosen
    label only, which previous label gave it (in numpy, on the host: the
    paths are returned as lists). The recomputed sums are the same floating
    point additions, so the argmax finds the forward pass's maximum; ties go
    to the lower label index.
    """
    if x.dtype not in (torch.float32, torch.float64):  # half precision: numpy has no bfloat16
        x, A = x.float(), A.float()
    seq_length, batch_size, _ = x.shape
    scores = torch.empty_like(x)
    scores[0] = x[0]
    A3 = A[:, None, :]
    for t in range(1, seq_length):
        # (previous, batch, next): the max over the outer axis is elementwise (fast)
        best = torch.amax(scores[t - 1].t()[:, :, None] + A3, dim=0)
        torch.add(best, x[t], out=scores[t])
    scores = scores.cpu().numpy()
    A = A.detach().cpu().numpy()
    lengths = lengths.cpu().numpy()
    batch = np.arange(batch_size)
    ends = scores[lengths - 1, batch]
    label = ends.argmax(-1)
    best = ends[batch, label]
    path = np.zeros((batch_size, seq_length), dtype=np.int64)
    for t in range(seq_length - 1, -1, -1):
        at_end = lengths - 1 == t
        if at_end.any():
            label = np.where(at_end, ends.argmax(-1), label)
        path[:, t] = label
        if t > 0:
            label = (scores[t - 1] + A[:, label].T).argmax(-1)
    return best, [row[:n] for row, n in zip(path.tolist(), lengths.tolist())]


def _nbest(x, A, lengths, n):
    """Scores ``(B, n)`` and label paths ``(B, n, T)`` of the ``n`` best labellings.

    Exact list Viterbi, every sequence at once: per token and label the ``n``
    best prefixes ending there. Missing paths score ``-inf``.
    """
    seq_length, batch_size, k = x.shape
    device = x.device
    # score[b, j, r]: the r-th best prefix ending in label j
    score = torch.full((batch_size, k, n), -np.inf, dtype=x.dtype, device=device)
    score[:, :, 0] = x[0]
    finals = torch.empty(seq_length, batch_size, k, n, dtype=x.dtype, device=device)
    finals[0] = score
    back = torch.empty(max(seq_length - 1, 0), batch_size, k, n, dtype=torch.long, device=device)
    A_ = A[None, :, None, :]
    for t in range(1, seq_length):
        candidates = (score[:, :, :, None] + A_).reshape(batch_size, k * n, k)
        if n == 1:
            best, where = candidates.max(1, keepdim=True)
        else:  # stable: among equal scores, the lower previous label first
            best, where = candidates.sort(dim=1, descending=True, stable=True)
            best, where = best[:, :n], where[:, :n]
        score = best.transpose(1, 2) + x[t][:, :, None]
        finals[t] = score
        back[t - 1] = where.transpose(1, 2)
    batch = torch.arange(batch_size, device=device)
    last = finals[lengths - 1, batch].reshape(batch_size, k * n)
    if n == 1:
        top, flat = last.max(1, keepdim=True)
    else:  # ties: the lower last label first
        top, flat = last.sort(dim=1, descending=True, stable=True)
        top, flat = top[:, :n], flat[:, :n]
    m = top.size(1)
    labels = torch.zeros(batch_size, m, seq_length, dtype=torch.long, device=device)
    label, rank = flat // n, flat % n
    for t in range(seq_length - 1, -1, -1):
        at_end = (lengths - 1 == t)[:, None]
        end_label, end_rank = flat // n, flat % n
        label = torch.where(at_end, end_label, label)
        rank = torch.where(at_end, end_rank, rank)
        labels[:, :, t] = label
        if t > 0:
            pointer = back[t - 1][batch[:, None], label, rank]
            label, rank = pointer // n, pointer % n
    return top, labels
