"""Hostile model files where the sources look for them (issue 45, item 2): weight caches and model folders.

A pickle planted in the torch hub or Hugging Face cache, a model folder whose config.json maps code of its own
(however nested or spelled), asks for terabytes, sizes of zero or text, is not JSON, is a gigabyte or a FIFO:
each is refused by ``python -m stitchcore cuts REF`` with exit 2 and one line ``error: ...`` naming the fix,
nothing planted runs (its marker file is never written), and the store's files are byte for byte as they were.

One table, run in-process through ``stitchcore.cli.main.main`` (offline, caches in temporary folders), plus one
real process for the case the issue names.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tests.conftest import copy_store, run_cli, store_hash

COMMIT = "0" * 40  # the snapshot a planted Hugging Face cache entry is filed under
TV_FILE = "resnet18-f37072fd.pth"  # the torch hub cache name of torchvision:resnet18's DEFAULT weights
TIMM_HF = "models--timm--resnet18.a1_in1k"  # the HF cache folder of timm:resnet18's pretrained weights
TIMM_URL_FILE = "resnet18_a1_0-d63eafa0.pth"  # ... and its torch hub cache name (the cfg's url)


class Planted:
    """Unpickling it opens (creates) ``marker``: what a malicious checkpoint's code would do first."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def store_root(trained_store, tmp_path_factory) -> Path:
    """A copy of the session store that only this module touches (its hash is compared around every case)."""
    src, _ = trained_store
    root = tmp_path_factory.mktemp("hostile-sources") / "store"
    copy_store(src.root, root)
    return root


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> Path:
    """A tiny random GPT-2 folder written by save_pretrained (config.json and model.safetensors, no tokenizer)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_embd=8, n_head=2, n_positions=16, vocab_size=50, bos_token_id=0,
                        eos_token_id=0)  # fmt: skip
    path = tmp_path_factory.mktemp("hf") / "tiny-gpt2"
    GPT2LMHeadModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory) -> Path:
    """A tiny random ViT image classifier folder (8x8 pixels, 3 classes)."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(image_size=8, patch_size=4, num_channels=1, hidden_size=16, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=32, num_labels=3)  # fmt: skip
    path = tmp_path_factory.mktemp("hf") / "tiny-vit"
    ViTForImageClassification(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def timm_folder(tmp_path_factory) -> Path:
    """A timm ``local-dir:`` folder: resnet18 with 5 classes, written by timm's save_for_hf."""
    import timm
    from timm.models._hub import save_for_hf

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("timm") / "resnet18"
    save_for_hf(timm.create_model("resnet18", pretrained=False, num_classes=5), str(path), safe_serialization=True)
    return path


@pytest.fixture
def caches(tmp_path, monkeypatch) -> Path:
    """No network; empty torch hub and Hugging Face caches under ``tmp_path`` (``torch/``, ``hf/``)."""
    from huggingface_hub import constants

    monkeypatch.setenv("STITCHLAB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    return tmp_path


def assert_refused(code: int, out: str, err: str, fix: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, err[-3000:])
    assert "Traceback" not in err and out == "", err[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), err[-3000:]
    assert re.search(fix, lines[0]), f"{lines[0]!r} does not say {fix!r}"


# ---------------------------------------------------------------- what each case plants


def _torch_cache(base: Path, name: str = TV_FILE) -> Path:
    folder = base / "torch" / "hub" / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def _hf_cache(base: Path, repo_dir: str) -> Path:
    """A snapshot folder of ``repo_dir`` in the planted HF cache, with refs/main pointing at it."""
    repo = base / "hf" / repo_dir
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True, exist_ok=True)
    return snap


def _folder(src: Path, base: Path, config: dict | None = None, raw: bytes | None = None) -> Path:
    """A copy of the model folder ``src`` with its config.json edited (merged with ``config``) or replaced."""
    dst = base / "model"
    shutil.copytree(src, dst)
    if raw is not None:
        (dst / "config.json").write_bytes(raw)
    elif config is not None:
        cfg = json.loads((dst / "config.json").read_text())
        (dst / "config.json").write_text(json.dumps({**cfg, **config}))
    return dst


def _own_code(src: Path, base: Path, marker: Path, config: dict) -> Path:
    """A folder whose config maps a class to its own modeling_mine.py, which would write the marker."""
    dst = _folder(src, base, config)
    (dst / "modeling_mine.py").write_text(f"open({str(marker)!r}, 'w')\n")
    return dst


def _sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no disk (a hole): the size is what a reader sees first."""
    with open(path, "wb") as fh:
        fh.truncate(size)


def tv_at_file_fifo(base, marker, **_):
    os.mkfifo(base / "weights.pth")
    return f"torchvision:resnet18@file={base / 'weights.pth'}"


def tv_pickle(base, marker, **_):
    _torch_cache(base).write_bytes(pickle.dumps({"fc.weight": Planted(marker)}, protocol=2))
    return "torchvision:resnet18"


def tv_pickle_zip(base, marker, **_):
    torch.save({"fc.weight": Planted(marker)}, _torch_cache(base))
    return "torchvision:resnet18"


def tv_garbage(base, marker, **_):
    _torch_cache(base).write_bytes(b"PK\x03\x04 not really a zip")
    return "torchvision:resnet18"


def tv_list(base, marker, **_):
    torch.save([torch.zeros(2)], _torch_cache(base))
    return "torchvision:resnet18"


def tv_wrong_shapes(base, marker, **_):
    import torchvision

    torch.save(torchvision.models.resnet18(num_classes=3).state_dict(), _torch_cache(base))
    return "torchvision:resnet18"


def tv_fifo(base, marker, **_):
    os.mkfifo(_torch_cache(base))  # reading it would block for ever
    return "torchvision:resnet18"


def timm_hf_pickle(base, marker, **_):
    torch.save({"fc.weight": Planted(marker)}, _hf_cache(base, TIMM_HF) / "pytorch_model.bin")
    return "timm:resnet18"


def timm_url_pickle(base, marker, **_):
    _torch_cache(base, TIMM_URL_FILE).write_bytes(pickle.dumps({"fc.weight": Planted(marker)}, protocol=4))
    return "timm:resnet18"


def timm_hf_bad_safetensors(base, marker, **_):
    (_hf_cache(base, TIMM_HF) / "model.safetensors").write_bytes(b"\xff" * 64)
    return "timm:resnet18"


def timm_hf_wrong_shapes(base, marker, **_):
    save_file({"fc.weight": torch.zeros(3, 7)}, str(_hf_cache(base, TIMM_HF) / "model.safetensors"))
    return "timm:resnet18"


def hf_hub_pickle(base, marker, tiny_gpt2, **_):
    snap = _hf_cache(base, "models--someone--tiny-gpt2")
    shutil.copy(tiny_gpt2 / "config.json", snap / "config.json")
    torch.save({"transformer.wte.weight": Planted(marker)}, snap / "pytorch_model.bin")
    return "hf:someone/tiny-gpt2"


def hf_hub_automap(base, marker, tiny_gpt2, **_):
    snap = _hf_cache(base, "models--someone--tiny-gpt2")
    cfg = json.loads((tiny_gpt2 / "config.json").read_text())
    cfg["text_config"] = {"auto_map": {"AutoModelForCausalLM": "modeling_mine.Mine"}}
    (snap / "config.json").write_text(json.dumps(cfg))
    (snap / "modeling_mine.py").write_text(f"open({str(marker)!r}, 'w')\n")
    shutil.copy(tiny_gpt2 / "model.safetensors", snap / "model.safetensors")
    return "hf:someone/tiny-gpt2"


def hf_dir_pickle(base, marker, tiny_gpt2, **_):
    dst = _folder(tiny_gpt2, base)
    (dst / "model.safetensors").unlink()
    torch.save({"transformer.wte.weight": Planted(marker)}, dst / "pytorch_model.bin")
    return f"hf:{dst}"


def hf_automap_nested(base, marker, tiny_gpt2, **_):
    cfg = {"text_config": {"auto_map": {"AutoModelForCausalLM": "modeling_mine.Mine"}}}
    return f"hf:{_own_code(tiny_gpt2, base, marker, cfg)}"


def hf_automap_list(base, marker, tiny_gpt2, **_):
    return f"hf:{_own_code(tiny_gpt2, base, marker, {'auto_map': ['modeling_mine.Mine', {'x': 1}]})}"


def hf_automap_text(base, marker, tiny_gpt2, **_):
    return f"hf:{_own_code(tiny_gpt2, base, marker, {'auto_map': 'modeling_mine.Mine'})}"


def hf_config(**config):
    def plant(base, marker, tiny_gpt2, **_):
        return f"hf:{_folder(tiny_gpt2, base, config)}"

    return plant


def hf_raw(raw: bytes):
    def plant(base, marker, tiny_gpt2, **_):
        return f"hf:{_folder(tiny_gpt2, base, raw=raw)}"

    return plant


def hf_config_gigabyte(base, marker, tiny_gpt2, **_):
    dst = _folder(tiny_gpt2, base)
    _sparse(dst / "config.json", 1 << 30)
    return f"hf:{dst}"


def hf_config_fifo(base, marker, tiny_gpt2, **_):
    dst = _folder(tiny_gpt2, base)
    (dst / "config.json").unlink()
    os.mkfifo(dst / "config.json")
    return f"hf:{dst}"


def hf_tokenizer_gigabyte(base, marker, tiny_gpt2, **_):
    dst = _folder(tiny_gpt2, base)
    _sparse(dst / "tokenizer.json", 1 << 30)
    return f"hf:{dst}"


def hf_weights_fifo(base, marker, tiny_gpt2, **_):
    dst = _folder(tiny_gpt2, base)
    (dst / "model.safetensors").unlink()
    os.mkfifo(dst / "model.safetensors")  # opening it for reading would wait for a writer for ever
    return f"hf:{dst}"


def hf_weights_device(base, marker, tiny_gpt2, **_):
    dst = _folder(tiny_gpt2, base)
    (dst / "model.safetensors").unlink()
    (dst / "model.safetensors").symlink_to("/dev/zero")  # endless zeros
    return f"hf:{dst}"


def hf_hub_cache_fifo(base, marker, tiny_gpt2, **_):
    snap = _hf_cache(base, "models--someone--tiny-gpt2")
    shutil.copy(tiny_gpt2 / "config.json", snap / "config.json")
    os.mkfifo(snap / "model.safetensors")
    return "hf:someone/tiny-gpt2"


def hf_vit_huge_crop(base, marker, tiny_vit, **_):
    dst = _folder(tiny_vit, base)
    (dst / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": 10**9, "width": 10**9},
        "image_mean": [0.5], "image_std": [0.5]}))  # fmt: skip
    return f"hf:{dst}"


def timm_cfg(**edit):
    """A timm local-dir folder with ``edit`` merged into its config.json (``model_args`` / ``pretrained_cfg``
    merged into those objects)."""

    def plant(base, marker, timm_folder, **_):
        dst = _folder(timm_folder, base)
        cfg = json.loads((dst / "config.json").read_text())
        for key, value in edit.items():
            cfg[key] = {**cfg[key], **value} if isinstance(cfg.get(key), dict) and isinstance(value, dict) else value
        (dst / "config.json").write_text(json.dumps(cfg))
        return f"timm:local-dir:{dst}"

    return plant


def timm_dir_raw(raw: bytes):
    def plant(base, marker, timm_folder, **_):
        return f"timm:local-dir:{_folder(timm_folder, base, raw=raw)}"

    return plant


def timm_dir_fifo(base, marker, timm_folder, **_):
    dst = _folder(timm_folder, base)
    for f in dst.glob("*.safetensors"):
        f.unlink()
    os.mkfifo(dst / "model.safetensors")
    return f"timm:local-dir:{dst}"


def timm_dir_pickle(base, marker, timm_folder, **_):
    dst = _folder(timm_folder, base)
    for f in dst.glob("*.safetensors"):
        f.unlink()
    torch.save({"fc.weight": Planted(marker)}, dst / "pytorch_model.bin")
    return f"timm:local-dir:{dst}"


DELETE = r"delete that file so they download again"
# (id, what it plants -> the ref, what the one line must say: a regex naming the fix)
# fmt: off
CASES: list = [
    # -- planted cache files: refused as they are read, nothing of them runs
    ("tv-cache-pickle", tv_pickle, rf"{TV_FILE} holds pickled Python objects.*refused for safety; {DELETE}"),
    ("tv-cache-pickle-zip", tv_pickle_zip, rf"holds pickled Python objects.*it names .*open.*{DELETE}"),
    ("tv-cache-garbage", tv_garbage, rf"{TV_FILE} is truncated or not a PyTorch checkpoint.*{DELETE}"),
    ("tv-cache-list", tv_list, rf"is not a checkpoint: it holds a list.*{DELETE}"),
    ("tv-cache-wrong-shapes", tv_wrong_shapes, rf"{TV_FILE} do not fit torchvision:resnet18 .*{DELETE}"),
    ("tv-cache-fifo", tv_fifo, rf"{TV_FILE} is no regular file; {DELETE}"),
    ("timm-hf-cache-pickle", timm_hf_pickle, rf"pytorch_model.bin holds pickled Python objects.*{DELETE}"),
    ("timm-torch-cache-pickle", timm_url_pickle, rf"{TIMM_URL_FILE} holds pickled Python objects.*{DELETE}"),
    ("timm-hf-cache-not-safetensors", timm_hf_bad_safetensors, rf"not a safetensors file.*{DELETE}"),
    ("timm-hf-cache-wrong-shapes", timm_hf_wrong_shapes, rf"model.safetensors do not fit timm:resnet18 .*{DELETE}"),
    ("hf-hub-cache-pickle", hf_hub_pickle, r"pytorch_model.bin holds Python objects besides tensors.*safetensors"),
    ("hf-hub-cache-auto-map", hf_hub_automap, r"ships its own model code \(AutoModelForCausalLM"),
    ("hf-dir-pickle", hf_dir_pickle, r"pytorch_model.bin holds Python objects besides tensors.*safetensors"),
    # -- an @file= that is no file
    ("tv-at-file-fifo", tv_at_file_fifo, r"weights.pth is no regular file"),
    # -- hf: folders: code of their own, however the config spells it
    ("hf-auto-map-nested", hf_automap_nested, r"ships its own model code \(AutoModelForCausalLM.*never runs"),
    ("hf-auto-map-list", hf_automap_list, r"ships its own model code \(modeling_mine.Mine.*never runs"),
    ("hf-auto-map-text", hf_automap_text, r"ships its own model code \(modeling_mine.Mine.*never runs"),
    # -- hf: folders: sizes no model has, refused before anything is allocated
    ("hf-vocab-1e12", hf_config(vocab_size=10**12), r"needs about \d+ TB of memory .*larger model than this machine"),
    ("hf-positions-1e12", hf_config(n_positions=10**12), r"needs about \d+ TB of memory"),
    ("hf-hidden-1e6", hf_config(n_embd=10**6), r"needs about \d+ TB of memory"),
    ("hf-layers-1e9", hf_config(n_layer=10**9), r"n_layer is 1000000000, not a whole number 0 to 1,024"),
    ("hf-num-hidden-layers-1e9", hf_config(num_hidden_layers=10**9), r"num_hidden_layers is 1000000000"),
    ("hf-nested-layers-1e9", hf_config(text_config={"num_hidden_layers": 10**9}), r"num_hidden_layers is 1000000000"),
    ("hf-hidden-0", hf_config(n_embd=0), r"n_embd is 0, not a whole number at least 1; fix it"),
    ("hf-hidden-negative", hf_config(n_embd=-8), r"n_embd is -8, not a whole number at least 1"),
    ("hf-hidden-text", hf_config(n_embd="wide"), r"n_embd is wide, not a whole number"),
    ("hf-vocab-float", hf_config(vocab_size=50.5), r"vocab_size is 50.5, not a whole number"),
    ("hf-vocab-true", hf_config(vocab_size=True), r"vocab_size is True, not a whole number"),
    ("hf-positions-0", hf_config(n_positions=0), r"n_positions is 0, not a whole number at least 1"),
    ("hf-heads-uneven", hf_config(n_head=3), r"could not build the model config.json describes .*divisible"),
    ("hf-dtype-int", hf_config(dtype="int8"), r"could not build the model config.json describes"),
    ("hf-id2label-list", hf_config(id2label=["a", "b"]), r"could not load the Hugging Face model in .*save_pretrained"),
    ("hf-seed-but-no-tensor-drawn", lambda base, marker, tiny_gpt2, **_: f"hf:{_folder(tiny_gpt2, base)}?seed=3",
     r"seed= in .* is for random weights, but .* holds every tensor"),
    ("hf-model-type-unknown", hf_config(model_type="bogus"), r"model type `bogus`.*save_pretrained\(\)"),
    # -- hf: folders: a config.json that is no config
    ("hf-config-array", hf_raw(b"[1, 2]"), r"config.json holds a JSON array, not an object; give the config.json"),
    ("hf-config-null", hf_raw(b"null"), r"config.json holds a JSON null, not an object"),
    ("hf-config-not-json", hf_raw(b"{'model_type': 'gpt2'"), r"config.json is not valid JSON \(.*\); give the"),
    ("hf-config-nan", hf_raw(b'{"model_type": "gpt2", "n_embd": NaN}'), r"not valid JSON \(NaN is no JSON number\)"),
    ("hf-config-binary", hf_raw(b"\xff\xfe\x00\x01"), r"config.json is not valid JSON \('utf-8' codec"),
    ("hf-config-deep", hf_raw(b"[" * 200_000 + b"]" * 200_000), r"config.json is nested too deeply"),
    ("hf-config-deep-object", hf_raw(b'{"a":' * 200_000 + b"1" + b"}" * 200_000), r"nested too deeply"),
    ("hf-config-gigabyte", hf_config_gigabyte, r"config.json is 1,073,741,824 bytes, more than the 16,777,216"),
    ("hf-config-fifo", hf_config_fifo, r"its config.json is no regular file \(a FIFO, socket or device\)"),
    ("hf-tokenizer-gigabyte", hf_tokenizer_gigabyte, r"its tokenizer.json is 1,073,741,824 bytes"),
    ("hf-weights-fifo", hf_weights_fifo, r"its model.safetensors is no regular file \(a FIFO, socket or device\)"),
    ("hf-weights-device-link", hf_weights_device, r"its model.safetensors is no regular file"),
    ("hf-hub-cache-fifo", hf_hub_cache_fifo, r"refused hf:someone/tiny-gpt2: its model.safetensors is no regular"),
    ("hf-image-crop-1e9", hf_vit_huge_crop, r"image size '1000000000' is not a whole number of 1 to 8192 pixels"),
    # -- timm local-dir: folders
    ("timm-dir-pickle", timm_dir_pickle, r"weights file holds pickled Python objects.*model.safetensors"),
    ("timm-dir-fifo", timm_dir_fifo, r"its model.safetensors is no regular file.*save_for_hf"),
    ("timm-dir-layers-1e9", timm_cfg(model_args={"layers": [10**9, 2, 2, 2]}), r"model_args layers is \[1000000000"),
    ("timm-dir-classes-1e12", timm_cfg(model_args={"num_classes": 10**12}), r"needs about \d+ TB of memory"),
    ("timm-dir-no-architecture", timm_cfg(architecture=5), r"architecture '5' is no timm model; give a folder"),
    ("timm-dir-cfg-list", timm_cfg(pretrained_cfg=[1]), r"pretrained_cfg is not an object"),
    ("timm-dir-input-1e9", timm_cfg(pretrained_cfg={"input_size": [3, 10**9, 10**9]}), r"input_size .*sides of 1 to"),
    ("timm-dir-mean-text", timm_cfg(pretrained_cfg={"mean": "abc"}), r"mean is 'abc', not a list of finite numbers"),
    ("timm-dir-std-0", timm_cfg(pretrained_cfg={"std": [0, 0, 0]}), r"std is '\[0, 0, 0\]', not positive numbers"),
    ("timm-dir-config-array", timm_dir_raw(b"[]"), r"config.json holds a JSON array, not an object"),
]
# fmt: on
NAMES = [c[0] for c in CASES]


@pytest.mark.parametrize(("name", "plant", "fix"), CASES, ids=NAMES)
def test_a_planted_or_hostile_model_is_one_line_and_runs_nothing(name, plant, fix, caches, store_root, tiny_gpt2,
                                                                 tiny_vit, timm_folder, capsys):  # fmt: skip
    marker = caches / "PLANTED-CODE-RAN"
    ref = plant(caches, marker, tiny_gpt2=tiny_gpt2, tiny_vit=tiny_vit, timm_folder=timm_folder)
    before = store_hash(store_root)
    code, out, err = run_cli(["cuts", ref], store_root, capsys)
    assert not marker.exists(), "the planted file's code ran"
    assert_refused(code, out, err, fix)
    assert store_hash(store_root) == before, "a refused model must leave the store's files as they were"


def test_the_table_covers_caches_and_folders():
    assert len(NAMES) == len(set(NAMES)) and len(NAMES) >= 15
    for group in ("tv-cache-", "timm-hf-cache-", "timm-torch-cache-", "hf-hub-cache-", "hf-auto-map-", "hf-config-",
                  "timm-dir-"):  # fmt: skip
        assert any(n.startswith(group) for n in NAMES), group


def test_the_planted_caches_still_load_when_they_hold_tensors(caches, tiny_gpt2):
    """The same places, holding what a hub writes there: loaded (the refusals above are about the files)."""
    import torchvision

    from stitchcore.models.sources import load_model

    torch.manual_seed(0)
    src = torchvision.models.resnet18()
    torch.save(src.state_dict(), _torch_cache(caches))
    x = torch.randn(1, 3, 32, 32)
    torch.testing.assert_close(load_model("torchvision:resnet18").model(x), src.eval()(x), rtol=0, atol=0)
    snap = _hf_cache(caches, "models--someone--tiny-gpt2")
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_gpt2 / name, snap / name)
    assert load_model("hf:someone/tiny-gpt2").num_classes == 50


def test_the_library_refuses_fifos_too(tmp_path):
    """What the app reads goes through the same readers as the CLI: a FIFO as a checkpoint or a cache file is
    refused at once (opening it would wait for a writer for ever)."""
    from stitchcore.errors import CheckpointError
    from stitchcore.models.sources import read_checkpoint
    from stitchcore.models.sources.checkpoint import read_hub_weights

    os.mkfifo(tmp_path / "w.pt")
    with pytest.raises(CheckpointError, match="no regular file"):
        read_checkpoint(tmp_path / "w.pt")
    with pytest.raises(CheckpointError, match=f"no regular file; {DELETE}"):
        read_hub_weights(tmp_path / "w.pt", "torchvision:resnet18")


def test_python_m_stitchcore_cuts_torchvision_never_runs_a_planted_cache_pickle(tmp_path, store_root):
    """The issue's case as typed in a shell: a pickle at $TORCH_HOME/hub/checkpoints/resnet18-f37072fd.pth."""
    marker = tmp_path / "PLANTED-CODE-RAN"
    tv_pickle(tmp_path, marker)
    env = {**os.environ, "TORCH_HOME": str(tmp_path / "torch"), "STITCHLAB_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    before = store_hash(store_root)
    p = subprocess.run([sys.executable, "-m", "stitchcore", "cuts", "torchvision:resnet18", "--store",
                        str(store_root)], check=False, capture_output=True, text=True, env=env, timeout=300,
                       cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    assert not marker.exists(), "the planted pickle ran"
    assert_refused(p.returncode, p.stdout, p.stderr, rf"{TV_FILE} holds pickled Python objects.*{DELETE}")
    assert store_hash(store_root) == before
