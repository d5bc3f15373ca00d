"""Helpers for the language-model tests: tiny char-GPT recipes and a tiny HF GPT-2 directory."""

from __future__ import annotations

from pathlib import Path

import torch

from stitchcore.experiments.zoo import ZooRecipe

TINY = {"n_layer": 2, "n_embd": 32, "n_head": 2, "block_size": 32}  # ~30k parameters: one epoch ~1 s


def tiny_recipe(seed: int, optimizer: str = "adamw", **arch) -> ZooRecipe:
    """One LM epoch (50 steps) of a 2-block char-GPT on pydoc."""
    return ZooRecipe(arch="gpt", dataset="pydoc", seed=seed, optimizer=optimizer, epochs=1, batch_size=8,
                     arch_kwargs={**TINY, **arch})


def train_tiny(store, seed: int, optimizer: str = "adamw", **arch) -> str:
    """Train (or fetch) a tiny char-GPT; returns its zoo ref."""
    from stitchcore.experiments import run_experiment

    return run_experiment("zoo", tiny_recipe(seed, optimizer, **arch), store).record.summary["ref"]


def save_tiny_gpt2(path: Path, seed: int, n_embd: int = 32, vocab_size: int = 300) -> Path:
    """A random GPT2LMHeadModel with a BPE tokenizer trained on CPython's docs, save_pretrained into ``path``."""
    from pydoc_data.topics import topics

    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    text = "".join(topics[k] for k in sorted(topics))[:20000]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([text[i:i + 1000] for i in range(0, len(text), 1000)], vocab_size=vocab_size,
                            min_frequency=2)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>")
    tok.add_special_tokens({"eos_token": "<|endoftext|>"})
    torch.manual_seed(seed)
    config = GPT2Config(n_layer=2, n_embd=n_embd, n_head=2, n_positions=64, vocab_size=len(tok))
    config.bos_token_id = config.eos_token_id = tok.eos_token_id
    GPT2LMHeadModel(config).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path
