"""stitchcore.similarity: CKA / Procrustes against textbook formulas, hooks, and a small end-to-end."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from stitchcore.errors import CutError, StitchError
from stitchcore.measures.similarity import (
    MinibatchCKA,
    cka_linear,
    cka_rbf,
    features_at,
    flatten,
    get_measure,
    gram_linear,
    hsic_unbiased,
    list_measures,
    procrustes_distance,
    register_measure,
    similarity_matrix,
    u_centre,
)


def _rand(n: int, p: int, seed: int) -> torch.Tensor:
    return torch.randn(n, p, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _textbook_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Biased HSIC with H = I - 11ᵀ/n: tr(KHLH) / sqrt(tr(KHKH) tr(LHLH))."""
    n = x.shape[0]
    h = torch.eye(n, dtype=torch.float64) - 1.0 / n
    k, l = x @ x.T, y @ y.T
    hsic = lambda a, b: torch.trace(a @ h @ b @ h)
    return float(hsic(k, l) / torch.sqrt(hsic(k, k) * hsic(l, l)))


def _song_hsic(k: torch.Tensor, l: torch.Tensor) -> float:
    """Song et al. 2012 eq. 5 written out with explicit matrices (independent of hsic_unbiased)."""
    n = k.shape[0]
    kt, lt = k * (1 - torch.eye(n, dtype=k.dtype)), l * (1 - torch.eye(n, dtype=l.dtype))
    one = torch.ones(n, 1, dtype=k.dtype)
    val = torch.trace(kt @ lt) + (one.T @ kt @ one) * (one.T @ lt @ one) / ((n - 1) * (n - 2))
    val = val - 2.0 / (n - 2) * (one.T @ kt @ lt @ one)
    return float(val / (n * (n - 3)))


def _correlated(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    x = _rand(n, 12, seed)
    y = torch.cat([x[:, :6] @ _rand(6, 6, seed + 1), _rand(n, 4, seed + 2)], dim=1)
    return x, y


# ---------------------------------------------------------------------------- formulas


def test_linear_cka_equals_textbook_biased_formula():
    x, y = _correlated(50)
    assert float(cka_linear(x, y)) == pytest.approx(_textbook_cka(x, y), abs=1e-12)


def test_hsic_unbiased_and_u_centring_equal_song_formula():
    x, y = _correlated(30)
    k, l = gram_linear(x), gram_linear(y)
    direct = _song_hsic(k, l)
    assert float(hsic_unbiased(k, l)) == pytest.approx(direct, rel=1e-10)
    n = 30
    assert float((u_centre(k) * u_centre(l)).sum() / (n * (n - 3))) == pytest.approx(direct, rel=1e-10)


@pytest.mark.parametrize("measure", [cka_linear, cka_rbf])
def test_cka_of_x_with_itself_is_one(measure):
    x = _rand(40, 9, 3)
    assert float(measure(x, x)) == pytest.approx(1.0, abs=1e-10)


def test_debiased_full_batch_of_x_with_itself_is_one():
    x = _rand(40, 9, 3)
    assert float(cka_linear(x, x, debiased=True)) == pytest.approx(1.0, abs=1e-10)


def test_linear_cka_invariant_to_orthogonal_transform_and_isotropic_scaling():
    x, y = _correlated(60)
    q, _ = torch.linalg.qr(_rand(12, 12, 7))
    base = float(cka_linear(x, y))
    assert float(cka_linear(2.5 * x @ q, y)) == pytest.approx(base, abs=1e-10)
    assert float(cka_linear(x, 0.1 * y)) == pytest.approx(base, abs=1e-10)
    assert float(cka_linear(x, y, debiased=True)) == pytest.approx(
        float(cka_linear(3.0 * x @ q, y, debiased=True)), abs=1e-10
    )


def test_rbf_cka_invariant_to_orthogonal_transform():
    x, y = _correlated(40)
    q, _ = torch.linalg.qr(_rand(12, 12, 8))
    assert float(cka_rbf(x @ q * 4.0, y)) == pytest.approx(float(cka_rbf(x, y)), abs=1e-10)


def test_procrustes_zero_for_same_and_symmetric():
    x, y = _correlated(40)
    q, _ = torch.linalg.qr(_rand(12, 12, 9))
    assert float(procrustes_distance(x, x)) == pytest.approx(0.0, abs=1e-10)
    assert float(procrustes_distance(x, 3 * x @ q + 1.0)) == pytest.approx(0.0, abs=1e-10)
    d_xy, d_yx = float(procrustes_distance(x, y)), float(procrustes_distance(y, x))
    assert d_xy == pytest.approx(d_yx, abs=1e-12)
    assert 0.0 < d_xy <= 2.0


def test_row_mismatch_names_the_fix():
    with pytest.raises(StitchError, match="same inputs"):
        cka_linear(_rand(10, 3, 0), _rand(11, 3, 0))


# ---------------------------------------------------------------------------- minibatch CKA


def test_stacked_path_equals_per_pair_loop():
    feats_a = [_rand(16, p, s) for s, p in enumerate((5, 9, 3))]
    feats_b = [_rand(16, p, 10 + s) for s, p in enumerate((4, 7))]
    m = MinibatchCKA(3, 2)
    m.update(feats_a, feats_b)
    got = m.compute()
    for i, xa in enumerate(feats_a):
        for j, xb in enumerate(feats_b):
            k, l = gram_linear(xa), gram_linear(xb)
            want = hsic_unbiased(k, l) / torch.sqrt(hsic_unbiased(k, k) * hsic_unbiased(l, l))
            assert abs(float(got[i, j]) - float(want)) < 1e-10


def _cka_of_grams(k: torch.Tensor, l: torch.Tensor) -> float:
    return float(hsic_unbiased(k, l) / torch.sqrt(hsic_unbiased(k, k) * hsic_unbiased(l, l)))


@pytest.mark.parametrize("offset", [0.0, 40.0, 1000.0])
def test_float32_features_stay_within_1e_6_of_the_float64_reference(offset):
    """Post-ReLU maps with a mean far from zero (offset / spread up to ~45): float32 Grams of the raw
    features lose the small centred part to rounding (1e-5 off at the largest offset); gram_centred
    centres first, so MinibatchCKA stays within 1e-6 of float64 Grams of the same float32 values."""
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(256, 512, generator=gen)  # shared inputs: the layers are related
    feats_a = [torch.relu(base @ torch.randn(512, p, generator=gen) + offset) for p in (4096, 700)]
    feats_b = [torch.relu(base[:, :300] @ torch.randn(300, 2048, generator=gen) + offset)]
    m = MinibatchCKA(2, 1)
    m.update(feats_a, feats_b)
    got = m.compute()
    for i, xa in enumerate(feats_a):
        want = _cka_of_grams(gram_linear(xa), gram_linear(feats_b[0]))
        assert 0.3 < want < 0.99
        assert abs(float(got[i, 0]) - want) < 1e-6
    raw = _cka_of_grams((feats_a[0] @ feats_a[0].T).double(), (feats_b[0] @ feats_b[0].T).double())
    raw_error = abs(raw - _cka_of_grams(gram_linear(feats_a[0]), gram_linear(feats_b[0])))
    assert raw_error > 2e-6 if offset == 1000.0 else raw_error < 1e-5  # what centring first avoids


def test_minibatch_over_many_batches_approaches_full_batch_debiased():
    x, y = _correlated(4096, seed=4)
    full = float(cka_linear(x, y, debiased=True))
    m = MinibatchCKA(1, 1)
    for rows in torch.arange(4096).split(256):
        m.update([x[rows]], [y[rows]])
    assert float(m.compute()[0, 0]) == pytest.approx(full, abs=0.02)


def test_biased_minibatch_single_batch_equals_full_batch_biased():
    x, y = _correlated(64)
    m = MinibatchCKA(1, 1, debiased=False)
    m.update([x], [y])
    assert float(m.compute()[0, 0]) == pytest.approx(float(cka_linear(x, y)), abs=1e-12)


def test_small_batch_is_an_error_naming_the_fix():
    m = MinibatchCKA(1, 1)
    with pytest.raises(StitchError, match="at least 4 examples; raise the batch size"):
        m.update([_rand(3, 2, 0)], [_rand(3, 2, 1)])


def test_minibatch_layer_count_mismatch():
    with pytest.raises(StitchError, match="expected 2 A"):
        MinibatchCKA(2, 1).update([_rand(8, 2, 0)], [_rand(8, 2, 1)])


# ---------------------------------------------------------------------------- features


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.drop = nn.Dropout(0.5)
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 6), nn.ReLU())
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        return self.head(self.body(self.drop(self.conv(x))))


def test_features_at_hooks_removed_and_training_restored():
    net = _Net().train()
    net.head.eval()  # a mixed state must come back exactly
    x = torch.randn(5, 1, 4, 4)
    feats = features_at(net, ["conv", "body.1", "head"], x)
    assert feats["conv"].shape == (5, 3, 4, 4) and feats["body.1"].shape == (5, 6)
    assert torch.allclose(feats["head"], net.eval()(x))  # eval mode was used (dropout off)
    net.train()
    net.head.eval()
    for m in net.modules():
        assert not m._forward_hooks
    assert net.training and net.conv.training and not net.head.training


def test_features_at_hooks_removed_when_forward_fails():
    net = _Net().train()
    with pytest.raises(RuntimeError):
        features_at(net, ["conv"], torch.randn(2, 1, 5, 5))  # wrong spatial size for the Linear
    assert not net.conv._forward_hooks and net.training


def test_features_at_unknown_name_suggests_close_ones():
    with pytest.raises(CutError, match="close: .*body.1"):
        features_at(_Net(), ["body.l"], torch.randn(2, 1, 4, 4))


def test_flatten_rules():
    assert flatten(torch.zeros(2, 3, 4, 5), "map").shape == (2, 60)
    assert flatten(torch.zeros(2, 4, 5, 3), "map_nhwc").shape == (2, 60)
    tok = torch.arange(24.0).reshape(2, 3, 4)
    assert torch.equal(flatten(tok, "tokens"), tok.mean(1))
    assert flatten(tok, "tokens", "tokens").shape == (6, 4)
    assert flatten(torch.zeros(2, 7)).shape == (2, 7)
    with pytest.raises(StitchError, match="token_mode"):
        flatten(tok, "tokens", "cls")


def test_registry():
    assert list_measures() == ["cka-linear", "cka-rbf", "knn-jaccard", "procrustes", "ridge-r2", "rsa",
                               "svcca"]
    assert list_measures("cka-*") == ["cka-linear", "cka-rbf"] and list_measures("cca") == []
    with pytest.raises(ValueError, match="already registered"):
        register_measure("cka-linear")(lambda x, y: x)


def test_unknown_measure_names_the_close_ones():
    with pytest.raises(StitchError, match="unknown measure 'cka-linera'; did you mean 'cka-linear'"):
        get_measure("cka-linera")
    with pytest.raises(StitchError, match=r"known: cka-linear, cka-rbf, procrustes, rsa, svcca, ridge-r2"):
        get_measure("nope")


# ---------------------------------------------------------------------------- every registered measure


@pytest.mark.parametrize("name", list_measures())
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_measure_contract_range_identity_symmetry(name, dtype):
    """Every measure: finite and within its bounds, the most similar value for the same input,
    and fn(X, Y) == fn(Y, X) where it says it is symmetric."""
    meas = get_measure(name)
    low, high = meas.bounds
    x, y = _rand(24, 7, 11).to(dtype), _rand(24, 5, 12).to(dtype)  # [n, p], [n, q]: p != q
    for a, b in ((x, y), (y, x), (x, x), (x, 2 * x), (x, y + x[:, :5])):
        value = float(meas.fn(a, b))
        assert math.isfinite(value), (name, value)
        assert low - 1e-9 <= value <= high + 1e-9, (name, value)
    same = float(meas.fn(x, x))
    assert same == pytest.approx(high if meas.higher_is_similar else low, abs=1e-6)
    if meas.symmetric:
        assert float(meas.fn(x, y)) == pytest.approx(float(meas.fn(y, x)), abs=1e-9)
    unrelated = float(meas.fn(x, y))
    assert (unrelated < same) if meas.higher_is_similar else (unrelated > same)


# ---------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def resnets():
    from stitchcore.models.archs import create_arch

    torch.manual_seed(0)
    a = create_arch("resnet", blocks=(1, 1, 1, 1), width=8, in_chans=1, num_classes=10)
    torch.manual_seed(1)
    b = create_arch("resnet", blocks=(1, 1, 1, 1), width=8, in_chans=1, num_classes=10)
    return a, b


def _digit_batches(limit: int = 256, bs: int = 64):
    from stitchcore.data.images import load_dataset

    return [x for x, _ in load_dataset("digits").batches("train", bs, limit=limit)]


CUTS = ["stem", "layer1.0", "layer2.0", "layer3.0", "layer4.0", "pool"]


def test_matrix_model_with_itself_has_unit_diagonal(resnets):
    a, _ = resnets
    batches = _digit_batches()
    calls = []
    out = similarity_matrix(a, a, CUTS, CUTS, batches, batches, shuffle_baseline=True,
                            progress=lambda f, msg: calls.append(f), check_cancel=lambda: None)
    vals = torch.tensor(out["values"], dtype=torch.float64)
    assert vals.shape == (6, 6) and out["n"] == 256 and out["senders"] == CUTS
    assert torch.allclose(vals.diagonal(), torch.ones(6, dtype=torch.float64), atol=1e-9)
    base = torch.tensor(out["baseline"])
    assert (base.diagonal() < vals.diagonal()).all()  # unrelated images are less similar
    assert calls[-1] == 1.0 and all(0 <= f <= 1 for f in calls)


def test_matrix_two_models_and_full_batch_measures(resnets):
    a, b = resnets
    batches = _digit_batches(limit=128, bs=64)
    lin = similarity_matrix(a, b, CUTS[:3], CUTS, batches, batches)
    assert torch.tensor(lin["values"]).shape == (3, 6) and lin["baseline"] is None
    for measure in ("cka-rbf", "procrustes"):
        out = similarity_matrix(a, b, CUTS[:2], CUTS[-2:], batches, batches, measure=measure,
                                shuffle_baseline=True)
        vals = torch.tensor(out["values"])
        assert vals.shape == (2, 2) and out["measure"] == measure and out["n"] == 128
        assert all(math.isfinite(v) for v in vals.flatten().tolist())
        assert torch.tensor(out["baseline"]).shape == (2, 2)


def test_matrix_errors(resnets, monkeypatch):
    a, b = resnets
    batches = _digit_batches(limit=64, bs=32)
    with pytest.raises(StitchError, match="different numbers of batches"):
        similarity_matrix(a, b, CUTS[:1], CUTS[:1], batches, batches[:1])
    with pytest.raises(StitchError, match="unknown measure"):
        similarity_matrix(a, b, CUTS[:1], CUTS[:1], batches, batches, measure="nope")
    with pytest.raises(CutError, match="close"):
        similarity_matrix(a, b, ["layer9.0"], CUTS[:1], batches, batches)
    monkeypatch.setenv("STITCHLAB_ACT_BUDGET_MB", "0.01")
    with pytest.raises(StitchError, match="fewer samples or cuts"):
        similarity_matrix(a, b, CUTS[:1], CUTS[:1], batches, batches, measure="cka-rbf")
