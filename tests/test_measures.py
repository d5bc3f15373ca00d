"""RSA, SVCCA, ridge R² and k-NN Jaccard: against independent references (scipy, scikit-learn, a textbook
CCA written here), their invariances, token layouts, the similarity experiment, the CLI and the page."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist
from scipy.stats import spearmanr
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.neighbors import NearestNeighbors
from torch import nn

from stitchcore.errors import StitchError
from stitchcore.measures import representational
from stitchcore.measures.representational import knn_jaccard, ridge_r2, rsa, svcca
from stitchcore.measures.similarity import get_measure, list_measures, similarity_matrix
from tests.conftest import copy_store

NEW = ("rsa", "svcca", "ridge-r2", "knn-jaccard")


def _rand(n: int, p: int, seed: int) -> torch.Tensor:
    return torch.randn(n, p, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _related(n: int, seed: int, p: int = 12, q: int = 9, noise: float = 0.5) -> tuple[torch.Tensor, ...]:
    """X [n, p] and Y [n, q] = a linear map of X plus noise: related, not identical."""
    x = _rand(n, p, seed)
    return x, x @ _rand(p, q, seed + 1) + noise * _rand(n, q, seed + 2)


def _invertible(p: int, seed: int) -> torch.Tensor:
    """A random p x p matrix with singular values in [0.5, 2]: invertible and well conditioned."""
    u, _ = torch.linalg.qr(_rand(p, p, seed))
    v, _ = torch.linalg.qr(_rand(p, p, seed + 1))
    s = torch.linspace(0.5, 2.0, p, dtype=torch.float64)
    return u @ torch.diag(s) @ v.T


def _orthogonal(p: int, seed: int) -> torch.Tensor:
    return torch.linalg.qr(_rand(p, p, seed))[0]


# ---------------------------------------------------------------------------- independent references


def _rsa_scipy(x: np.ndarray, y: np.ndarray) -> float:
    return float(spearmanr(pdist(x, "correlation"), pdist(y, "correlation")).statistic)


def _svcca_textbook(x: np.ndarray, y: np.ndarray, share: float = 0.99) -> float:
    """Raghu et al.: project each centred side on its top singular vectors (99 % of the variance), then CCA by
    whitening, rho = singular values of Sxx^-1/2 Sxy Syy^-1/2, averaged."""

    def reduce(a: np.ndarray) -> np.ndarray:
        a = a - a.mean(0)
        _, s, vt = np.linalg.svd(a, full_matrices=False)
        k = int(np.argmax(np.cumsum(s**2) / np.sum(s**2) >= share)) + 1
        return a @ vt[:k].T  # [n, k]

    def inv_sqrt(c: np.ndarray) -> np.ndarray:
        w, v = np.linalg.eigh(c)
        return v @ np.diag(w**-0.5) @ v.T

    rx, ry = reduce(x), reduce(y)
    n = len(rx)
    sxx, syy, sxy = rx.T @ rx / (n - 1), ry.T @ ry / (n - 1), rx.T @ ry / (n - 1)
    rho = np.linalg.svd(inv_sqrt(sxx) @ sxy @ inv_sqrt(syy), compute_uv=False)
    return float(rho.mean())


def _ridge_r2_sklearn(x: np.ndarray, y: np.ndarray) -> float:
    """Every 5th row (i % 5 == 4) held out; lambda = 1e-4 tr(cov_xx) / p on population covariances of the
    fit rows (the accumulator's default), so sklearn's alpha = lambda * n_fit; R² uses the held-out mean."""
    held = np.arange(len(x)) % 5 == 4
    xf, yf = x[~held], y[~held]
    lam = 1e-4 * np.trace(np.cov(xf.T, bias=True)) / x.shape[1]
    model = Ridge(alpha=lam * len(xf), fit_intercept=True).fit(xf, yf)
    return float(r2_score(y[held], model.predict(x[held]), multioutput="variance_weighted"))


def _knn_sklearn(x: np.ndarray, y: np.ndarray, k: int = 10) -> float:
    near = [NearestNeighbors(n_neighbors=k, metric="cosine").fit(a).kneighbors(return_distance=False)
            for a in (x, y)]  # fmt: skip
    return float(np.mean([len(set(a) & set(b)) / len(set(a) | set(b)) for a, b in zip(*near)]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rsa_equals_scipy_pdist_spearmanr(seed):
    x, y = _related(90, seed)
    assert float(rsa(x, y)) == pytest.approx(_rsa_scipy(x.numpy(), y.numpy()), abs=1e-12)


def test_rsa_tied_distances_get_average_ranks_as_in_scipy():
    """Rows of balanced ±1 patterns: every correlation is a multiple of 1/16, computed exactly by both, so the
    distances tie exactly (x has 6 patterns, so 3 distinct distances)."""
    gen = torch.Generator().manual_seed(5)
    patterns = torch.tensor([[1.0, 1.0, -1.0, -1.0], [1.0, -1.0, 1.0, -1.0], [1.0, -1.0, -1.0, 1.0]],
                            dtype=torch.float64)  # fmt: skip
    patterns = torch.cat([patterns, -patterns])  # [6, 4], each row mean 0
    x = patterns[torch.randint(0, 6, (40,), generator=gen)]  # [40, 4]
    other = patterns[torch.randint(0, 6, (40,), generator=gen)]
    y = torch.cat([x, other, x, other], dim=1)  # [40, 16], related to x
    assert len(np.unique(pdist(x.numpy(), "correlation"))) == 3  # ties, exactly
    assert float(rsa(x, y)) == pytest.approx(_rsa_scipy(x.numpy(), y.numpy()), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_svcca_equals_textbook_whitened_cca(seed):
    x, y = _related(300, seed, p=20, q=15)
    x = x * torch.logspace(0, -1.5, 20, dtype=torch.float64)  # a decaying spectrum: the 99 % cut drops some
    assert float(svcca(x, y)) == pytest.approx(_svcca_textbook(x.numpy(), y.numpy()), abs=1e-8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ridge_r2_equals_sklearn_ridge_and_r2_score(seed):
    x, y = _related(200, seed, p=15, q=6, noise=1.0)
    assert float(ridge_r2(x, y)) == pytest.approx(_ridge_r2_sklearn(x.numpy(), y.numpy()), abs=1e-6)
    wide_x, y_of_wide = _related(60, seed, p=40, q=3)  # more columns than fit rows: the ridge decides
    want = _ridge_r2_sklearn(wide_x.numpy(), y_of_wide.numpy())
    assert float(ridge_r2(wide_x, y_of_wide)) == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_knn_jaccard_equals_sklearn_nearest_neighbors(seed):
    x, y = _related(150, seed, noise=2.0)
    assert float(knn_jaccard(x, y)) == pytest.approx(_knn_sklearn(x.numpy(), y.numpy()), abs=1e-12)


def test_knn_k_is_capped_by_the_other_rows():
    x, y = _rand(6, 3, 0), _rand(6, 3, 1)
    assert float(knn_jaccard(x, y)) == 1.0  # k = 5: every other row is a neighbour on both sides


# ---------------------------------------------------------------------------- invariances


def test_rsa_invariant_to_per_row_affine_maps_not_to_rotations():
    x, y = _related(80, 3)
    gen = torch.Generator().manual_seed(9)
    scale = torch.rand(80, 1, generator=gen, dtype=torch.float64) * 5 + 0.1  # a_i > 0
    shift = torch.randn(80, 1, generator=gen, dtype=torch.float64) * 10
    base = float(rsa(x, y))
    assert float(rsa(scale * x + shift, y)) == pytest.approx(base, abs=1e-10)
    assert float(rsa(x, 7.0 * y)) == pytest.approx(base, abs=1e-10)
    assert abs(float(rsa(x @ _orthogonal(12, 4), y)) - base) > 1e-3  # correlation distance is per row


def test_svcca_invariant_to_invertible_maps_and_translation():
    """X and Y have rank 5 in 12 and 8 columns (3 directions shared): an invertible map keeps the column
    space, and every direction holds over 1 % of the variance: the 99 % cut keeps all 5 before and after."""
    z = _rand(200, 5, 0)
    x = z @ _rand(5, 12, 1)
    y = torch.cat([z[:, :3], _rand(200, 2, 3)], dim=1) @ _rand(5, 8, 2)
    base = float(svcca(x, y))
    assert 0.3 < base < 0.95
    assert float(svcca(x @ _invertible(12, 4) + 3.0, y)) == pytest.approx(base, abs=1e-9)
    assert float(svcca(x, y @ _invertible(8, 6) - 1.0)) == pytest.approx(base, abs=1e-9)


def test_svcca_the_99_percent_cut_decides_the_directions():
    """X = U diag(s): variance shares 50/30/15/4.5/0.3/0.2 %: the cut keeps 4 directions.  Y spans directions
    0, 1, 2 and 4, so the canonical correlations are 1, 1, 1, 0 (0.75); with 5 kept they would all be 1."""
    u, _ = torch.linalg.qr(_rand(100, 6, 0) - _rand(100, 6, 0).mean(0))
    u = u - u.mean(0)
    u, _ = torch.linalg.qr(u)  # orthonormal and centred
    s = torch.tensor([50.0, 30.0, 15.0, 4.5, 0.3, 0.2], dtype=torch.float64).sqrt()
    y = u[:, [0, 1, 2, 4]]
    assert float(svcca(u * s, y)) == pytest.approx(0.75, abs=1e-10)
    s_three = torch.tensor([50.0, 30.0, 19.5, 0.3, 0.1, 0.1], dtype=torch.float64).sqrt()  # the cut keeps 3
    assert float(svcca(u * s_three, y)) == pytest.approx(1.0, abs=1e-10)


def test_ridge_r2_invariant_to_invertible_maps_of_x_up_to_the_ridge():
    x, y = _related(300, 4, p=10, q=5, noise=1.0)
    base = float(ridge_r2(x, y))
    assert 0.5 < base < 0.99
    assert float(ridge_r2(x @ _invertible(10, 8), y)) == pytest.approx(base, abs=1e-5)
    assert float(ridge_r2(x + 100.0, y)) == pytest.approx(base, abs=1e-9)
    assert float(ridge_r2(y, x)) != pytest.approx(base, abs=1e-3)  # not symmetric


def test_knn_jaccard_invariant_to_rotations_and_positive_row_scaling():
    x, y = _related(120, 5, noise=2.0)
    scale = torch.rand(120, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 10 + 0.01
    base = float(knn_jaccard(x, y))
    assert 0.05 < base < 0.9
    assert float(knn_jaccard(x @ _orthogonal(12, 6), y)) == base
    assert float(knn_jaccard(scale * x, y @ _orthogonal(9, 7))) == base


@pytest.mark.parametrize("name", NEW)
def test_same_input_is_the_top_and_unrelated_data_near_zero(name):
    fn = get_measure(name).fn
    x = _rand(600, 6, 0)
    assert float(fn(x, x)) == pytest.approx(1.0, abs=1e-6)
    unrelated = float(fn(x, _rand(600, 6, 1)))
    assert abs(unrelated) < 0.1, unrelated


# ---------------------------------------------------------------------------- degenerate inputs


@pytest.mark.parametrize(("name", "rows"), [("rsa", 2), ("svcca", 1), ("ridge-r2", 9), ("knn-jaccard", 1)])
def test_too_few_examples_is_an_error_naming_the_minimum(name, rows):
    with pytest.raises(StitchError, match=rf"{name} needs at least {rows + 1} examples"):
        get_measure(name).fn(_rand(rows, 3, 0), _rand(rows, 3, 1))


def test_size_guards_name_the_fix(monkeypatch):
    monkeypatch.setattr(representational, "RSA_MAX_ROWS", 10)
    with pytest.raises(StitchError, match="use fewer samples"):
        rsa(_rand(11, 3, 0), _rand(11, 3, 1))
    monkeypatch.setattr(representational, "RIDGE_MAX_FEATURES", 4)
    with pytest.raises(StitchError, match="pick a narrower cut"):
        ridge_r2(_rand(20, 5, 0), _rand(20, 3, 1))


def test_rows_without_a_direction_are_left_out():
    """A constant row (rsa) or a zero row (knn-jaccard) in either side: the same as without that row."""
    x, y = _related(40, 6)
    x_const, y_zero = x.clone(), y.clone()
    x_const[7], y_zero[7] = 2.5, 0.0
    keep = torch.arange(40) != 7
    assert float(rsa(x_const, y)) == pytest.approx(float(rsa(x[keep], y[keep])), abs=1e-12)
    assert float(knn_jaccard(x, y_zero)) == pytest.approx(float(knn_jaccard(x[keep], y[keep])), abs=1e-12)


def test_nothing_to_compare_is_nan():
    x = _rand(20, 4, 0)
    flat = torch.ones(20, 4, dtype=torch.float64)
    assert math.isnan(float(rsa(x, flat))) and math.isnan(float(svcca(x, flat)))
    assert math.isnan(float(knn_jaccard(x, torch.zeros(20, 4, dtype=torch.float64))))
    assert math.isnan(float(ridge_r2(x, flat)))


# ---------------------------------------------------------------------------- token layouts, experiment


class _Tokens(nn.Module):
    """[B, N, 4] -> "embed" [B, N, 8] -> "mix" [B, N, 6]."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.embed, self.act, self.mix = nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mix(self.act(self.embed(x)))


@pytest.mark.parametrize("token_mode", ["mean", "tokens"])
def test_token_layouts_through_similarity_matrix(token_mode):
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randn(16, 5, 4, generator=gen) for _ in range(3)]  # 48 examples of 5 tokens
    a, b = _Tokens(1), _Tokens(2)
    for name in NEW:
        out = similarity_matrix(a, b, ["embed", "mix"], ["embed", "mix", "act"], batches, batches,
                                measure=name, token_mode=token_mode, shuffle_baseline=True)  # fmt: skip
        vals = torch.tensor(out["values"])
        assert vals.shape == (2, 3) and out["n"] == 48 and out["measure"] == name, name
        assert torch.isfinite(vals).all() and torch.isfinite(torch.tensor(out["baseline"])).all(), name
        same = similarity_matrix(a, a, ["mix"], ["mix"], batches, batches, measure=name,
                                 token_mode=token_mode)
        near = 1e-4 if name == "ridge-r2" else 1e-6  # the ridge shrinks the fit a little
        assert same["values"][0][0] == pytest.approx(1.0, abs=near), name


@pytest.fixture(scope="module")
def store(trained_store, tmp_path_factory):
    """A copy of the session store (two trained digit CNNs) that only this module writes to."""
    from stitchcore.store.results import Store

    src, refs = trained_store
    root = tmp_path_factory.mktemp("measures") / "store"
    copy_store(src.root, root)
    opened = Store(root)
    yield opened, refs
    opened.close()


@pytest.mark.parametrize("name", NEW)
def test_similarity_experiment_on_zoo_models(store, name):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec

    st, refs = store
    spec = SimilaritySpec(a=refs[0], b=refs[1], senders=("block2", "fc1"), receivers=("flatten", "fc2"),
                          measure=name, max_samples=200)  # fmt: skip
    s = run_experiment("similarity", spec, st).record.summary
    vals = torch.tensor(s["values"], dtype=torch.float64)
    assert s["measure"] == name and s["n"] == 200 and vals.shape == (2, 2)
    low, high = get_measure(name).bounds
    assert torch.isfinite(vals).all() and ((vals >= low) & (vals <= high + 1e-9)).all()
    assert (torch.tensor(s["baseline"]) < vals).all(), "shuffled inputs are less similar"


# ---------------------------------------------------------------------------- CLI, figures, page


def _cli(argv: list[str], st, capsys) -> tuple[int, str, str]:
    from stitchcore.cli.main import main

    capsys.readouterr()
    try:
        code = main([*argv, "--store", str(st.root), "--quiet"])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_measure_json_unknown_measure_and_help(store, capsys):
    st, refs = store
    args = ["similarity", "--a", refs[0], "--b", refs[0], "--senders", "fc1,fc2", "--receivers", "fc1,fc2",
            "--max-samples", "200"]
    code, out, err = _cli([*args, "--measure", "knn-jaccard", "--json"], st, capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["measure"] == "knn-jaccard" and result["n"] == 200
    assert result["values"][0][0] == 1.0 and result["values"][1][1] == 1.0, "a model with itself"
    code, out, err = _cli([*args, "--measure", "nope"], st, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1
    assert lines[0].startswith("error: unknown measure 'nope'")
    assert all(m in lines[0] for m in NEW)
    code, out, _ = _cli(["similarity", "--help"], st, capsys)
    assert code == 0 and all(m in out for m in NEW)


def test_panels_follow_the_registry():
    from stitchcore.report.figures import MEASURE_TITLES, HeatPanel, cka_panels, measure_choices

    assert set(measure_choices()) == set(MEASURE_TITLES) == set(list_measures())

    def panel(measure: str) -> HeatPanel:
        return cka_panels({"measure": measure, "senders": ["a"], "receivers": ["b"], "values": [[0.5]]})[0]

    before = [("cka-linear", "Linear CKA", "CKA", True), ("cka-rbf", "RBF CKA", "CKA", True),
              ("procrustes", "Procrustes distance", "distance", False)]  # how stored runs drew: they still do
    for measure, title, label, bounded in before:
        want = HeatPanel(title, [[0.5]], ["a"], ["b"], label, csv_name=measure, bounded=bounded, matrix=False,
                         meaning=measure)  # its colour bar's words: measures/meaning.py
        assert panel(measure) == want, measure
    assert panel("svcca").bounded and panel("knn-jaccard").bounded
    assert panel("rsa").diverging and panel("rsa").value_range == (-1.0, 1.0) and not panel("rsa").bounded
    ridge = cka_panels({"measure": "ridge-r2", "senders": ["a"], "receivers": ["b", "c"], "values": [[0.9, None]],
                        "baseline": [[-1.5, 0.1]]})  # fmt: skip
    assert [(p.diverging, p.value_range) for p in ridge] == [(True, (-1.0, 1.0))] * 2  # one scale, -1.5 saturates
    assert panel("retired-measure").title == "retired-measure"  # a stored run of an unknown measure draws


def test_similarity_page_offers_the_new_measures(app):
    at = app.run().switch_page("views/similarity.py").run()
    picker = at.selectbox(key="sim_measure")
    assert {"SVCCA", "RSA (Spearman of RDMs)", "k-NN Jaccard (k = 10, cosine)"} <= set(picker.options)
    picker.set_value("ridge-r2").run()
    assert not at.exception and not at.error
    assert any("higher = more similar" in c.value for c in at.caption)
