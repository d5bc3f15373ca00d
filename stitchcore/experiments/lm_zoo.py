"""Zoo recipes for the small GPTs: train on a text corpus, store with its vocabulary.

The recipe's ``tokenizer`` says what a token is: ``char`` (one character; the vocabulary is the corpus's
characters, stored as ``vocab``) or ``bpe:N`` (a byte-level BPE of N tokens learned on the training part of
the corpus only, stored as ``bpe``, its tokenizer JSON, in the summary and in the checkpoint's metadata).

Called by the ``zoo`` experiment for architectures whose input is tokens, so the run keeps
kind ``zoo`` and ``zoo:gpt-pydoc-s0`` resolves through the store like any zoo model.
The recipe's ``dataset`` is a corpus name (``pydoc``, ``tinyshakespeare``, ``file:PATH``).

One LM "epoch" is :data:`STEPS_PER_EPOCH` optimiser steps of random windows (a char corpus
has no natural epoch); the default recipe (20 epochs, batch 64, 4 blocks of width 64)
reaches a validation loss around 1.5-1.7 nats per character on pydoc in a few CPU minutes.
Learning rates when the recipe leaves them unset: AdamW 3e-3, SGD (momentum 0.9) 0.5,
with 5% linear warm-up, cosine decay to 0 and gradient clipping at 1.0.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from stitchcore.data.text import CharVocab, char_splits, list_texts, lm_batches, load_text
from stitchcore.data.tokenize import BPEVocab, parse_tokenizer
from stitchcore.errors import DataError
from stitchcore.experiments._registry import RunContext
from stitchcore.experiments.estimate import (
    Estimate, EstimateContext, calibrated, estimate_from, ms, per_step, timed, where,
)  # fmt: skip
from stitchcore.experiments.zoo_recipe import ZooRecipe, check_data_files
from stitchcore.lm.evaluate import VAL_FRACTION, eval_windows, lm_loss, sample_text
from stitchcore.lm.parts import TokenCodec
from stitchcore.models.archs import create_arch
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.sources.checkpoint import save_checkpoint
from stitchcore.stitching.evaluate import count_params
from stitchcore.stitching.train import check_finite, make_optimizer

__all__ = ["Corpus", "EVAL_WINDOWS", "LM_DEFAULT_LR", "STEPS_PER_EPOCH", "estimate_lm_zoo", "lm_train_step", "train_lm_zoo", "untrained_lm"]

log = logging.getLogger(__name__)

STEPS_PER_EPOCH = 50  # optimiser steps per recipe epoch
LM_DEFAULT_LR = {"adamw": 3e-3, "sgd": 0.5}  # measured on pydoc: SGD needs a large step to move at all
EVAL_WINDOWS = 128  # validation windows scored after every epoch (and at the end)
CHECKPOINT = "model.safetensors"


def _lr_at(step: int, total: int, base: float) -> float:
    warm = max(1, total // 20)
    if step < warm:
        return base * (step + 1) / warm
    return base * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


class Corpus:
    """A recipe's text as token ids: (train ids int64 [N], val ids int64 [M]), its codec, and what the summary
    and the checkpoint keep of the vocabulary (``{"vocab": chars}`` or ``{"tokenizer": "bpe:N", "bpe": JSON}``)."""

    def __init__(self, recipe: ZooRecipe) -> None:
        text = load_text(recipe.dataset)
        self.text = text
        bpe_size = parse_tokenizer(recipe.tokenizer)
        if bpe_size is None:  # characters: the vocabulary of the whole corpus, as before
            vocab = CharVocab.from_text(text)
            self.train, self.val = char_splits(text, vocab)
            self.codec = TokenCodec("chars", vocab.size, "", vocab.encode, vocab.decode)
            self.keep: dict[str, str] = {"vocab": vocab.chars}
            return
        cut = int(len(text) * (1 - VAL_FRACTION))  # the same characters as an LM run's validation text
        bpe = BPEVocab.train(text[:cut], bpe_size)  # learned on the training text only
        self.train, self.val = bpe.ids(text[:cut]), bpe.ids(text[cut:])
        self.codec = TokenCodec("bpe", bpe.size, "", bpe.ids, bpe.decode)
        self.keep = {"tokenizer": recipe.tokenizer, "bpe": bpe.to_json()}

    @property
    def size(self) -> int:
        """The vocabulary size V (the model's vocab_size)."""
        return self.codec.size


def untrained_lm(recipe: ZooRecipe) -> LoadedModel:
    """A GPT recipe's model with fresh (unseeded) weights and its corpus's vocabulary, shaped as the
    trained model will load (the estimator times it before it is trained)."""
    corpus = Corpus(recipe)
    model = create_arch(recipe.arch, **{"vocab_size": corpus.size, **recipe.arch_kwargs}).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    block = model.config.block_size
    return LoadedModel(ref=f"zoo:{recipe.short_name()}?init=random", model=model, input_kind="tokens",
                       input_shape=(block,), preprocess=None, num_classes=corpus.size, dataset=recipe.dataset,
                       meta={"arch": recipe.arch, "arch_kwargs": model.arch_kwargs, **corpus.keep,
                             "context_length": block})


def lm_train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                  lr: float, step: int) -> float:
    """One optimiser step of a char-GPT on windows ``x`` [B, T] with next tokens ``y`` [B, T]; returns the loss.

    Also what :mod:`stitchcore.experiments.estimate` times to calibrate an LM recipe.
    """
    for g in opt.param_groups:
        g["lr"] = lr
    model.train()
    logits = model(x)  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    check_finite(loss, step)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def train_lm_zoo(recipe: ZooRecipe, ctx: RunContext, name: str) -> dict:
    """Train a char-GPT from ``recipe`` on its corpus; returns the zoo summary (ref ``zoo:{name}``)."""
    if recipe.dataset not in list_texts() and not recipe.dataset.startswith("file:"):
        raise DataError(f"{recipe.arch!r} is a language model: train it on a text corpus ({', '.join(list_texts())} "
                        f"or file:PATH), not on {recipe.dataset!r}")
    corpus = Corpus(recipe)
    text = corpus.text
    check_data_files(recipe)  # a file: corpus read is the one the recipe (and its name) says
    train_ids, val_ids = corpus.train, corpus.val
    kwargs = {"vocab_size": corpus.size, **recipe.arch_kwargs}
    torch.manual_seed(recipe.seed)
    model = create_arch(recipe.arch, **kwargs)
    block = model.config.block_size
    device = ctx.device
    model.to(device)
    lr = recipe.lr if recipe.lr is not None else LM_DEFAULT_LR[recipe.optimizer]
    opt = make_optimizer(model.parameters(), recipe.optimizer, lr, recipe.resolved_weight_decay, recipe.momentum)
    total = recipe.epochs * STEPS_PER_EPOCH
    windows = eval_windows(val_ids, block, EVAL_WINDOWS)
    codec = corpus.codec
    running = 0.0
    batches = lm_batches(train_ids, block, recipe.batch_size, recipe.seed, total)
    for step, (x, y) in enumerate(batches):
        ctx.check_cancel()
        loss = lm_train_step(model, opt, x.to(device), y.to(device), _lr_at(step, total, lr), step)
        running = loss if step == 0 else 0.9 * running + 0.1 * loss
        done = step + 1
        ctx.progress(done / total, f"training {recipe.arch} on {recipe.dataset}: step {done}/{total}")
        if done % 10 == 0 or done == total:
            ctx.log(done, {"loss": running})
        if done % STEPS_PER_EPOCH == 0:
            val = lm_loss(model, windows, device)
            ctx.log(done, {"val_loss": val["loss"]}, epoch=done // STEPS_PER_EPOCH)
    model.to("cpu").eval()
    final = lm_loss(model, windows, torch.device("cpu"))
    sample = sample_text(model, codec, text[len(text) - len(text) // 10:][:24], 160, block, torch.device("cpu"))
    fd, tmp = tempfile.mkstemp(suffix=".safetensors", dir=ctx.store.root)
    os.close(fd)
    try:
        save_checkpoint(model, tmp, meta={"dataset": recipe.dataset, **corpus.keep, "input_kind": "tokens"})
        ctx.store.put_artifact_file(ctx.run_id, CHECKPOINT, tmp)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return {
        "ref": f"zoo:{name}",
        "name": name,
        "arch": recipe.arch,
        "arch_kwargs": model.arch_kwargs,
        "dataset": recipe.dataset,
        "input_kind": "tokens",
        "input_shape": [block],
        "preprocess": None,
        **corpus.keep,
        "classes": [],
        "accuracy": final["accuracy"],  # next-token accuracy on validation windows
        "val_loss": final["loss"],
        "perplexity": final["perplexity"],
        "steps": total,
        "lr": lr,
        "params": count_params(model, trainable_only=False),
        "final_train_loss": round(running, 6),
        "sample": sample,
    }


# ---------------------------------------------------------------------------- estimate


def _lm_zoo_units(recipe: ZooRecipe, device: torch.device) -> dict[str, float]:
    """Seconds per optimiser step, per validation pass and per sampled token of a char-GPT recipe."""
    t0 = time.perf_counter()
    corpus = Corpus(recipe)
    text, train_ids, val_ids = corpus.text, corpus.train, corpus.val
    model = create_arch(recipe.arch, **{"vocab_size": corpus.size, **recipe.arch_kwargs}).to(device)
    setup = time.perf_counter() - t0
    block = model.config.block_size
    opt = make_optimizer(model.parameters(), recipe.optimizer, 1e-4, recipe.resolved_weight_decay, recipe.momentum)

    def run(n: int, on_step: Callable[..., None]) -> None:
        for step, (x, y) in enumerate(lm_batches(train_ids, block, recipe.batch_size, recipe.seed, n)):
            lm_train_step(model, opt, x.to(device), y.to(device), 1e-4, step)
            on_step()

    step = per_step(run)
    windows = eval_windows(val_ids, block, 8)
    val = timed(lambda: lm_loss(model, windows, device)) / len(windows) * EVAL_WINDOWS
    codec = corpus.codec
    token = timed(lambda: sample_text(model, codec, text[:24], 8, block, device)) / 8
    return {"step": step, "setup": setup, "val": val, "token": token}


def estimate_lm_zoo(recipe: ZooRecipe, ectx: EstimateContext) -> Estimate:
    """Optimiser steps, validation passes and the sampled text of a char-GPT recipe."""
    device = ectx.device
    key = ("lm_zoo", recipe.arch, repr(sorted(recipe.arch_kwargs.items())), recipe.dataset, recipe.tokenizer,
           recipe.batch_size, recipe.optimizer, where(device))  # fmt: skip
    u = calibrated(key, lambda: _lm_zoo_units(recipe, device))
    steps = recipe.epochs * STEPS_PER_EPOCH
    seconds = u["setup"] + steps * u["step"] + (recipe.epochs + 1) * u["val"] + 160 * u["token"]
    return estimate_from(seconds, f"calibrated: 1 step of {recipe.arch} = {ms(u['step'])}; {steps:,} steps")
