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

A folder (or a hub repo) is input like any other, read before transformers sees it: its config.json is bounded
(size, nesting, every size a positive whole number, layers and experts few enough to count), may map no class to
code of its own (``auto_map`` anywhere in it: StitchLab never runs a model's code), and the model it describes
is built on the ``meta`` device first, so one that would need more memory than the machine has is refused before
any of it is allocated.  Weights are read with safetensors or ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from stitchcore.errors import RefError, SourceError
from stitchcore.models.loaded import LoadedModel, freeze, seeded_init
from stitchcore.models.memory import check_fits
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import ModelRef, parse_seed
from stitchcore.models.sources._hub import check_folder_files, host_reachable, read_json_config, refuse_seed
from stitchcore.models.sources._registry import register_source

__all__ = ["HFCausalLM", "HFImageClassifier", "load_hf"]

logger = logging.getLogger(__name__)

_OPTIONS = ("task", "seed")  # query options this source understands
_TASKS = ("causal-lm", "image-classification")
_EXAMPLE_T = 64  # example sequence length: short enough for a CPU, capped by the model's context
_MAX_LAYERS = 1024  # blocks a config may stack (the deepest released models have ~130): each is built to count it
_MAX_EXPERTS = 4096  # experts per mixture-of-experts layer (the most in a released model: 2048)
_MAX_SIDE = 8192  # pixels on an image model's input side (released classifiers take at most ~1000)
_LAYER_KEYS = frozenset({"num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
                         "decoder_layers", "num_encoder_layers", "num_decoder_layers"})  # fmt: skip
_EXPERT_KEYS = frozenset({"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"})
_SIZE_KEYS = frozenset({"vocab_size", "hidden_size", "n_embd", "d_model", "intermediate_size", "n_inner",
                        "num_attention_heads", "n_head", "n_positions", "max_position_embeddings",
                        "num_channels", "image_size", "patch_size"})  # fmt: skip  # positive whole numbers
_LISTED = frozenset({"image_size", "patch_size", "num_attention_heads", "intermediate_size"})  # or lists of them


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


def _side(value: Any, src: str) -> int:
    """An image side from a config or processor (an int, ``[H, W]``, ``{"height": H}``, ``{"shortest_edge": S}``),
    checked: a positive whole number of at most ``_MAX_SIDE`` pixels."""
    if not isinstance(value, (int, list, tuple)) and value is not None:  # a dict, or transformers' SizeDict
        get = value.get if isinstance(value, dict) else lambda key: getattr(value, key, None)
        value = get("height") or get("shortest_edge") or get("longest_edge")
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_SIDE:
        raise SourceError(f"refused hf:{src}: its image size {str(value)[:40]!r} is not a whole number of 1 to "
                          f"{_MAX_SIDE} pixels; fix image_size in config.json (or the size in "
                          "preprocessor_config.json)")  # fmt: skip
    return value


def _image_preprocess(src: str, config: Any, local_only: bool) -> Preprocess:
    chans = int(getattr(config, "num_channels", 3) or 3)
    size = getattr(config, "image_size", 224)
    mean, std = (0.5,), (0.5,)
    try:
        from transformers import AutoImageProcessor

        proc = AutoImageProcessor.from_pretrained(src, local_files_only=local_only, trust_remote_code=False)
        size = getattr(proc, "crop_size", None) or getattr(proc, "size", None) or size
        mean = tuple(float(v) for v in proc.image_mean)
        std = tuple(float(v) for v in proc.image_std)
    except Exception as e:  # noqa: BLE001 - no preprocessor_config.json: fall back to the config
        logger.warning("hf %s: no image processor (%s); using size %s and mean/std 0.5", src, e, size)
    if len(mean) not in (1, chans) or len(std) not in (1, chans) or not all(map(math.isfinite, mean + std)) \
            or min(std) <= 0:  # fmt: skip
        logger.warning("hf %s: image processor mean %s / std %s do not fit; using 0.5", src, mean, std)
        mean, std = (0.5,), (0.5,)
    side = _side(size, src)
    return Preprocess(size=(side, side), channels=chans, mean=mean, std=std)


def _walk(config: Any) -> list[tuple[str, Any]]:
    """Every ``(key, value)`` of every object nested in ``config``, inside lists too (no recursion: the depth is
    whatever the JSON parser allowed)."""
    found, stack = [], [config]
    while stack:
        item = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, value in pairs:
            if isinstance(key, str):
                found.append((key, value))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return found


def _declared_code(config: dict[str, Any]) -> list[str]:
    """What a config maps to code of its own: the names under any ``auto_map`` at any depth (a sub-config's
    ``text_config.auto_map`` too, whatever its form: object, list or text); [] for none."""
    names: list[str] = []
    for key, value in _walk(config):
        if key == "auto_map" and value:
            names += sorted(map(str, value)) if isinstance(value, (dict, list)) else [str(value)]
    return names


def _refuse_own_code(src: str, declared: list[str]) -> None:
    """A SourceError for a model that ships its own Python (``auto_map``): StitchLab never runs it."""
    if declared:
        shown = ", ".join(declared[:3]) + (f" and {len(declared) - 3} more" if len(declared) > 3 else "")
        raise SourceError(f"refused hf:{src}: it ships its own model code ({shown[:200]} in config.json's "
                          "auto_map), and StitchLab never runs a model's own code; use a model transformers "
                          "itself defines, saved with save_pretrained()")  # fmt: skip


def _check_sizes(config: dict[str, Any], src: str) -> None:
    """SourceError for a size that no model has: not a positive whole number, or more layers / experts than
    ``_MAX_LAYERS`` / ``_MAX_EXPERTS`` (each is built once on the meta device to count the model's memory)."""
    for key, value in _walk(config):
        if key not in _SIZE_KEYS | _LAYER_KEYS | _EXPERT_KEYS or value is None:
            continue
        values = value if key in _LISTED and isinstance(value, list) else [value]
        most = _MAX_LAYERS if key in _LAYER_KEYS else _MAX_EXPERTS if key in _EXPERT_KEYS else None
        for v in values:
            whole = isinstance(v, int) and not isinstance(v, bool)
            if not whole or v < (0 if most else 1) or (most is not None and v > most):
                rule = f"0 to {most:,}" if most else "at least 1"
                raise SourceError(f"refused hf:{src}: config.json's {key} is {str(value)[:40]}, not a whole "
                                  f"number {rule}; fix it or save the model again with save_pretrained()")  # fmt: skip


def _config_file(src: str, local: bool, local_only: bool) -> Path:
    """The config.json transformers would read: the folder's, or the hub repo's (downloaded into the HF cache)."""
    if local:
        return Path(src) / "config.json"
    from transformers.utils import cached_file

    return Path(cached_file(src, "config.json", local_files_only=local_only))


def _check_buildable(auto: Any, config: Any, src: str) -> None:
    """Refuse a config whose model this machine cannot hold, counted on the meta device before anything is
    allocated (weights and buffers, as float32 at least: half precision is widened on CPU); one transformers
    cannot build at all is refused too, with its reason."""
    import transformers

    try:
        with torch.device("meta"):
            model = auto.from_config(config, trust_remote_code=False)
    except Exception as e:  # the config is input: whatever transformers makes of it, one line
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise SourceError(f"could not build the model config.json describes in hf:{src} ({reason}); fix "
                          f"config.json or save the model again with transformers {transformers.__version__}'s "
                          "save_pretrained()") from e  # fmt: skip
    tensors = [*model.parameters(), *model.buffers()]
    need = sum(t.numel() * (max(4, t.element_size()) if t.is_floating_point() else t.element_size())
               for t in tensors)
    check_fits(f"hf:{src}", need, "cpu", "its config.json asks for a larger model than this machine holds")


@contextlib.contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers' own progress bars ("Loading weights") off inside the block: a refusal right after a load
    stays one line on stderr, and the app's pages and the CLI show their own progress."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def _vocab(config: Any, hf: nn.Module) -> int:
    """Logits per position: the output embedding's rows, else the config's vocab_size."""
    out = hf.get_output_embeddings() if hasattr(hf, "get_output_embeddings") else None
    rows = getattr(out, "out_features", None) or getattr(getattr(out, "weight", None), "shape", (None,))[0]
    return int(rows or config.get_text_config().vocab_size)


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
    what = f"refused hf:{ref.name}"

    import transformers

    try:
        config_path = _config_file(src, local, local_only)
    except (OSError, ValueError) as e:
        raise _fail(ref.name, local, offline, e) from e
    check_folder_files(config_path.parent, what, "save the model again with save_pretrained()")
    if config_path.exists() or not local:  # none in a folder: transformers says what a folder needs
        raw = read_json_config(config_path, what)
        _refuse_own_code(src, _declared_code(raw))
        _check_sizes(raw, src)
    try:
        config = transformers.AutoConfig.from_pretrained(src, local_files_only=local_only, trust_remote_code=False)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:  # the config.json is input
        if "trust_remote_code" in str(e) or "custom code" in str(e):  # a hub repo that ships its own code
            _refuse_own_code(src, ["its config"])
        raise _fail(ref.name, local, offline, e) from e
    _refuse_own_code(src, _declared_code({"auto_map": getattr(config, "auto_map", None)}))
    if task is None:
        archs = getattr(config, "architectures", None) or []
        task = (
            "image-classification"
            if any(isinstance(a, str) and a.endswith("ForImageClassification") for a in archs)
            else "causal-lm"
        )
    auto = (
        transformers.AutoModelForCausalLM
        if task == "causal-lm"
        else transformers.AutoModelForImageClassification
    )
    _check_buildable(auto, config, src)
    pre = _image_preprocess(src, config, local_only) if task == "image-classification" else None
    try:
        with seeded_init(seed), _no_progress_bars():  # tensors the checkpoint lacks are drawn here
            hf, info = auto.from_pretrained(src, local_files_only=local_only, output_loading_info=True,
                                            trust_remote_code=False, weights_only=True)  # fmt: skip
    except pickle.UnpicklingError as e:  # a pytorch_model.bin holding more than tensors: refused by weights_only
        raise SourceError(f"refused hf:{ref.name}: its pytorch_model.bin holds Python objects besides tensors, "
                          "and loading it could run code; give weights saved as safetensors "
                          "(model.save_pretrained(DIR)) or as a pickle of tensors only") from e  # fmt: skip
    except RuntimeError as e:  # transformers' report of tensors whose shapes differ from the config's
        mismatched = "mismatched" in str(e)
        raise _fail(ref.name, local, offline, ValueError("its weights do not fit the sizes in its config.json")
                    if mismatched else e) from e  # fmt: skip
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
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
    if pre is not None:
        id2label = getattr(config, "id2label", None) or {}
        meta["class_names"] = [str(id2label[i]) for i in sorted(id2label)]
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
        num_classes=_vocab(config, hf),
        meta=meta,
    )
