"""Language models: GPT parts reproduce the model, merge layouts and identities, penalties, vocab and
width errors, the char-GPT zoo recipe, the HF GPT-2 path, and the merge / lmstitch / lmdepth runs."""

from __future__ import annotations

import json

import pytest
import torch

from stitchcore.errors import AdapterError, CutError, DataError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.lm import DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.lm.evaluate import eval_windows, lm_data, lm_loss, loss_penalty
from stitchcore.lm.parts import (
    build_merge,
    build_stitch,
    cut_name,
    lm_parts,
    make_token_adapter,
    merge_layout,
    parse_position,
    stitch_layout,
)
from stitchcore.models.sources import load_model
from stitchcore.store.results import Store
from tests.lm_helpers import save_tiny_gpt2, train_tiny

QUICK = {"eval_windows": 8, "sample_tokens": 12}


@pytest.fixture(scope="module")
def lm_store(tmp_path_factory):
    """A store with two tiny char-GPTs (seeds 0 and 1) and one of another width."""
    store = Store(tmp_path_factory.mktemp("lmstore"))
    refs = [train_tiny(store, 0), train_tiny(store, 1), train_tiny(store, 2, n_embd=16)]
    return store, refs


def _state(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in m.state_dict().items()}


def test_zoo_recipe_trains_and_resolves(lm_store):
    store, (a, _, _) = lm_store
    assert a.startswith("zoo:gpt-pydoc-s0-adamw")
    m = load_model(a, store=store)
    assert m.input_kind == "tokens" and m.preprocess is None and m.input_shape == (32,)
    assert isinstance(m.meta["vocab"], str) and m.num_classes == len(m.meta["vocab"])
    rec = store.list_runs(kind="zoo")[0]
    assert rec.summary["val_loss"] < 4.0 and rec.summary["sample"]  # learned something in 50 steps


def test_parts_reproduce_logits_exactly(lm_store):
    store, (a, _, _) = lm_store
    m = load_model(a, store=store)
    p = lm_parts(m)
    x = torch.randint(0, m.num_classes, (3, 32))
    want = m.model(x)
    whole = build_merge(p, p, 0, 0, "a")
    assert torch.equal(whole(x), want)
    for k in range(p.n_layer + 1):  # every residual position: prefix + suffix = the model
        assert torch.equal(whole.finish(whole.residual(x, k), k), want)
    assert [cut_name("gpt", k) for k in range(3)] == ["drop", "h.0", "h.1"]
    assert parse_position("h.1", 2) == 2 and parse_position("drop", 2) == 0 and parse_position("1", 2) == 1


def test_merge_identities_and_no_mutation(lm_store):
    store, (a, b, _) = lm_store
    ma, mb = load_model(a, store=store), load_model(b, store=store)
    before = _state(ma.model)
    pa, pb = lm_parts(ma), lm_parts(mb)
    x = torch.randint(0, ma.num_classes, (2, 32))
    assert torch.equal(build_merge(pa, pb, 1, 1, head="a")(x), ma.model(x))  # no blocks: A
    all_b = build_merge(pa, pb, 0, 2, head="b", embed="b")
    assert torch.equal(all_b(x), mb.model(x))  # all of B's blocks, B's ends: B
    assert all_b.layout == ["B.wte", "B.wpe", "B.h.0", "B.h.1", "B.ln_f", "B.lm_head"]
    half = build_merge(pa, pb, 1, 2, head="b")
    assert not torch.equal(half(x), mb.model(x))
    assert all(torch.equal(v, before[k]) for k, v in ma.model.state_dict().items())


def test_layouts_are_half_open_and_checked():
    assert merge_layout(4, 4, 1, 3, head="a") == [
        "A.wte", "A.wpe", "A.h.0", "B.h.1", "B.h.2", "A.h.3", "A.ln_f", "A.lm_head"]
    assert merge_layout(2, 2, 0, 0) == ["A.wte", "A.wpe", "A.h.0", "A.h.1", "A.ln_f", "A.lm_head"]
    assert stitch_layout(3, 3, 1, 2, head="b") == ["A.wte", "A.wpe", "A.h.0", "S", "B.h.2", "B.ln_f", "B.lm_head"]
    assert stitch_layout(3, 3, 1, 1, head="a", head_at=2) == [
        "A.wte", "A.wpe", "A.h.0", "S", "B.h.1", "A.h.2", "A.ln_f", "A.lm_head"]
    with pytest.raises(CutError, match="half-open"):
        merge_layout(2, 2, 1, 3)


def test_penalty_sign_and_base():
    assert loss_penalty(2.0, 2.5) == -0.25  # worse than the base: negative
    assert loss_penalty(2.0, 1.5) == 0.25
    assert loss_penalty(2.0, 2.0) == 0.0


def test_merge_run_penalty_base_is_the_head_model(lm_store):
    store, (a, b, _) = lm_store
    s = run_experiment("merge", MergeSpec(a=a, b=b, start=1, head="b", **QUICK), store).record.summary
    assert s["penalty_base"] == "b" and s["layout"][-2:] == ["B.ln_f", "B.lm_head"]
    assert s["loss_penalty"] == loss_penalty(s["base"]["b"]["loss"], s["loss"])
    assert s["loss"] > s["base"]["b"]["loss"] and s["loss_penalty"] < 0
    assert set(s["samples"]) == {"a", "b", "merged"}
    none = run_experiment("merge", MergeSpec(a=a, b=b, start=1, end=1, head="a", **QUICK), store).record.summary
    assert none["loss_penalty"] == 0.0 and none["loss"] == none["base"]["a"]["loss"]
    assert none["samples"]["merged"] == none["samples"]["a"]  # same model, same seed, same text


def test_width_and_vocab_errors(lm_store, tmp_path):
    store, (a, _, narrow) = lm_store
    pa, pn = lm_parts(load_model(a, store=store)), lm_parts(load_model(narrow, store=store))
    with pytest.raises(AdapterError, match="widths must be equal"):
        build_merge(pa, pn, 0, 1)
    with pytest.raises(AdapterError, match="widths must be equal"):
        build_stitch(pa, pn, 1, 1, make_token_adapter(LMStitchSpec(a="x", b="y").adapter, pa, 1, pn, 1), head="a")
    stitched = build_stitch(pa, pn, 1, 1, make_token_adapter(LMStitchSpec(a="x", b="y").adapter, pa, 1, pn, 1))
    assert stitched(torch.zeros(2, 8, dtype=torch.long)).shape[-1] == pa.codec.size  # D_A=32 -> D_B=16
    other = tmp_path / "other.txt"
    other.write_text("a small corpus with another alphabet " * 400)
    from dataclasses import replace

    from tests.lm_helpers import tiny_recipe

    ref = run_experiment("zoo", replace(tiny_recipe(0), dataset=f"file:{other}", data_id="auto"), store).record.summary["ref"]
    with pytest.raises(DataError, match="different vocabularies"):
        run_experiment("merge", MergeSpec(a=a, b=ref, start=1, **QUICK), store)


def test_lmstitch_run_trains_and_keeps_models_frozen(lm_store):
    store, (a, b, narrow) = lm_store
    spec = LMStitchSpec(a=a, b=narrow, cut_a=1, steps=10, **QUICK)  # D 32 -> 16, head b
    s = run_experiment("lmstitch", spec, store).record.summary
    assert s["layout"] == ["A.wte", "A.wpe", "A.h.0", "S(linear)", "B.h.1", "B.ln_f", "B.lm_head"]
    assert s["params"] == 32 * 16 + 16 and s["penalty_base"] == "b" and s["lstsq_residual"] is not None
    assert s["loss_penalty"] == loss_penalty(s["base"]["b"]["loss"], s["loss"])
    kept = run_experiment("lmstitch", LMStitchSpec(a=a, b=b, cut_a=1, head="a", steps=5, **QUICK), store)
    assert kept.record.summary["penalty_base"] == "a" and kept.record.summary["layout"][-1] == "A.lm_head"
    assert store.series(kept.record.id)["loss"]


def test_depth_sweep_points_and_heatmap(lm_store):
    store, (a, b, _) = lm_store
    spec = DepthSpec(a=a, b=b, steps=2, heatmap=True, **QUICK)
    out = run_experiment("lmdepth", spec, store)
    s = out.record.summary
    assert len(s["points"]) == 2 * 2 * 3  # modes x heads x splits 0..2
    merge_a = {p["split"]: p["loss_penalty"] for p in s["points"] if p["mode"] == "merge" and p["head"] == "a"}
    assert merge_a[2] == 0.0  # nothing substituted with A's head: A itself
    assert len(s["heatmap"]["values"]) == 3 and all(v is not None for r in s["heatmap"]["values"] for v in r)
    assert "penalty:merge:a:a" in store.series(out.record.id)
    assert {p["label"] for p in s["points"]} == {"merge, head A, embed A", "merge, head B, embed B",
                                                 "stitch, head A, embed A", "stitch, head B, embed A"}


def test_hf_gpt2_path(tmp_path):
    pytest.importorskip("transformers")
    da = save_tiny_gpt2(tmp_path / "a", seed=0)
    db = save_tiny_gpt2(tmp_path / "b", seed=1)
    ma, mb = load_model(f"hf:{da}"), load_model(f"hf:{db}")
    pa, pb = lm_parts(ma), lm_parts(mb)
    assert pa.family == "gpt2" and pa.n_layer == 2 and cut_name("gpt2", 1) == "hf.transformer.h.0"
    x = torch.randint(0, ma.num_classes, (2, 16))
    whole = build_merge(pa, pa, 0, 0)
    for k in range(3):
        torch.testing.assert_close(whole.finish(whole.residual(x, k), k), ma.model(x))
    torch.testing.assert_close(build_merge(pa, pb, 0, 2, "b", "b")(x), mb.model(x))
    data = lm_data("pydoc", pa.codec)
    assert lm_loss(whole, eval_windows(data.val, 32, 4), torch.device("cpu"))["loss"] > 0
    store = Store(tmp_path / "store")
    s = run_experiment("merge", MergeSpec(a=f"hf:{da}", b=f"hf:{db}", start=1, text="pydoc", **QUICK), store)
    assert s.record.summary["layout"] == ["A.wte", "A.wpe", "A.h.0", "B.h.1", "A.ln_f", "A.lm_head"]


def test_cli_merge_json(lm_store, capsys):
    from stitchcore.cli.main import main

    store, (a, b, _) = lm_store
    rc = main(["merge", "--a", a, "--b", b, "--split", "1", "--head", "b", "--eval-windows", "8",
               "--sample-tokens", "8", "--store", str(store.root), "--json", "--quiet"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["layout"][2:4] == ["A.h.0", "B.h.1"] and out["penalty_base"] == "b" and "loss_penalty" in out
    rc = main(["merge", "--a", a, "--b", b, "--mode", "stitch", "--split", "1", "--steps", "3", "--eval-windows",
               "8", "--sample-tokens", "0", "--store", str(store.root), "--json", "--quiet"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["mode"] == "stitch"
    rc = main(["merge", "--a", a, "--b", b, "--split", "h.0", "--dry-run", "--store", str(store.root), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["layout"] == [  # after h.0: B's blocks from 1
        "A.wte", "A.wpe", "A.h.0", "B.h.1", "A.ln_f", "A.lm_head"]
    rc = main(["merge", "--a", a, "--b", b, "--split", "5", "--store", str(store.root), "--json", "--quiet"])
    assert rc == 2 and "half-open" in capsys.readouterr().err


def test_mlp_and_lowrank_adapters(lm_store):
    from stitchcore.stitching.adapters import AdapterSpec

    store, (a, b, _) = lm_store
    mlp = LMStitchSpec(a=a, b=b, cut_a=1, steps=3, mlp_hidden=16, **QUICK)
    s = run_experiment("lmstitch", mlp, store).record.summary
    assert s["layout"][3] == "S(linear+mlp16)" and s["params"] == 32 * 32 + 32 + (32 * 16 + 16) + (16 * 32 + 32)
    low = LMStitchSpec(a=a, b=b, cut_a=1, steps=3, adapter=AdapterSpec("lowrank", norm="none", resample="none",
                                                                       init="lstsq", rank=4), **QUICK)
    s = run_experiment("lmstitch", low, store).record.summary
    assert s["layout"][3] == "S(lowrank)" and s["params"] == 32 * 4 + 4 * 32 + 32


def test_cli_stitch_verb_takes_lm_refs(lm_store, capsys):
    from stitchcore.cli.main import main

    store, (a, b, _) = lm_store
    rc = main(["stitch", "--a", a, "--b", b, "--cut-a", "h.0", "--cut-b", "h.0", "--epochs", "1", "--store",
               str(store.root), "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["kind"] == "lmstitch" and out["cut_a"] == 1 and out["steps"] == 20
    assert out["cut_names"] == {"a": "h.0", "b": "h.0"}


def test_lm_plots():
    from stitchcore.plots import lm as plots_lm

    pts = [{"label": f"{m}, head {h}", "split": k, "loss_penalty": -0.1 * k, "cut": f"h.{k}"}
           for m in ("merge", "stitch") for h in "AB" for k in range(3)]
    fig = plots_lm.penalty_by_depth(pts)
    assert len(fig.data) == 4 and "L_base" in fig.layout.yaxis.title.text
    heat = plots_lm.penalty_heatmap({"rows": ["drop", "h.0"], "cols": ["drop", "h.0"], "values": [[-0.1, 0], [0, None]]})
    assert heat.data[0].zmid == 0
    bars = plots_lm.loss_bars({"mode": "merge", "loss": 2.0, "base": {"a": {"loss": 1.5}, "b": {"loss": 1.6}}})
    assert list(bars.data[0].x) == ["A", "B", "merged"]
    from stitchcore.experiments.lm import partial_points

    partial = partial_points({"penalty:merge:a": [(0, -0.5), (1, -0.2)], "loss": [(1, 2.0)]})
    assert [(p["label"], p["split"]) for p in partial] == [("merge, head A, embed A", 0), ("merge, head A, embed A", 1)]


def test_adapter_training_leaves_frozen_parts_untouched(lm_store):
    from stitchcore.lm.train import train_lm_adapter

    store, (a, b, _) = lm_store
    ma, mb = load_model(a, store=store), load_model(b, store=store)
    pa, pb = lm_parts(ma), lm_parts(mb)
    adapter = make_token_adapter(LMStitchSpec(a="x", b="y").adapter, pa, 1, pb, 1)
    model = build_stitch(pa, pb, 1, 1, adapter)
    frozen = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("parts.1.")}
    data = lm_data("pydoc", pa.codec)
    losses = train_lm_adapter(model, 1, adapter, data.train, block_size=32, objective={"task": 1.0}, steps=5,
                              batch_size=4, lr=1e-2, weight_decay=0.0, seed=0, device=torch.device("cpu"))
    assert len(losses) == 5
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in frozen.items())  # only the adapter (parts.1) moved
    assert not any(m.training for name, m in model.named_modules() if not name.startswith("parts.1"))
    assert ma.model.wte.weight.data_ptr() != pa.embed.wte.weight.data_ptr()  # parts are a copy


def test_depth_job_can_be_cancelled(lm_store):
    from stitchcore.jobs import JobRunner

    store, (a, b, _) = lm_store
    with JobRunner(store) as runner:
        job = runner.submit("lmdepth", DepthSpec(a=a, b=b, modes=("stitch",), heads=("b",), steps=5000, until="steps",
                                                 **QUICK))
        runner.add_listener(lambda s: s.id == job.id and "loss" in s.metrics and runner.cancel(job.id))
        final = runner.wait(job.id, timeout=120)
    assert final.state == "cancelled"
    assert store.lookup(job.id).status == "cancelled"


def test_gpt_recipe_on_an_image_dataset_is_refused(lm_store):
    from stitchcore.experiments.zoo import ZooRecipe

    store, _ = lm_store
    with pytest.raises(DataError, match="language model: train it on a text corpus"):
        run_experiment("zoo", ZooRecipe(arch="gpt", dataset="digits"), store)


# ---------------------------------------------------------------- issue 25: faithful to the GPT-2 report


def test_head_a_stitch_after_the_last_block_is_as_good_as_the_identity(lm_store):
    """At split i = L a head-A stitch is A's stream -> S -> A's head: the identity S gives A itself (penalty 0).
    The old reading (lstsq start fitted to B's stream, a fixed number of steps) scores worse than that."""
    store, (a, b, _) = lm_store
    quick = {"steps": 60, "check_every": 10, "patience": 2, **QUICK}
    new = run_experiment("lmstitch", LMStitchSpec(a=a, b=b, cut_a=2, head="a", **quick), store).record.summary
    assert new["start_from"] == "identity" and new["loss_penalty"] >= -0.002  # A itself, within noise
    held = new["held_out"]
    assert held["converged"] and held["stopped_at"] < 60 and held["checks"][0][0] == 0
    old = LMStitchSpec(a=a, b=b, cut_a=2, head="a", until="steps", start="init", steps=20, **QUICK)
    legacy = run_experiment("lmstitch", old, store).record.summary
    assert legacy["start_from"] == "lstsq" and "held_out" not in legacy and legacy["steps"] == 20
    assert legacy["loss_penalty"] < new["loss_penalty"] - 0.05  # what the project measured before


def test_converged_training_keeps_the_best_held_out_adapter_and_never_reads_validation():
    from stitchcore.lm.train import Convergence, split_tune, train_lm_adapter

    ids = torch.arange(1000)
    fit, tune = split_tune(ids)
    assert len(tune) == 100 and int(fit[-1]) + 1 == int(tune[0])  # the tail of the TRAIN ids, disjoint from fit
    # a held-out score that improves twice, then stalls: stop after `patience` flat checks, keep the best step
    scores = iter([3.0, 2.0, 1.5, 1.5, 1.6, 1.5, 1.4])
    until = Convergence(lambda: next(scores), every=2, patience=3, tol=1e-3)
    torch.manual_seed(0)
    emb = torch.nn.Embedding(50, 8)
    adapter = torch.nn.Linear(8, 8)

    class Tiny(torch.nn.Module):
        def residual(self, x, k):
            return emb(x)

        def finish(self, h, k):
            return h @ emb.weight.T

    losses = train_lm_adapter(Tiny(), 0, adapter, torch.randint(0, 50, (500,)), block_size=8,
                              objective={"task": 1.0}, steps=40, batch_size=4, lr=1e-2, weight_decay=0.0, seed=0,
                              device=torch.device("cpu"), until=until)
    assert [k for k, _ in until.history] == [0, 2, 4, 6, 8, 10]
    assert until.best_step == 4 and until.best == 1.5 and until.stopped_at == len(losses) == 10
    assert until.converged(40)


def test_depth_sweep_merges_read_the_embeddings_tied_to_their_head(lm_store):
    """Split 0 with B's head: with B's (tied) embeddings the merge is B itself; the old reading paired A's
    embeddings with B's tied head.  The curve label names the embeddings."""
    store, (a, b, _) = lm_store
    spec = {"a": a, "b": b, "modes": ("merge",), "heads": ("b",), "splits": (0,), **QUICK}
    tied = run_experiment("lmdepth", DepthSpec(**spec), store).record.summary["points"][0]
    assert tied["layout"][:2] == ["B.wte", "B.wpe"] and tied["embed"] == "b"
    assert tied["loss_penalty"] == 0.0 and tied["label"] == "merge, head B, embed B"
    old = run_experiment("lmdepth", DepthSpec(**spec, embed="a"), store).record.summary["points"][0]
    assert old["layout"][:2] == ["A.wte", "A.wpe"] and old["label"] == "merge, head B, embed A"
    assert old["loss_penalty"] < -0.05


def test_old_lm_spec_dicts_keep_their_ids_and_their_reading(tmp_path):
    """Stored LM runs of store_v1 open (a copy) with the old reading: fixed steps, the init's start, A's embeddings."""
    import shutil

    from stitchcore.experiments import spec_from_record
    from stitchcore.experiments._registry import run_id_for
    from tests.conftest import ROOT

    copy = tmp_path / "store_v1"
    shutil.copytree(ROOT / "tests" / "fixtures" / "store_v1", copy)
    store = Store(copy)
    rec = next(r for r in store.list_runs(kind="lmdepth"))
    spec = spec_from_record(rec)
    assert (spec.until, spec.start, spec.embed) == ("steps", "init", "a")
    assert run_id_for("lmdepth", spec.to_dict()) == rec.id and "until" not in spec.to_dict()
    old = LMStitchSpec(a="x", b="y", until="steps", start="init", steps=200)
    assert not {"until", "start", "check_every", "patience", "tol"} & set(old.to_dict())
    new = DepthSpec(a="x", b="y").to_dict()
    assert (new["until"], new["start"], new["embed"]) == ("converged", "best", "tied")
    assert DepthSpec.from_dict(new) == DepthSpec(a="x", b="y")
    store.close()


def test_cli_merge_takes_the_embedding_and_training_rule(lm_store, capsys):
    from stitchcore.cli.main import main

    store, (a, b, _) = lm_store
    common = ["--eval-windows", "8", "--sample-tokens", "0", "--store", str(store.root), "--json", "--quiet"]
    rc = main(["merge", "--a", a, "--b", b, "--mode", "merge", "--head", "b", "--embed", "a", *common])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["embed"] == "a" and out["points"][0]["label"] == "merge, head B, embed A"
    rc = main(["merge", "--a", a, "--b", b, "--split", "1", "--head", "b", "--embed", "tied", "--dry-run",
               "--store", str(store.root), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["layout"][:2] == ["B.wte", "B.wpe"]
    rc = main(["merge", "--a", a, "--b", b, "--mode", "stitch", "--split", "2", "--head", "a", "--until", "steps",
               "--start", "init", "--steps", "3", *common])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["start_from"] == "lstsq" and out["steps"] == 3 and "until" not in store.lookup(out["run_id"]).spec
