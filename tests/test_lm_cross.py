"""Issue 43: a GPT trained with a byte-level BPE (``zoo train --tokenizer bpe:N``) and the stitch between a
character GPT and a BPE GPT, scored in bits per byte beside B alone, a shuffled alignment and a random-init A.

The outcomes here could have come out otherwise: an alignment one A token too early (B's token reads the
character before its last) makes the closed-form stitch clearly worse, and so does the shuffled alignment, on
two small models that learned something (12 LM epochs each, ~10 s).
"""

from __future__ import annotations

import json

import pytest
import torch

from stitchcore.data.text import load_text
from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.lm import LM_ADAPTER, LMStitchSpec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.lm.cross import (
    CrossBatch,
    b_alone,
    bits_per_byte,
    build_cross_stitch,
    cross_pairs,
    cross_windows,
    shuffled_alignment,
)
from stitchcore.lm.parts import codec_of, lm_parts, make_token_adapter
from stitchcore.models.sources import load_model
from stitchcore.stitching.fits import fit_adapter
from stitchcore.store.results import Store
from tests.lm_helpers import TINY

CPU = torch.device("cpu")


def _cli_json(argv: list[str], capsys) -> dict:
    """The CLI's one JSON object for ``argv`` (exit code 0)."""
    from stitchcore.cli.main import main

    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _recipe(tokenizer: str, epochs: int = 12) -> ZooRecipe:
    return ZooRecipe(arch="gpt", dataset="pydoc", seed=0, optimizer="adamw", epochs=epochs, batch_size=16,
                     arch_kwargs=TINY, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(store, char-GPT ref, BPE-GPT ref): two 2-block GPTs of width 32 on pydoc."""
    store = Store(tmp_path_factory.mktemp("cross") / "store")
    refs = [run_experiment("zoo", _recipe(t), store).record.summary["ref"] for t in ("char", "bpe:300")]
    return store, *refs


def test_a_bpe_gpt_trains_stores_its_tokenizer_and_round_trips(pair):
    store, char_ref, bpe_ref = pair
    assert "bpe300" in bpe_ref and "bpe" not in char_ref  # a model of other tokens has a name of its own
    m = load_model(bpe_ref, store=store)
    codec = codec_of(m)
    assert codec.kind == "bpe" and codec.size == 300 == m.num_classes
    text = load_text("pydoc")[-2000:]
    ids, spans = codec.spans(text)
    assert codec.decode(ids.tolist()) == text
    assert spans[0, 0] == 0 and spans[-1, 1] == len(text.encode()) and bool((spans[1:, 0] == spans[:-1, 1]).all())
    assert len(ids) < 0.8 * len(text)  # it merges: fewer tokens than characters (0.73 at 300 tokens)
    assert codec_of(load_model(char_ref, store=store)).kind == "chars"


def test_the_tokenizer_field_keeps_old_ids_and_is_checked():
    assert "tokenizer" not in ZooRecipe(arch="gpt", dataset="pydoc").to_dict()  # char: the id of before
    assert ZooRecipe(arch="gpt", dataset="pydoc", tokenizer="bpe:512").to_dict()["tokenizer"] == "bpe:512"
    assert ZooRecipe.from_dict({"arch": "gpt", "dataset": "pydoc"}).tokenizer == "char"
    with pytest.raises(StitchError, match="char or bpe:N"):
        ZooRecipe(arch="gpt", dataset="pydoc", tokenizer="wordpiece")
    with pytest.raises(StitchError, match="257 to 65,536"):
        ZooRecipe(arch="gpt", dataset="pydoc", tokenizer="bpe:12")
    with pytest.raises(StitchError, match="for a language model"):
        ZooRecipe(arch="cnn", dataset="digits", tokenizer="bpe:512")


def _one_earlier(x: CrossBatch) -> CrossBatch:
    """A wrong aligner: each of B's tokens reads A's token one before the right one."""
    return CrossBatch(x.a_ids, x.b_ids, (x.first - 1).clamp(min=-1), (x.last - 1).clamp(min=-1), x.targets,
                      x.target_bytes)


def _closed_form_bpb(a, b, i, j, fits, evals, view) -> float:
    adapter = make_token_adapter(LM_ADAPTER, a, i, b, j)
    model = build_cross_stitch(a, b, i, j, adapter)
    fit_adapter(adapter.inner, cross_pairs(a, b, i, j, [view(x) for x in fits], "last", CPU))
    return bits_per_byte(model, view(evals), CPU)["bits_per_byte"]


def test_a_wrong_alignment_makes_the_stitch_clearly_worse(pair):
    store, char_ref, bpe_ref = pair
    a, b = (lm_parts(load_model(r, store=store)) for r in (char_ref, bpe_ref))
    raw = load_text("pydoc")
    cut = int(len(raw) * 0.9)
    contexts = (a.context, b.context)
    evals = cross_windows(raw[cut:], a.codec, b.codec, 64, 32, contexts)
    fits = [cross_windows(raw[:cut], a.codec, b.codec, 32, 32, contexts, seed=k) for k in range(8)]
    alone = bits_per_byte(b_alone(b), evals, CPU)["bits_per_byte"]
    for i, j in ((1, 1), (2, 1)):
        right = _closed_form_bpb(a, b, i, j, fits, evals, lambda x: x)
        early = _closed_form_bpb(a, b, i, j, fits, evals, _one_earlier)
        shuffled = _closed_form_bpb(a, b, i, j, fits, evals, lambda x: shuffled_alignment(x, 3))
        assert alone < right  # B's own tokens are still the best input to B's top
        assert early > right + 0.25 and shuffled > right + 0.25, (i, j, right, early, shuffled)


def test_the_shuffled_alignment_never_reads_ahead():
    g = torch.Generator().manual_seed(0)
    last = torch.sort(torch.randint(0, 50, (4, 20), generator=g), dim=1).values
    x = CrossBatch(torch.zeros(4, 50, dtype=torch.int64), torch.zeros(4, 20, dtype=torch.int64), last, last,
                   torch.zeros(4, 20, dtype=torch.int64), torch.ones(4, dtype=torch.float64))
    y = shuffled_alignment(x, seed=1)
    assert bool((y.last <= x.last).all()) and not torch.equal(y.last, x.last)


def test_the_lmstitch_verb_across_tokenizers_gives_bits_per_byte_and_controls(pair, capsys):
    from stitchcore.cli.main import main

    store, char_ref, bpe_ref = pair
    argv = ["lmstitch", "--a", char_ref, "--b", bpe_ref, "--cut-a", "1", "--cut-b", "1", "--steps", "40",
            "--eval-windows", "48", "--store", str(store.root), "--json", "--quiet"]
    out = _cli_json(argv, capsys)
    assert out["kind"] == "lmstitch" and out["mode"] == "cross"
    lo, hi = out["bits_per_byte_ci"]
    assert lo <= out["bits_per_byte"] <= hi and out["b_bits_per_byte"] < out["bits_per_byte"]
    assert set(out["controls"]) == {"shuffled_alignment", "random_a"}
    for tag, control in out["controls"].items():
        assert control["bits_per_byte"] > out["bits_per_byte"], tag
        assert control["stitch_better"] is True and control["stitch_minus_control_ci"][1] < 0, tag
        assert control["steps"] >= 1  # trained on the same budget as the stitch
    assert out["verdict"].startswith("carries A's information")
    assert out["layout"][:3] == ["A.wte", "A.wpe", "A.h.0"] and "align(last)" in out["layout"]
    assert main(argv[:-2]) == 0  # the text form: one row per model, the verdict last
    text = capsys.readouterr().out
    assert "control: a random-init A" in text and "B alone" in text and "(cached)" in text


def test_cross_tokenizer_refusals_name_the_fix(pair):
    store, char_ref, bpe_ref = pair
    for fields, words in (({"head": "a"}, "B's head"), ({"objective": "match"}, "task")):
        spec = LMStitchSpec(a=char_ref, b=bpe_ref, cut_a=1, cut_b=1, steps=0, **fields)
        with pytest.raises(StitchError, match=words):
            run_experiment("lmstitch", spec, store)
    assert not [r for r in store.list_runs() if r.kind == "lmstitch" and r.status == "failed"]  # refused before


def test_the_alignment_field_keeps_old_lmstitch_ids():
    old = {"a": "zoo:x", "b": "zoo:y", "cut_a": 1}
    assert "alignment" not in LMStitchSpec.from_dict(old).to_dict()
    assert LMStitchSpec(a="zoo:x", b="zoo:y", cut_a=1, alignment="mean").to_dict()["alignment"] == "mean"


def test_a_depth_sweep_across_tokenizers_draws_bits_per_byte_by_depth_and_every_cell(pair, capsys):
    from stitchcore.cli.main import main
    from stitchcore.experiments.lm import DepthSpec
    from stitchcore.experiments.lm.cross_depth import cross_depth_points
    from stitchcore.report.figures import FIGURES

    store, char_ref, bpe_ref = pair
    argv = ["merge", "--a", char_ref, "--b", bpe_ref, "--steps", "0", "--heatmap", "--eval-windows", "48",
            "--store", str(store.root), "--json", "--quiet"]
    out = _cli_json(argv, capsys)
    assert out["mode"] == "cross_depth" and [p["split"] for p in out["points"]] == [0, 1, 2]
    assert set(out["skipped"]) == {"merge, head a", "merge, head b", "stitch, head a"}  # each with its reason
    for p in out["points"]:
        lo, hi = p["bits_per_byte_ci"]
        assert lo <= p["bits_per_byte"] <= hi and p["bpb_penalty"] > 0  # B's own tokens are the best input
        assert set(p["controls"]) == {"shuffled_alignment", "random_a"}
    deeper = [p for p in out["points"] if p["split"] >= 1]  # past the embeddings A's stream carries the text
    assert all(p["controls"]["shuffled_alignment"]["stitch_better"] for p in deeper)
    heat = out["heatmap"]
    assert len(heat["values"]) == 3 and len(heat["values"][0]) == 3 and all(v > 0 for r in heat["values"] for v in r)
    rec = store.lookup(out["run_id"])
    assert [p["split"] for p in cross_depth_points(store.series(rec.id))] == [0, 1, 2]  # what the live view reads
    assert [f.name for f in FIGURES["lmdepth"](rec, store)] == ["bpb-by-depth", "bpb-heatmap"]
    assert main(argv[:-2]) == 0
    assert "bits per byte above B alone" in capsys.readouterr().out
    with pytest.raises(StitchError, match="mode stitch and head b"):
        run_experiment("lmdepth", DepthSpec(a=char_ref, b=bpe_ref, modes=("merge",), steps=0), store)


def test_an_hf_gpt2_with_a_fast_tokenizer_takes_the_same_path(pair, tmp_path):
    """A Hugging Face GPT-2 (random weights, its own BPE saved beside it) as B: its offsets give the byte spans."""
    from tests.lm_helpers import save_tiny_gpt2

    store, char_ref, _ = pair
    hf = f"hf:{save_tiny_gpt2(tmp_path / 'gpt2', seed=0)}"
    spec = LMStitchSpec(a=char_ref, b=hf, cut_a=1, cut_b=1, steps=0, eval_windows=16)
    s = run_experiment("lmstitch", spec, store).record.summary
    assert s["mode"] == "cross" and s["tokenizers"]["b"].startswith("tokenizer of")
    assert s["eval_bytes"] > 0 and s["bits_per_byte"] > 0
    assert {"bits_per_byte", "stitch_better"} <= set(s["controls"]["shuffled_alignment"])
    assert "bits_per_byte" in s["controls"]["random_a"]  # A (a zoo GPT) has its random twin


def test_a_token_property_probe_is_carried_across_tokenizers(pair, capsys):
    """The transfer kind on text: 'inside a string literal' read on B's own tokens; the random adapter at chance."""

    store, char_ref, bpe_ref = pair
    argv = ["transfer", "--a", char_ref, "--b", bpe_ref, "--cut-a", "h.1", "--cut-b", "h.1", "--max-train", "128",
            "--max-test", "96", "--store", str(store.root), "--json", "--quiet"]
    out = _cli_json(argv, capsys)
    assert out["property"] == "inside a string literal" and out["chance"] == 0.5 and out["cut_a"] == "h.1"
    for side in ("transferred", "native", "random_adapter"):
        lo, hi = out[f"{side}_ci"]
        assert lo <= out[side] <= hi, side
    lo, hi = out["random_adapter_ci"]
    assert lo <= 0.5 <= hi + 1e-9  # through a random adapter: chance
    assert out["transferred_ci"][0] > 0.52 and out["above_random_ci"][0] > 0  # through the fitted one: above it
    assert out["verdict"].startswith("carried") and out["steering"] == "for image classes only"
