"""skcrf.torch.CRF: the PyTorch layer against brute-force enumeration and CRFTagger.

Every quantity (log-likelihood, log Z, marginals, pair marginals, n-best,
sequence log-probabilities, partial labels, constraints) is checked against
an enumeration of every labelling of tiny sequences; the gradients against
finite differences (``torch.autograd.gradcheck``, float64); decoding and
probabilities against ``CRFTagger``'s kernels given the same scores.
pytorch-crf's own suite is run separately (CONTRIBUTING.md, "Peer suites").
"""

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="skcrf.torch needs PyTorch (the torch extra)")

from skcrf import CRFTagger  # noqa: E402
from skcrf.torch import CRF  # noqa: E402

K = 3


def make(num_tags=K, batch_first=False, seed=0, dtype=torch.float64, **kwargs):
    torch.manual_seed(seed)
    crf = CRF(num_tags, batch_first=batch_first, **kwargs).to(dtype)
    with torch.no_grad():  # larger than the default init: the paths differ more
        crf.start_transitions.normal_()
        crf.end_transitions.normal_()
        crf.transitions.normal_()
    return crf


def batch(seq_length=4, batch_size=3, num_tags=K, lengths=(4, 2, 1), seed=1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    emissions = torch.randn(seq_length, batch_size, num_tags, generator=g, dtype=dtype)
    tags = torch.randint(num_tags, (seq_length, batch_size), generator=g)
    mask = torch.arange(seq_length)[:, None] < torch.tensor(lengths)[None, :]
    return emissions, tags, mask


# -- brute force ---------------------------------------------------------------------


def path_score(crf, em, path, allowed=None):
    """Score of one labelling of one sequence (em: (L, K)); -inf if it breaks constraints."""
    s = crf.start_transitions[path[0]] + crf.end_transitions[path[-1]]
    s = s + sum(em[t, y] for t, y in enumerate(path))
    s = s + sum(crf.transitions[a, b] for a, b in zip(path, path[1:]))
    if allowed is not None and not allowed(path):
        return -math.inf
    return float(s.detach())


def enumerate_paths(crf, em, allowed=None):
    """{path: score} of every labelling of em (L, K)."""
    return {
        p: path_score(crf, em, p, allowed)
        for p in itertools.product(range(crf.num_tags), repeat=em.shape[0])
    }


def logsumexp(values):
    values = [v for v in values if v != -math.inf]
    if not values:
        return -math.inf
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def sequences(emissions, mask):
    for b in range(emissions.shape[1]):
        yield b, emissions[: int(mask[:, b].sum()), b].detach()


# -- pytorch-crf's interface ---------------------------------------------------------


def test_import_skcrf_does_not_import_torch():
    code = "import sys, skcrf; assert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_module_is_not_shadowing_torch():
    import skcrf.torch as layer

    assert layer.torch is torch and layer.torch.__name__ == "torch"
    assert layer.nn is torch.nn


@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "token_mean"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_log_likelihood_brute_force(reduction, batch_first):
    crf = make(batch_first=batch_first)
    emissions, tags, mask = batch()
    expected = []
    for b, em in sequences(emissions, mask):
        logz = logsumexp(enumerate_paths(crf, em).values())
        expected.append(path_score(crf, em, tags[: em.shape[0], b].tolist()) - logz)
    expected = torch.tensor(expected, dtype=torch.float64)
    want = {
        "none": expected,
        "sum": expected.sum(),
        "mean": expected.mean(),
        "token_mean": expected.sum() / mask.sum(),
    }[reduction]
    args = (emissions, tags, mask)
    if batch_first:
        args = tuple(a.transpose(0, 1) for a in args)
    got = crf(*args, reduction=reduction)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_no_mask_is_all_tokens_and_uint8_mask_works():
    crf = make()
    emissions, tags, _ = batch(lengths=(4, 4, 4))
    full = torch.ones(4, 3, dtype=torch.uint8)
    torch.testing.assert_close(crf(emissions, tags), crf(emissions, tags, full))
    assert crf.decode(emissions) == crf.decode(emissions, full)


def test_gradcheck_float64():
    crf = make()
    emissions, tags, mask = batch()
    emissions.requires_grad_(True)

    def llh(em, start, end, trans):
        with torch.no_grad():
            crf.start_transitions.copy_(start)
            crf.end_transitions.copy_(end)
            crf.transitions.copy_(trans)
        return crf(em, tags, mask, reduction="none")

    # the parameters enter as module parameters: check them through a functional copy
    from torch.func import functional_call

    def f(em, start, end, trans):
        params = {"start_transitions": start, "end_transitions": end, "transitions": trans}
        return functional_call(crf, params, (em, tags, mask), {"reduction": "none"})

    inputs = tuple(
        t.detach().clone().requires_grad_(True)
        for t in (emissions, crf.start_transitions, crf.end_transitions, crf.transitions)
    )
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7)
    # with partial labels (both log Z terms)
    partial = torch.rand(4, 3, K, generator=torch.Generator().manual_seed(5)) < 0.6
    partial[..., 0] = True

    def g(em, start, end, trans):
        params = {"start_transitions": start, "end_transitions": end, "transitions": trans}
        return functional_call(
            crf, params, (em, None, mask), {"reduction": "none", "partial_labels": partial}
        )

    assert torch.autograd.gradcheck(g, inputs, eps=1e-6, atol=1e-7)


def test_gradient_is_the_marginals():
    """d log Z / d emissions are the marginals; d log Z / d transitions the pair marginals."""
    crf = make()
    emissions, _, mask = batch()
    em = emissions.clone().requires_grad_(True)
    x, m, lengths = crf._prepare(em, mask)
    log_z = crf._log_partition(x, crf.transitions, m)
    grad_em, grad_t = torch.autograd.grad(log_z.sum(), (em, crf.transitions))
    torch.testing.assert_close(grad_em, crf.marginals(emissions, mask))
    torch.testing.assert_close(grad_t, crf.transition_marginals(emissions, mask).sum((0, 1)))


@pytest.mark.parametrize("batch_first", [False, True])
def test_marginals_and_pairs_brute_force(batch_first):
    crf = make(batch_first=batch_first)
    emissions, _, mask = batch()
    args = (emissions, mask) if not batch_first else (emissions.transpose(0, 1), mask.t())
    mu = crf.marginals(*args)
    xi = crf.transition_marginals(*args)
    if batch_first:
        mu, xi = mu.transpose(0, 1), xi.transpose(0, 1)
    assert mu.shape == (4, 3, K) and xi.shape == (3, 3, K, K)
    for b, em in sequences(emissions, mask):
        scores = enumerate_paths(crf, em)
        logz = logsumexp(scores.values())
        length = em.shape[0]
        want = np.zeros((length, K))
        pairs = np.zeros((max(length - 1, 0), K, K))
        for p, s in scores.items():
            prob = math.exp(s - logz)
            for t, y in enumerate(p):
                want[t, y] += prob
            for t in range(length - 1):
                pairs[t, p[t], p[t + 1]] += prob
        np.testing.assert_allclose(mu[:length, b].numpy(), want, atol=1e-12)
        np.testing.assert_allclose(xi[: length - 1, b].numpy(), pairs, atol=1e-12)
        assert (mu[length:, b] == 0).all() and (xi[max(length - 1, 0) :, b] == 0).all()


def test_decode_nbest_and_sequence_log_proba_brute_force():
    crf = make()
    emissions, _, mask = batch()
    nbest = crf.nbest(emissions, 7, mask)
    best = crf.decode(emissions, mask)
    viterbi_lp = crf.sequence_log_proba(emissions, mask=mask)
    for b, em in sequences(emissions, mask):
        scores = enumerate_paths(crf, em)
        logz = logsumexp(scores.values())
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        want = [(list(p), s - logz) for p, s in ranked[:7]]
        assert len(nbest[b]) == min(7, K ** em.shape[0])
        assert [p for p, _ in nbest[b]] == [p for p, _ in want]
        np.testing.assert_allclose([s for _, s in nbest[b]], [s for _, s in want], atol=1e-10)
        assert best[b] == want[0][0]
        assert viterbi_lp[b].item() == pytest.approx(want[0][1], abs=1e-10)
    # given tags: differentiable, equals forward(reduction='none') without constraints
    tags = torch.randint(K, (4, 3), generator=torch.Generator().manual_seed(3))
    lp = crf.sequence_log_proba(emissions, tags, mask)
    torch.testing.assert_close(lp, crf(emissions, tags, mask, reduction="none"))
    assert lp.requires_grad


def test_partial_labels_brute_force():
    crf = make()
    emissions, _, mask = batch()
    partial = torch.ones(4, 3, K, dtype=torch.bool)
    partial[1, 0] = torch.tensor([False, True, True])  # token 1 of sequence 0: label 1 or 2
    partial[0, 1] = torch.tensor([True, False, False])  # token 0 of sequence 1: label 0
    partial[0, 2] = torch.tensor([False, False, True])

    def consistent(b):
        return lambda p: all(partial[t, b, y] for t, y in enumerate(p))

    llh = crf(emissions, mask=mask, partial_labels=partial, reduction="none")
    mu = crf.marginals(emissions, mask, partial_labels=partial)
    xi = crf.transition_marginals(emissions, mask, partial_labels=partial)
    nbest = crf.nbest(emissions, 30, mask, partial_labels=partial)
    best = crf.decode(emissions, mask, partial_labels=partial)
    for b, em in sequences(emissions, mask):
        free = enumerate_paths(crf, em)
        kept = enumerate_paths(crf, em, consistent(b))
        assert llh[b].item() == pytest.approx(
            logsumexp(kept.values()) - logsumexp(free.values()), abs=1e-10
        )
        logz = logsumexp(kept.values())
        allowed = sorted(((p, s) for p, s in kept.items() if s > -math.inf), key=lambda kv: -kv[1])
        assert [tuple(p) for p, _ in nbest[b]] == [p for p, _ in allowed[:30]]
        np.testing.assert_allclose([s for _, s in nbest[b]], [s - logz for _, s in allowed[:30]])
        assert tuple(best[b]) == allowed[0][0]
        want = np.zeros((em.shape[0], K))
        for p, s in allowed:
            for t, y in enumerate(p):
                want[t, y] += math.exp(s - logz)
        np.testing.assert_allclose(mu[: em.shape[0], b].numpy(), want, atol=1e-12)
        np.testing.assert_allclose(xi[: em.shape[0] - 1, b].sum(-1).numpy(), want[:-1], atol=1e-12)
    # a labelling that breaks them: -inf
    tags = torch.zeros(4, 3, dtype=torch.long)
    lp = crf.sequence_log_proba(emissions, tags, mask, partial_labels=partial)
    assert lp[2].item() == -math.inf and lp[1].item() > -math.inf


def test_allowed_transitions_scheme_brute_force():
    labels = ["O", "B-X", "I-X", "B-Y", "I-Y"]
    crf = make(5, labels=labels, allowed_transitions="BIO")
    emissions, _, mask = batch(num_tags=5, lengths=(4, 3, 1))

    def bio(p):
        names = [labels[y] for y in p]
        if names[0].startswith("I-"):
            return False
        return all(
            not b.startswith("I-") or a in ("B-" + b[2:], b) for a, b in zip(names, names[1:])
        )

    nbest = crf.nbest(emissions, 4, mask)
    mu = crf.marginals(emissions, mask)
    slp = crf.sequence_log_proba(emissions, mask=mask)
    for b, em in sequences(emissions, mask):
        kept = enumerate_paths(crf, em, bio)
        logz = logsumexp(kept.values())
        ranked = sorted(((p, s) for p, s in kept.items() if s > -math.inf), key=lambda kv: -kv[1])
        assert [tuple(p) for p, _ in nbest[b]] == [p for p, _ in ranked[:4]]
        assert slp[b].item() == pytest.approx(ranked[0][1] - logz, abs=1e-10)
        want = np.zeros((em.shape[0], 5))
        for p, s in ranked:
            for t, y in enumerate(p):
                want[t, y] += math.exp(s - logz)
        np.testing.assert_allclose(mu[: em.shape[0], b].numpy(), want, atol=1e-12)
    # the training objective is unconstrained (as CRFTagger.fit)
    free = make(5)
    tags = torch.full((4, 3), 2)  # I-X everywhere: breaks BIO
    torch.testing.assert_close(crf(emissions, tags, mask), free(emissions, tags, mask))
    assert (crf.sequence_log_proba(emissions, tags, mask) == -math.inf).all()


def test_allowed_transitions_pairs_names_and_indices():
    pairs = [(0, 1), (1, 2), (2, 0), (0, 0)]
    by_index = make(allowed_transitions=pairs)
    by_name = make(
        labels=["a", "b", "c"],
        allowed_transitions=[("a", "b"), ("b", "c"), ("c", "a"), ("a", "a")],
    )
    emissions, _, mask = batch()
    ok = set(pairs)
    paths = by_index.nbest(emissions, 50, mask)
    assert paths == by_name.nbest(emissions, 50, mask)
    for b, em in sequences(emissions, mask):
        kept = {
            p
            for p, s in enumerate_paths(by_index, em).items()
            if all((x, y) in ok for x, y in zip(p, p[1:]))
        }
        assert {tuple(p) for p, _ in paths[b]} == kept


def test_constraint_errors():
    with pytest.raises(ValueError, match="needs the label names"):
        CRF(3, allowed_transitions="BIO")
    with pytest.raises(ValueError, match="not one of the model's labels"):
        CRF(2, labels=["a", "b"], allowed_transitions=[("a", "z")])
    with pytest.raises(ValueError, match="does not follow the scheme"):
        CRF(2, labels=["a", "b"], allowed_transitions="BIO")
    with pytest.raises(ValueError, match="2 names for num_tags=3"):
        CRF(3, labels=["a", "b"])
    crf = make(allowed_transitions=[(0, 1)])
    emissions, _, mask = batch()
    with pytest.raises(ValueError, match="No labelling of sequence 0"):
        crf.decode(emissions, mask)
    with pytest.raises(ValueError, match="No labelling of sequence 0"):
        crf.marginals(emissions, mask)
    partial = torch.ones(4, 3, K, dtype=torch.bool)
    partial[2, 0] = False
    with pytest.raises(ValueError, match="timestep 2 of sequence 0"):
        make()(emissions, mask=mask, partial_labels=partial)


def test_input_errors_name_the_place():
    crf = make()
    emissions, tags, mask = batch()
    with pytest.raises(ValueError, match="forward needs either tags or partial_labels"):
        crf(emissions)
    bad = tags.clone()
    bad[1, 2] = K
    with pytest.raises(ValueError, match="sequence 2 at timestep 1"):
        crf(emissions, bad)
    holes = mask.clone()
    holes[2, 0] = False
    with pytest.raises(ValueError, match="sequence 0 is off at timestep 2"):
        crf.decode(emissions, holes)
    nan = emissions.clone()
    nan[3, 1, 2] = math.nan
    with pytest.raises(ValueError, match=r"NaN or \+inf at index \(3, 1, 2\)"):
        crf.decode(nan)
    with pytest.raises(ValueError, match="n must be an integer"):
        crf.nbest(emissions, 0)
    # padding may hold anything finite or -inf: ignored
    padded = emissions.clone()
    padded[3, 1] = -math.inf
    torch.testing.assert_close(crf(padded, tags, mask), crf(emissions, tags, mask))


def test_float32_matches_float64():
    crf64 = make()
    crf32 = make(dtype=torch.float32)
    emissions, tags, mask = batch(seq_length=20, batch_size=5, lengths=(20, 7, 1, 13, 20))
    llh32 = crf32(emissions.float(), tags, mask, reduction="none")
    assert llh32.dtype == torch.float32
    torch.testing.assert_close(
        llh32.double(), crf64(emissions, tags, mask, reduction="none"), rtol=1e-5, atol=1e-5
    )
    llh32.sum().backward()
    assert crf32.transitions.grad.dtype == torch.float32
    assert crf32.decode(emissions.float(), mask) == crf64.decode(emissions, mask)
    mu32 = crf32.marginals(emissions.float(), mask)
    assert mu32.dtype == torch.float32
    torch.testing.assert_close(mu32.double(), crf64.marginals(emissions, mask), atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_emissions(dtype):
    crf = make()
    emissions, tags, mask = batch()
    low = emissions.to(dtype)
    assert crf.decode(low, mask) == crf.decode(low.double(), mask)
    llh = crf(low, tags, mask, reduction="none")
    assert torch.isfinite(llh).all()


def test_log_space_fallback_on_far_apart_scores():
    """Scores 2000 apart underflow the scaled recursion: log space gives the answer."""
    crf = make(2)
    with torch.no_grad():
        crf.transitions.copy_(torch.tensor([[0.0, -2000.0], [-2000.0, 0.0]]))
    emissions = torch.tensor([[[0.0, -5.0]], [[-5.0, 0.0]]], dtype=torch.float64)
    partial = torch.tensor([[[True, False]], [[False, True]]])
    # the only consistent labelling (0, 1) scores -2000 below the best
    llh = crf(emissions, mask=None, partial_labels=partial, reduction="none")
    expected = path_score(crf, emissions[:, 0], (0, 1)) - logsumexp(
        enumerate_paths(crf, emissions[:, 0]).values()
    )
    assert llh.item() == pytest.approx(expected, rel=1e-12)
    llh.sum().backward()
    assert torch.isfinite(crf.transitions.grad).all()
    mu = crf.marginals(emissions, partial_labels=partial)
    torch.testing.assert_close(mu[:, 0], partial[:, 0].double())


def test_long_sequences_are_stable():
    crf = make(5)
    emissions, tags, mask = batch(seq_length=300, batch_size=2, num_tags=5, lengths=(300, 120))
    emissions = emissions * 10
    llh = crf(emissions, tags, mask, reduction="none")
    assert torch.isfinite(llh).all() and (llh <= 0).all()
    logz_log = crf._prepare(emissions, mask)
    x, m, _ = logz_log
    from skcrf.torch import _log_partition_logspace

    torch.testing.assert_close(
        crf._log_partition(x, crf.transitions, m), _log_partition_logspace(x, crf.transitions, m)
    )
    mu = crf.marginals(emissions, mask)
    torch.testing.assert_close(mu.sum(-1), mask.double())


def test_state_dict_is_pytorch_crf_s():
    crf = make(labels=["a", "b", "c"], allowed_transitions=[("a", "b")])
    assert set(crf.state_dict()) == {"start_transitions", "end_transitions", "transitions"}
    other = CRF(3)
    other.load_state_dict(crf.state_dict())
    assert repr(other) == "CRF(num_tags=3)"


# -- CRFTagger, given the same scores ------------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    words = ["the", "a", "dog", "cat", "runs", "sleeps", "fast", "now"]
    tags_of = {"the": "D", "a": "D", "dog": "N", "cat": "N", "runs": "V", "sleeps": "V"}
    X, y = [], []
    for _ in range(60):
        n = int(rng.integers(2, 7))
        ws = [words[int(i)] for i in rng.integers(0, len(words), n)]
        X.append([{"w": w} for w in ws])
        y.append([tags_of.get(w, "A") for w in ws])
    tagger = CRFTagger(c2=0.5, max_iterations=30).fit(X, y)
    test = [
        [{"w": w} for w in s.split()]
        for s in ("the dog runs fast", "a cat", "now", "dog the sleeps now cat")
    ]
    return tagger, test


def tagger_emissions(tagger, X):
    """Emission (state) scores (T, B, K) and mask of X from the tagger's weights, float64."""
    classes = list(tagger.classes_)
    state = tagger.state_features_
    T = max(len(x) for x in X)
    em = torch.zeros(T, len(X), len(classes), dtype=torch.float64)
    for b, x in enumerate(X):
        for t, token in enumerate(x):
            for key, value in token.items():
                for k, label in enumerate(classes):
                    em[t, b, k] += state.get((f"{key}:{value}", label), 0.0)
    mask = torch.arange(T)[:, None] < torch.tensor([len(x) for x in X])[None, :]
    return em, mask


def crf_like(tagger, **kwargs):
    classes = list(tagger.classes_)
    crf = CRF(len(classes), labels=classes, **kwargs).double()
    with torch.no_grad():
        crf.start_transitions.zero_()  # CRFsuite's linear CRF has none
        crf.end_transitions.zero_()
        crf.transitions.zero_()  # CRFsuite's missing transition features weigh 0
        for (a, b), w in tagger.transition_features_.items():
            crf.transitions[classes.index(a), classes.index(b)] = w
    return crf


@pytest.mark.parametrize("constraint", [None, "pairs"])
def test_same_answers_as_crftagger(fitted, constraint):
    tagger, X = fitted
    classes = list(tagger.classes_)
    allowed = None
    if constraint == "pairs":
        allowed = [(a, b) for a in classes for b in classes if not (a == "D" and b == "V")]
    crf = crf_like(tagger, allowed_transitions=allowed)
    em, mask = tagger_emissions(tagger, X)
    names = lambda path: [classes[i] for i in path]  # noqa: E731
    assert [names(p) for p in crf.decode(em, mask)] == tagger.predict(
        X, allowed_transitions=allowed
    )
    mu = crf.marginals(em, mask)
    xi = crf.transition_marginals(em, mask)
    want_mu = tagger.predict_marginals(X, allowed_transitions=allowed)
    want_xi = tagger.predict_transition_marginals(X, allowed_transitions=allowed)
    for b, x in enumerate(X):
        got = [{c: mu[t, b, k].item() for k, c in enumerate(classes)} for t in range(len(x))]
        for g, w in zip(got, want_mu[b]):
            assert g == pytest.approx(w, abs=1e-6)
        np.testing.assert_allclose(xi[: len(x) - 1, b].numpy(), want_xi[b], atol=1e-6)
    nbest = crf.nbest(em, 3, mask)
    want = tagger.predict_nbest(X, 3, allowed_transitions=allowed)
    for got_b, want_b in zip(nbest, want):
        assert [names(p) for p, _ in got_b] == [p for p, _ in want_b]
        np.testing.assert_allclose([s for _, s in got_b], [s for _, s in want_b], atol=1e-6)
    np.testing.assert_allclose(
        crf.sequence_log_proba(em, mask=mask).numpy(),
        tagger.sequence_log_proba(X, allowed_transitions=allowed),
        atol=1e-6,
    )
    y = tagger.predict(X)
    tags = torch.zeros(mask.shape, dtype=torch.long)
    for b, labels in enumerate(y):
        tags[: len(labels), b] = torch.tensor([classes.index(c) for c in labels])
    np.testing.assert_allclose(
        crf.sequence_log_proba(em, tags, mask).detach().numpy(),
        tagger.sequence_log_proba(X, y, allowed_transitions=allowed),
        atol=1e-6,
    )


def test_same_partial_labels_as_crftagger(fitted):
    tagger, X = fitted
    classes = list(tagger.classes_)
    crf = crf_like(tagger)
    em, mask = tagger_emissions(tagger, X)
    partial_lists = [
        [None, {"V", "A"}, None, None],
        [None, "V"],
        None,
        ["N", None, None, None, None],
    ]
    partial = torch.ones(em.shape, dtype=torch.bool)
    for b, labels in enumerate(partial_lists):
        for t, label in enumerate(labels or []):
            if label is not None:
                keep = {label} if isinstance(label, str) else label
                partial[t, b] = torch.tensor([c in keep for c in classes])
    got = [[classes[i] for i in p] for p in crf.decode(em, mask, partial_labels=partial)]
    assert got == tagger.predict(X, partial_labels=partial_lists)
    np.testing.assert_allclose(
        crf.sequence_log_proba(em, mask=mask, partial_labels=partial).numpy(),
        tagger.sequence_log_proba(X, partial_labels=partial_lists),
        atol=1e-6,
    )
    mu = crf.marginals(em, mask, partial_labels=partial)
    for b, want in enumerate(tagger.predict_marginals(X, partial_labels=partial_lists)):
        for t, w in enumerate(want):
            assert {c: mu[t, b, k].item() for k, c in enumerate(classes)} == pytest.approx(
                w, abs=1e-6
            )


def test_scheme_same_as_crftagger():
    X = [
        [{"w": w} for w in s.split()]
        for s in ("john smith lives in paris", "paris is big", "mary smith")
    ]
    y = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["B-LOC", "O", "O"], ["B-PER", "I-PER"]]
    tagger = CRFTagger(c2=0.1, max_iterations=20).fit(X * 5, y * 5)
    test = [[{"w": w} for w in s.split()] for s in ("smith paris john", "in smith")]
    classes = list(tagger.classes_)
    crf = crf_like(tagger, allowed_transitions="BIO")
    em, mask = tagger_emissions(tagger, test)
    assert [[classes[i] for i in p] for p in crf.decode(em, mask)] == tagger.predict(
        test, allowed_transitions="BIO"
    )
    np.testing.assert_allclose(
        crf.sequence_log_proba(em, mask=mask).numpy(),
        tagger.sequence_log_proba(test, allowed_transitions="BIO"),
        atol=1e-6,
    )


def test_module_moves_with_to_and_trains():
    """A few optimizer steps raise the likelihood; the constraint buffers follow .to()."""
    crf = CRF(4, batch_first=True, allowed_transitions=[(0, 1), (1, 2), (2, 3), (3, 0), (0, 0)])
    crf = crf.to(torch.float64)
    assert crf.allowed_pairs.dtype == torch.bool
    g = torch.Generator().manual_seed(0)
    emissions = torch.randn(8, 6, 4, generator=g, dtype=torch.float64, requires_grad=True)
    tags = torch.randint(4, (8, 6), generator=g)
    opt = torch.optim.SGD([*crf.parameters(), emissions], lr=0.1)
    before = crf(emissions, tags).item()
    for _ in range(10):
        opt.zero_grad()
        (-crf(emissions, tags, reduction="mean")).backward()
        opt.step()
    assert crf(emissions, tags).item() > before


def test_threads_give_the_sequential_answers():
    """One layer served from 8 threads at once: every call gives the sequential answer."""
    from concurrent.futures import ThreadPoolExecutor

    crf = make(5, labels=["O", "B-X", "I-X", "B-Y", "I-Y"], allowed_transitions="BIO")
    inputs = [batch(6, 4, 5, lengths=(6, 3, 1, 5), seed=s) for s in range(8)]

    def answers(i):
        emissions, tags, mask = inputs[i]
        return (
            crf.decode(emissions, mask),
            crf.nbest(emissions, 3, mask),
            crf.marginals(emissions, mask),
            crf(emissions, tags, mask, reduction="none").detach(),
        )

    sequential = [answers(i) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(answers, range(8)))
    for want, got in zip(sequential, parallel):
        assert got[0] == want[0] and got[1] == want[1]
        assert torch.equal(got[2], want[2]) and torch.equal(got[3], want[3])


def test_pair_marginals_in_the_log_space_fallback():
    """Transition marginals when the scaled recursion underflows, against brute force."""
    crf = make(2)
    with torch.no_grad():
        crf.transitions.copy_(torch.tensor([[0.0, -1500.0], [-1500.0, 0.0]]))
    emissions = torch.tensor([[[0.0, -3.0]], [[-3.0, 0.0]], [[0.0, 0.0]]], dtype=torch.float64)
    partial = torch.ones(3, 1, 2, dtype=torch.bool)
    partial[0, 0, 1] = False
    partial[1, 0, 0] = False  # forces the -1500 transition 0 -> 1
    xi = crf.transition_marginals(emissions, partial_labels=partial)
    scores = enumerate_paths(crf, emissions[:, 0], lambda p: p[0] == 0 and p[1] == 1)
    logz = logsumexp(scores.values())
    want = np.zeros((2, 2, 2))
    for p, s in scores.items():
        if s > -math.inf:
            for t in range(2):
                want[t, p[t], p[t + 1]] += math.exp(s - logz)
    np.testing.assert_allclose(xi[:, 0].numpy(), want, atol=1e-12)


def test_validation_errors():
    crf = make()
    emissions, tags, mask = batch()
    with pytest.raises(ValueError, match="invalid number of tags: 0"):
        CRF(0)
    with pytest.raises(ValueError, match="repeated names"):
        CRF(2, labels=["a", "a"])
    with pytest.raises(ValueError, match="not both"):
        crf(emissions, tags, partial_labels=torch.ones(4, 3, K, dtype=torch.bool))
    with pytest.raises(ValueError, match="dimension of 3, got 2"):
        crf.decode(emissions[0])
    with pytest.raises(ValueError, match="last dimension of emissions is 3, got 2"):
        crf.decode(emissions[..., :2])
    with pytest.raises(ValueError, match="no token"):
        crf.decode(emissions[:0])
    with pytest.raises(TypeError, match="floating-point"):
        crf.decode(tags[..., None].expand(4, 3, K))
    with pytest.raises(
        ValueError, match=r"emissions and tags must match, got \(4, 3\) and \(3, 3\)"
    ):
        crf(emissions, tags[:3])
    with pytest.raises(TypeError, match="integer tensor"):
        crf(emissions, tags.double())
    with pytest.raises(ValueError, match="shape of emissions"):
        crf.decode(emissions, partial_labels=torch.ones(4, 3, 2, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool tensor"):
        crf.decode(emissions, partial_labels=torch.ones(4, 3, K))
    with pytest.raises(
        ValueError, match=r"emissions and mask must match, got \(4, 3\) and \(4, 2\)"
    ):
        crf.decode(emissions, mask[:, :2])
    with pytest.raises(ValueError, match="sequence 1 has no token"):
        crf.decode(emissions, torch.tensor([[1, 0, 1]] * 4))
    # tags at padding are not read (e.g. -100 padding)
    padded = tags.masked_fill(~mask, -100)
    torch.testing.assert_close(crf(emissions, padded, mask), crf(emissions, tags, mask))
