"""Model sources: timm, torchvision, hf, file; offline behaviour; unsafe and broken checkpoints.

No test touches the network: offline tests force offline mode and point the
weight caches at empty temp dirs.
"""

from __future__ import annotations

import os
import pickle
import time

import pytest
import torch
from safetensors.torch import save_file

from stitchcore.models.archs import create_arch
from stitchcore.errors import CheckpointError, RefError, SourceError
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.sources import (
    LoadedModel,
    get_source,
    list_sources,
    load_checkpoint,
    load_model,
    register_source,
    save_checkpoint,
)


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network and empty weight caches (HF hub cache and torch hub dir)."""
    from huggingface_hub import constants

    monkeypatch.setenv("STITCHLAB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    return tmp_path


def _frozen(loaded: LoadedModel) -> bool:
    model = loaded.model
    return not model.training and all(not p.requires_grad for p in model.parameters())


# ---------------------------------------------------------------- timm / torchvision


def test_sources_registered():
    assert {"zoo", "timm", "torchvision", "hf", "file"} <= set(list_sources())


def test_register_source_twice_raises():
    with pytest.raises(ValueError, match="already registered"):
        register_source("timm")(lambda ref, store=None: None)


def test_timm_random_init():
    lm = load_model("timm:resnet18?pretrained=false")
    assert lm.ref == "timm:resnet18?pretrained=false" and _frozen(lm)
    assert lm.input_kind == "image" and lm.input_shape == (3, 224, 224) and lm.num_classes == 1000
    pre = lm.preprocess
    assert pre.size == (224, 224) and pre.channels == 3 and len(pre.mean) == 3 and 0.4 < pre.mean[0] < 0.5
    assert pre.interpolation in ("bilinear", "bicubic")
    assert lm.model(pre(torch.rand(1, 1, 8, 8))).shape == (1, 1000)
    assert lm.meta["arch"] == "timm:resnet18" and lm.meta["weights"] == "random"


def test_timm_options_num_classes_in_chans():
    lm = load_model("timm:resnet18?pretrained=false&num_classes=10&in_chans=1")
    assert lm.num_classes == 10 and lm.preprocess.channels == 1 and len(lm.preprocess.mean) == 1
    assert lm.model(lm.preprocess(torch.rand(2, 1, 8, 8))).shape == (2, 10)


def test_torchvision_random_init():
    lm = load_model("torchvision:resnet18?weights=none")
    assert _frozen(lm) and lm.num_classes == 1000 and lm.input_shape == (3, 224, 224)
    assert lm.preprocess.size == (224, 224) and lm.preprocess.mean == pytest.approx((0.485, 0.456, 0.406))
    assert lm.model(lm.example_input(1)).shape == (1, 1000)


def test_torchvision_num_classes():
    lm = load_model("torchvision:resnet18?weights=none&num_classes=7")
    assert lm.num_classes == 7 and lm.model(lm.example_input(1)).shape == (1, 7)


@pytest.mark.parametrize(
    "ref, err, match",
    [
        ("timm:resnt18?pretrained=false", RefError, "did you mean timm:resnet18"),
        ("timm:resnet18.nosuchtag", RefError, "tv_in1k"),
        ("timm:resnet18?pretrain=false", RefError, "pretrained, num_classes, in_chans"),
        ("timm:resnet18?pretrained=maybe", RefError, "true or false"),
        ("timm:resnet18?pretrained=false&num_classes=ten", RefError, "integer"),
        ("torchvision:resnet181?weights=none", RefError, "torchvision:resnet18"),
        ("torchvision:fasterrcnn_resnet50_fpn", RefError, "classification"),
        ("torchvision:resnet18?weights=V9", RefError, "IMAGENET1K_V1"),
        ("torchvision:resnet18?num_classes=3", RefError, "weights=none&num_classes=3"),
    ],
)
def test_hub_ref_errors(ref, err, match):
    with pytest.raises(err, match=match):
        load_model(ref)


@pytest.mark.parametrize("ext", [".safetensors", ".pth"])
def test_timm_at_file(tmp_path, ext):
    torch.manual_seed(0)
    src = load_model("timm:resnet18?pretrained=false&num_classes=10").model
    path = tmp_path / f"w{ext}"
    if ext == ".safetensors":
        save_file(src.state_dict(), str(path))
    else:
        torch.save(src.state_dict(), path)
    lm = load_model(f"timm:resnet18@file={path}")  # num_classes read from the file's classifier
    x = lm.example_input()
    assert lm.num_classes == 10 and _frozen(lm)
    torch.testing.assert_close(lm.model(x), src(x), rtol=0, atol=0)


def test_torchvision_at_file(tmp_path):
    torch.manual_seed(0)
    src = load_model("torchvision:resnet18?weights=none&num_classes=5").model
    path = tmp_path / "w.pth"
    torch.save({"state_dict": src.state_dict()}, path)
    lm = load_model(f"torchvision:resnet18@file={path}?num_classes=5")
    x = lm.example_input()
    torch.testing.assert_close(lm.model(x), src(x), rtol=0, atol=0)
    assert load_model(f"torchvision:resnet18@file={path}").num_classes == 5  # read from the file, as timm
    with pytest.raises(CheckpointError, match="num_classes"):
        load_model(f"torchvision:resnet18@file={path}?num_classes=3")


def test_at_file_missing(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        load_model(f"timm:resnet18@file={tmp_path}/nope.safetensors")


# ---------------------------------------------------------------- offline


def test_timm_offline_fails_fast_with_fix(offline):
    start = time.monotonic()
    with pytest.raises(SourceError) as err:
        load_model("timm:resnet18")
    assert time.monotonic() - start < 10
    msg = str(err.value)
    assert "could not download pretrained weights for timm:resnet18 (offline?)" in msg
    assert (
        "timm:resnet18@file=/path/to/weights.safetensors" in msg and "timm:resnet18?pretrained=false" in msg
    )


def test_torchvision_offline_fails_fast_with_fix(offline):
    start = time.monotonic()
    with pytest.raises(SourceError, match="@file=.*weights=none"):
        load_model("torchvision:resnet18")
    assert time.monotonic() - start < 10


def test_hf_offline_fails_fast_with_fix(offline):
    start = time.monotonic()
    with pytest.raises(SourceError, match="hf:/path/to/DIR"):
        load_model("hf:stitchlab-test/not-a-model")
    assert time.monotonic() - start < 10


def test_timm_offline_uses_hf_cache(offline):
    """Weights already in the HF cache load with no network."""
    torch.manual_seed(0)
    src = load_model("timm:resnet18?pretrained=false").model
    repo = offline / "hf" / "models--timm--resnet18.a1_in1k"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    save_file(src.state_dict(), str(repo / "snapshots" / commit / "model.safetensors"))
    lm = load_model("timm:resnet18")
    x = lm.example_input(1)
    torch.testing.assert_close(lm.model(x), src(x), rtol=0, atol=0)


def test_torchvision_offline_uses_torch_cache(offline):
    torch.manual_seed(0)
    src = load_model("torchvision:resnet18?weights=none").model
    ckpt = offline / "torch" / "hub" / "checkpoints"
    ckpt.mkdir(parents=True)
    torch.save(src.state_dict(), ckpt / "resnet18-f37072fd.pth")
    lm = load_model("torchvision:resnet18")
    assert lm.meta["weights"] == "pretrained:IMAGENET1K_V1" and len(lm.meta["class_names"]) == 1000
    x = lm.example_input(1)
    torch.testing.assert_close(lm.model(x), src(x), rtol=0, atol=0)


# ---------------------------------------------------------------- hf


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """A tiny random GPT-2 with a BPE tokenizer trained on CPython's docs, saved with save_pretrained."""
    from pydoc_data.topics import topics

    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    text = "".join(topics.values())[:20000]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        [text[i : i + 1000] for i in range(0, len(text), 1000)], vocab_size=300, min_frequency=2
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>")
    tok.add_special_tokens({"eos_token": "<|endoftext|>"})
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=128, vocab_size=len(tok))
    config.bos_token_id = config.eos_token_id = tok.eos_token_id
    model = GPT2LMHeadModel(config).eval()
    path = tmp_path_factory.mktemp("hf") / "tiny-gpt2"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, model


def test_hf_local_dir(hf_dir):
    path, original = hf_dir
    lm = load_model(f"hf:{path}")
    assert lm.input_kind == "tokens" and lm.preprocess is None and _frozen(lm)
    assert lm.num_classes == original.config.vocab_size and lm.input_shape == (64,)
    assert lm.meta["context_length"] == 128 and lm.meta["model_type"] == "gpt2"
    idx = lm.example_input(2)
    assert idx.dtype == torch.long and idx.shape == (2, 64) and int(idx.max()) < lm.num_classes
    logits = lm.model(idx)
    assert isinstance(logits, torch.Tensor) and logits.shape == (2, 64, lm.num_classes)
    with torch.no_grad():
        torch.testing.assert_close(logits, original(idx).logits)
    ids = lm.meta["tokenizer"]("def f(x): return x")["input_ids"]
    assert ids and max(ids) < lm.num_classes


def test_hf_image_classifier_dir(tmp_path):
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        image_size=8,
        patch_size=4,
        num_channels=1,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=3,
    )
    torch.manual_seed(0)
    original = ViTForImageClassification(config).eval()
    original.save_pretrained(tmp_path / "vit")
    lm = load_model(f"hf:{tmp_path / 'vit'}")
    assert lm.input_kind == "image" and lm.num_classes == 3 and lm.input_shape == (1, 8, 8)
    x = lm.example_input()
    with torch.no_grad():
        torch.testing.assert_close(lm.model(x), original(pixel_values=x).logits)


def test_hf_missing_dir(tmp_path):
    with pytest.raises(SourceError, match="no Hugging Face model directory"):
        load_model(f"hf:{tmp_path}/nothing")


def test_hf_dir_without_model(tmp_path):
    with pytest.raises(SourceError, match="save_pretrained"):
        load_model(f"hf:{tmp_path}")


def test_hf_bad_option(hf_dir):
    with pytest.raises(RefError, match="task"):
        load_model(f"hf:{hf_dir[0]}?mode=x")


def _copy_of(hf_dir, where, *, config=None, weights: str = "safetensors"):
    """A copy of the tiny GPT-2 folder with its config.json edited (``config``) and its weights as safetensors or as
    ``pytorch_model.bin`` (a state dict, or any object)."""
    import json
    import shutil

    path, model = hf_dir
    shutil.copytree(path, where)
    cfg = json.loads((where / "config.json").read_text())
    (where / "config.json").write_text(json.dumps({**cfg, **(config or {})}))
    if weights != "safetensors":
        (where / "model.safetensors").unlink()
        torch.save(model.state_dict() if weights == "tensors" else weights, where / "pytorch_model.bin")
    return where


class _RunsCode:
    """Unpickling it would run a shell command (what a malicious pytorch_model.bin does)."""

    def __reduce__(self):
        import os

        return (os.system, ("echo ran > /dev/null",))


def test_hf_folders_that_would_run_their_own_code_are_refused_in_one_line(hf_dir, tmp_path, monkeypatch):
    import builtins

    def no_prompt(*_a, **_k):
        raise AssertionError("transformers asked on the terminal whether to run the folder's code")

    monkeypatch.setattr(builtins, "input", no_prompt)
    for model_type in ("gpt2", "mymodel"):  # a known type with an auto_map too: the map would be followed
        remote = _copy_of(hf_dir, tmp_path / model_type, config={
            "model_type": model_type, "auto_map": {"AutoModelForCausalLM": "modeling_mine.MyModel"}})  # fmt: skip
        (remote / "modeling_mine.py").write_text("raise SystemExit('the folder ran its own code')\n")
        with pytest.raises(SourceError, match=r"ships its own model code \(AutoModelForCausalLM") as err:
            load_model(f"hf:{remote}")
        assert "\n" not in str(err.value)
    pickled = _copy_of(hf_dir, tmp_path / "pickled", weights={"w": _RunsCode()})
    with pytest.raises(SourceError, match="pytorch_model.bin holds Python objects besides tensors") as err:
        load_model(f"hf:{pickled}")
    assert "\n" not in str(err.value)
    tensors = load_model(f"hf:{_copy_of(hf_dir, tmp_path / 'bin', weights='tensors')}")  # tensors only: loads
    with torch.no_grad():
        idx = tensors.example_input(1)
        torch.testing.assert_close(tensors.model(idx), load_model(f"hf:{hf_dir[0]}").model(idx))


# ---------------------------------------------------------------- file: round trips


def _same(a: torch.nn.Module, b: torch.nn.Module, x: torch.Tensor) -> None:
    torch.testing.assert_close(a.eval()(x), b(x), rtol=0, atol=0)


@pytest.mark.parametrize("wrap", ["plain", "state_dict", "model", "module_prefix"])
def test_file_pt_roundtrip(tmp_path, wrap):
    torch.manual_seed(0)
    model = create_arch("cnn", num_classes=5)
    sd = model.state_dict()
    obj = {
        "plain": sd,
        "state_dict": {"state_dict": sd, "epoch": 3},
        "model": {"model": sd},
        "module_prefix": {f"module.{k}": v for k, v in sd.items()},
    }[wrap]
    torch.save(obj, tmp_path / "m.pt")
    lm = load_model(f"file:{tmp_path}/m.pt?arch=zoo:cnn&num_classes=5")
    assert lm.num_classes == 5 and lm.input_shape == (1, 8, 8) and _frozen(lm)
    assert lm.preprocess == Preprocess(size=(8, 8), channels=1, mean=(0.0,), std=(1.0,))
    assert lm.meta["arch"] == "zoo:cnn" and lm.meta["arch_kwargs"]["num_classes"] == 5
    _same(model, lm.model, lm.example_input())


def test_file_pt_arch_kwargs_parsed(tmp_path):
    model = create_arch("resnet", blocks=(2, 1, 1, 1), width=8)
    torch.save(model.state_dict(), tmp_path / "r.pth")
    lm = load_model(f"file:{tmp_path}/r.pth?arch=zoo:resnet&blocks=2,1,1,1&width=8")
    _same(model, lm.model, lm.example_input())


def test_file_pt_with_recorded_arch(tmp_path):
    model = create_arch("mlp", width=16)
    torch.save(
        {"arch": "mlp", "arch_kwargs": model.arch_kwargs, "state_dict": model.state_dict()}, tmp_path / "m.pt"
    )
    lm = load_model(f"file:{tmp_path}/m.pt")
    _same(model, lm.model, lm.example_input())


def test_save_checkpoint_safetensors_roundtrip(tmp_path):
    model = create_arch("cnn", in_chans=3, image_size=16, num_classes=4)
    pre = Preprocess(size=(16, 16), channels=3, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    path = save_checkpoint(
        model, tmp_path / "sub" / "c.safetensors", meta={"preprocess": pre.to_dict(), "dataset": "cifar10"}
    )
    assert sorted(os.listdir(path.parent)) == ["c.safetensors"]  # no temp file left
    lm = load_model(f"file:{path}")  # no ?arch= needed
    assert lm.preprocess == pre and lm.dataset == "cifar10" and lm.input_shape == (3, 16, 16)
    _same(model, lm.model, lm.example_input())
    again = load_checkpoint(path, ref="zoo:test-model")
    assert again.ref == "zoo:test-model"
    _same(model, again.model, lm.example_input())


def test_save_checkpoint_mean_std_meta(tmp_path):
    model = create_arch("mlp")
    path = save_checkpoint(model, tmp_path / "m.safetensors", meta={"mean": [0.3], "std": [0.2]})
    lm = load_model(f"file:{path}")
    assert lm.preprocess.mean == (0.3,) and lm.preprocess.std == (0.2,)


def test_gpt_tied_weights_roundtrip(tmp_path):
    model = create_arch("gpt", vocab_size=33, n_layer=2, block_size=32)
    path = save_checkpoint(model, tmp_path / "g.safetensors")
    lm = load_model(f"file:{path}")
    assert lm.input_kind == "tokens" and lm.input_shape == (32,) and lm.num_classes == 33
    assert lm.model.lm_head.weight is lm.model.wte.weight
    _same(model, lm.model, lm.example_input())


def test_file_with_timm_and_torchvision_arch(tmp_path):
    torch.manual_seed(0)
    timm_model = load_model("timm:resnet18?pretrained=false&num_classes=3").model
    torch.save(timm_model.state_dict(), tmp_path / "t.pt")
    lm = load_model(f"file:{tmp_path}/t.pt?arch=timm:resnet18&num_classes=3")
    assert lm.num_classes == 3 and lm.preprocess.size == (224, 224)
    _same(timm_model, lm.model, lm.example_input(1))
    tv_model = load_model("torchvision:resnet18?weights=none&num_classes=3").model
    save_file(tv_model.state_dict(), str(tmp_path / "v.safetensors"))
    lm = load_model(f"file:{tmp_path}/v.safetensors?arch=torchvision:resnet18&num_classes=3")
    _same(tv_model, lm.model, lm.example_input(1))


def test_example_input_deterministic():
    lm = load_model("timm:resnet18?pretrained=false&num_classes=2")
    assert torch.equal(lm.example_input(3), lm.example_input(3)) and lm.example_input(3).shape == (
        3,
        3,
        224,
        224,
    )


def test_zoo_scheme_dispatches_to_zoo_module(monkeypatch):
    calls = []

    def fake(ref, store):
        calls.append((str(ref), store))
        return load_checkpoint_free_model()

    from stitchcore.models.sources import zoo
    from stitchcore.models.sources._registry import SOURCES

    assert get_source("zoo") is zoo.load_zoo_model
    monkeypatch.setitem(SOURCES._entries, "zoo", fake)
    lm = load_model("zoo:cnn-digits-s0", store="STORE")
    assert calls == [("zoo:cnn-digits-s0", "STORE")] and _frozen(lm)


def load_checkpoint_free_model() -> LoadedModel:
    from stitchcore.models.sources import wrap_arch_model

    model = create_arch("cnn").train()
    return wrap_arch_model(model, "zoo:cnn-digits-s0", dataset="digits")


# ---------------------------------------------------------------- file: bad inputs


class _Evil:
    """Unpickling this would run code that creates a marker file."""

    marker = ""

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("protocol", [2, 4])
def test_pickle_with_code_is_refused_and_not_run(tmp_path, protocol):
    marker = tmp_path / "PWNED"
    evil = _Evil()
    evil.marker = str(marker)
    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"weight": evil}, protocol=protocol))
    with pytest.raises(CheckpointError, match="refused for safety"):
        load_model(f"file:{tmp_path}/evil.pt?arch=zoo:cnn")
    assert not marker.exists()


def test_whole_module_pickle_refused(tmp_path):
    torch.save(create_arch("mlp"), tmp_path / "whole.pt")
    with pytest.raises(CheckpointError, match="state_dict"):
        load_model(f"file:{tmp_path}/whole.pt?arch=zoo:mlp")


@pytest.mark.parametrize("ext", [".pt", ".safetensors"])
def test_truncated(tmp_path, ext):
    model = create_arch("cnn")
    path = tmp_path / f"m{ext}"
    if ext == ".pt":
        torch.save(model.state_dict(), path)
    else:
        save_checkpoint(model, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load_model(f"file:{path}?arch=zoo:cnn")


@pytest.mark.parametrize("ext", [".pt", ".safetensors"])
def test_text_file_is_not_a_checkpoint(tmp_path, ext):
    (tmp_path / f"x{ext}").write_text("hello, this is not a checkpoint\n")
    with pytest.raises(CheckpointError, match="not a"):
        load_model(f"file:{tmp_path}/x{ext}?arch=zoo:cnn")


@pytest.mark.parametrize(
    "obj, match", [([1, 2, 3], "holds a list"), ({"a": 1}, "not a state dict"), ({}, "empty")]
)
def test_not_a_state_dict(tmp_path, obj, match):
    torch.save(obj, tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match=match):
        load_model(f"file:{tmp_path}/x.pt?arch=zoo:cnn")


def test_missing_dir_and_extension(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        load_model(f"file:{tmp_path}/nope.pt?arch=zoo:cnn")
    with pytest.raises(CheckpointError, match="hf:"):
        load_model(f"file:{tmp_path}")
    (tmp_path / "m.npz").write_bytes(b"x")
    with pytest.raises(CheckpointError, match=".safetensors"):
        load_model(f"file:{tmp_path}/m.npz")


def test_keys_mismatch_lists_keys(tmp_path):
    torch.save(create_arch("cnn", num_classes=5).state_dict(), tmp_path / "m.pt")
    with pytest.raises(CheckpointError) as err:  # a head size given in the ref is taken as given
        load_model(f"file:{tmp_path}/m.pt?arch=zoo:cnn&num_classes=10")
    msg = str(err.value)
    assert (
        "2 shape mismatches" in msg
        and "head.weight: file [5, 32] vs model [10, 32]" in msg
        and "\n" not in msg
    )
    torch.save(create_arch("mlp").state_dict(), tmp_path / "mlp.pt")
    with pytest.raises(CheckpointError, match=r"missing keys \(block1.conv.weight, .*unexpected keys \(fc3"):
        load_model(f"file:{tmp_path}/mlp.pt?arch=zoo:cnn")


def test_bare_pt_needs_arch(tmp_path):
    torch.save(create_arch("cnn").state_dict(), tmp_path / "m.pt")
    with pytest.raises(CheckpointError, match=r"\?arch=zoo:cnn"):
        load_model(f"file:{tmp_path}/m.pt")
    with pytest.raises(RefError, match=r"write \?arch=zoo:cnn"):
        load_model(f"file:{tmp_path}/m.pt?arch=cnn")
    with pytest.raises(RefError, match="unknown arch"):
        load_model(f"file:{tmp_path}/m.pt?arch=keras:cnn")
    with pytest.raises(RefError, match="did you mean num_classes"):
        load_model(f"file:{tmp_path}/m.pt?arch=zoo:cnn&num_clases=10")


def test_save_checkpoint_wants_safetensors(tmp_path):
    with pytest.raises(CheckpointError, match="m.safetensors"):
        save_checkpoint(create_arch("mlp"), tmp_path / "m.pt")
