"""``hf:NAME`` models through transformers: causal LMs first, image classifiers too.

Forms::

    hf:gpt2                      hub id (download, or the local HF cache when offline)
    hf:/path/to/dir              a save_pretrained() directory (no network)
    hf:gpt2?task=causal-lm       force the task (causal-lm | image-classification)
    hf:/dir?seed=3               seed of the tensors the checkpoint lacks (default 0)

The transformers module is kept as ``.hf`` inside a small wrapper whose
``forward`` returns the logits tensor, so every source hands out
``model(x) -> logits``; a separate cut-splitter walks ``.hf``'s structure.

transformers initialises at random every tensor the checkpoint lacks (a classifier head on a base
model's checkpoint, say).  The model is built under its own RNG seeded ``seed`` (default 0, left out of
the canonical ref), so those tensors are the same in every process; ``meta["random_tensors"]`` names
them.  ``seed=`` on a checkpoint that holds every tensor changes nothing and is refused.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from pathlib import Path
from typing import Any

import torch
from torch import nn

from stitchcore.errors import RefError, SourceError
from stitchcore.models.loaded import LoadedModel, freeze, seeded_init
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import ModelRef, parse_seed
from stitchcore.models.sources._hub import host_reachable, refuse_seed
from stitchcore.models.sources._registry import register_source

__all__ = ["HFCausalLM", "HFImageClassifier", "load_hf"]

logger = logging.getLogger(__name__)

_OPTIONS = ("task", "seed")  # query options this source understands
_TASKS = ("causal-lm", "image-classification")
_EXAMPLE_T = 64  # example sequence length: short enough for a CPU, capped by the model's context


class HFCausalLM(nn.Module):
    """Wraps a transformers causal LM: idx [B, T] long -> logits [B, T, vocab]."""

    def __init__(self, hf: nn.Module) -> None:
        super().__init__()
        self.hf = hf  # the transformers PreTrainedModel, unchanged

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """[B, T] -> [B, T, V]."""
        return self.hf(input_ids=idx, use_cache=False, return_dict=True).logits


class HFImageClassifier(nn.Module):
    """Wraps a transformers image classifier: pixels [B, C, H, W] -> logits [B, num_labels]."""

    def __init__(self, hf: nn.Module) -> None:
        super().__init__()
        self.hf = hf  # the transformers PreTrainedModel, unchanged

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C, H, W] -> [B, num_labels]."""
        return self.hf(pixel_values=x, return_dict=True).logits


def _is_local(name: str) -> bool:
    return name.startswith(("/", ".", "~")) or os.path.isdir(os.path.expanduser(name))


def _fail(name: str, local: bool, offline: bool, err: Exception) -> SourceError:
    reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
    if local:
        return SourceError(
            f"could not load the Hugging Face model in {name} ({reason}); "
            "it needs config.json and weights from save_pretrained()"
        )
    where = "not in the local Hugging Face cache and the hub is unreachable (offline?)" if offline else reason
    return SourceError(
        f"could not load hf:{name}: {where}. Download it where there is network "
        f"(huggingface-cli download {name} --local-dir DIR) and use hf:/path/to/DIR"
    )


def _float32(model: nn.Module) -> nn.Module:
    if any(p.dtype in (torch.float16, torch.bfloat16) for p in model.parameters()):
        model = model.float()  # half precision is slow or unsupported on CPU
    return model


def _image_preprocess(src: str, config: Any, local_only: bool) -> Preprocess:
    chans = int(getattr(config, "num_channels", 3) or 3)
    size = getattr(config, "image_size", 224)
    mean, std = (0.5,), (0.5,)
    try:
        from transformers import AutoImageProcessor

        proc = AutoImageProcessor.from_pretrained(src, local_files_only=local_only, trust_remote_code=False)
        size_cfg = getattr(proc, "crop_size", None) or getattr(proc, "size", None) or {}
        size = size_cfg.get("height") or size_cfg.get("shortest_edge") or size
        mean = tuple(float(v) for v in proc.image_mean)
        std = tuple(float(v) for v in proc.image_std)
    except Exception as e:  # noqa: BLE001 - no preprocessor_config.json: fall back to the config
        logger.warning("hf %s: no image processor (%s); using size %s and mean/std 0.5", src, e, size)
    side = int(size if isinstance(size, int) else size[0])
    return Preprocess(size=(side, side), channels=chans, mean=mean, std=std)


def _declared_code(src: str) -> list[str]:
    """What a local model folder's config.json maps to code of its own (``auto_map``: class -> module.Class),
    read as JSON before transformers sees the folder; [] for none (or no readable config: transformers says)."""
    try:
        config = json.loads((Path(src) / "config.json").read_text())
    except (OSError, ValueError):
        return []
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    return sorted(auto_map) if isinstance(auto_map, dict) else []


def _refuse_own_code(src: str, declared: list[str]) -> None:
    """A SourceError for a model that ships its own Python (``auto_map``): StitchLab never runs it."""
    if declared:
        raise SourceError(f"refused hf:{src}: it ships its own model code ({', '.join(declared)} in config.json's "
                          "auto_map), and StitchLab never runs a model's own code; use a model transformers "
                          "itself defines, saved with save_pretrained()")  # fmt: skip


@register_source("hf")
def load_hf(ref: ModelRef, store: Any = None) -> LoadedModel:
    """Load ``hf:HUB_ID`` or ``hf:/local/dir`` as a causal LM (or image classifier)."""
    for key, _ in ref.params:
        if key not in _OPTIONS:
            raise RefError(f"unknown option {key!r} in '{ref}'; hf: refs take {', '.join(_OPTIONS)}")
    task = ref.param("task")
    seed = parse_seed(ref)
    if task is not None and task not in _TASKS:
        raise RefError(f"unknown task {task!r} in '{ref}'; use ?task= one of {', '.join(_TASKS)}")
    local = _is_local(ref.name)
    src = str(Path(ref.name).expanduser()) if local else ref.name
    if local and not os.path.isdir(src):
        raise SourceError(
            f"no Hugging Face model directory at {src}; give a directory written by save_pretrained()"
        )
    offline = not local and not host_reachable("huggingface.co")
    local_only = local or offline

    if local:
        _refuse_own_code(src, _declared_code(src))
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(src, local_files_only=local_only, trust_remote_code=False)
    except (OSError, ValueError) as e:
        if "trust_remote_code" in str(e) or "custom code" in str(e):  # a hub repo that ships its own code
            _refuse_own_code(src, ["its config"])
        raise _fail(ref.name, local, offline, e) from e
    _refuse_own_code(src, sorted(getattr(config, "auto_map", None) or {}))
    if task is None:
        archs = getattr(config, "architectures", None) or []
        task = (
            "image-classification"
            if any(a.endswith("ForImageClassification") for a in archs)
            else "causal-lm"
        )
    auto = (
        transformers.AutoModelForCausalLM
        if task == "causal-lm"
        else transformers.AutoModelForImageClassification
    )
    try:
        with seeded_init(seed):  # tensors the checkpoint lacks are drawn here
            hf, info = auto.from_pretrained(src, local_files_only=local_only, output_loading_info=True,
                                            trust_remote_code=False)  # fmt: skip
    except pickle.UnpicklingError as e:  # a pytorch_model.bin holding more than tensors: refused by weights_only
        raise SourceError(f"refused hf:{ref.name}: its pytorch_model.bin holds Python objects besides tensors, "
                          "and loading it could run code; give weights saved as safetensors "
                          "(model.save_pretrained(DIR)) or as a pickle of tensors only") from e  # fmt: skip
    except (OSError, ValueError) as e:
        raise _fail(ref.name, local, offline, e) from e
    drawn = sorted({*info.get("missing_keys", ()), *(k[0] if isinstance(k, tuple) else k
                                                     for k in info.get("mismatched_keys", ()))})  # fmt: skip
    if not drawn:
        refuse_seed(ref, f"{ref.name} holds every tensor of its model: none is drawn at random")
    hf = _float32(hf)
    meta: dict[str, Any] = {"arch": f"hf:{config.model_type}", "model_type": config.model_type, "task": task}
    if drawn:
        logger.info("hf %s: %d tensors not in the checkpoint, drawn with seed %d", src, len(drawn), seed)
        meta.update(init_seed=seed, random_tensors=drawn)
    if task == "image-classification":
        pre = _image_preprocess(src, config, local_only)
        id2label = getattr(config, "id2label", None) or {}
        meta["class_names"] = [id2label[i] for i in sorted(id2label)]
        return LoadedModel(
            ref=str(ref),
            model=freeze(HFImageClassifier(hf)),
            input_kind="image",
            input_shape=(pre.channels, *pre.size),
            preprocess=pre,
            num_classes=int(config.num_labels),
            meta=meta,
        )
    try:
        meta["tokenizer"] = transformers.AutoTokenizer.from_pretrained(src, local_files_only=local_only,
                                                                       trust_remote_code=False)  # fmt: skip
    except Exception as e:  # noqa: BLE001 - a model without tokenizer files still takes token ids
        logger.warning(
            "hf %s: no tokenizer (%s); meta['tokenizer'] is None", src, (str(e).splitlines() or [""])[0]
        )
        meta["tokenizer"] = None
    context = (
        getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None) or _EXAMPLE_T
    )
    meta["context_length"] = int(context)
    return LoadedModel(
        ref=str(ref),
        model=freeze(HFCausalLM(hf)),
        input_kind="tokens",
        input_shape=(min(_EXAMPLE_T, int(context)),),
        preprocess=None,
        num_classes=int(config.vocab_size),
        meta=meta,
    )
