"""``zoo:`` refs: built-in models trained in the app, resolved through the store.

``zoo:cnn-digits-s0`` names the stored run of a zoo recipe (see
:func:`stitchcore.experiments.zoo.zoo_name`).  ``?init=random`` gives the same
architecture with random weights drawn from seed N (``&seed=N``, default 0; the same weights in
every process), the control for "a random-weights bottom" experiments.  ``?epoch=K`` gives the weights
after epoch K of the same training run (a recipe with ``keep_epochs``; 0 = its initial weights).
"""

from __future__ import annotations

import dataclasses
import difflib
import re

from torch import nn

from stitchcore.errors import RefError
from stitchcore.models.archs import create_arch
from stitchcore.models.loaded import LoadedModel, seeded_init
from stitchcore.models.memory import check_buildable
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import ModelRef, parse_seed
from stitchcore.models.sources._registry import ARCH_BUILDERS, register_source
from stitchcore.models.sources.checkpoint import load_into, read_checkpoint
from stitchcore.store.claims import run_names
from stitchcore.store.records import RunRecord
from stitchcore.store.results import Store

__all__ = ["find_zoo_run", "list_zoo_models", "load_zoo_model", "zoo_epoch", "zoo_names", "zoo_options"]

_FILE_DATA = ("imagefolder", "file")  # datasets read from files: a recipe on them is named for its files too


def list_zoo_models(store: Store) -> list[RunRecord]:
    """Every trained zoo model in the store, newest first."""
    return store.list_runs(kind="zoo", status="done")


def zoo_names(rec: RunRecord) -> set[str]:
    """The names a stored zoo run answers to: the one its spec gives it (``store.claims.spec_name``: the zoo
    experiment registers how); a run made in this store also the one its summary records, an imported one
    never (a bundle's summary could claim any name: ``zoo:cnn-digits-s0`` for other weights), not even when
    no name comes from its spec (a spec this version refuses, a seed of 2**70: it answers to none).  A run
    made here without the zoo experiment imported (no namer): the summary's, as before."""
    return run_names(rec)  # zoo runs are of kind "zoo": the rule is the store's, written once


def find_zoo_run(store: Store, name: str) -> RunRecord:
    """The stored run of ``zoo:<name>`` (by :func:`zoo_names`): the newest made in this store, else the newest
    imported (a bundle's run, however recent, never takes a name over from one made here: two runs share a
    name only through names stored before they said which files, or a forged spec); RefError with the command
    to train it otherwise."""
    runs = list_zoo_models(store)
    named = [rec for rec in runs if name in zoo_names(rec)]
    if named:
        return next((rec for rec in named if not rec.imported), named[0])
    hint = _train_hint(name)
    close = difflib.get_close_matches(name, sorted({n for r in runs for n in zoo_names(r)}), n=3)
    also = f" Trained models close to it: {', '.join('zoo:' + c for c in close)}." if close else ""
    raise RefError(f"zoo:{name} is not in the store at {store.root}; {hint}.{also}")


# a plain recipe's name (stitchcore.experiments.zoo_recipe.ZooRecipe.short_name): arch-data[-files-hash6]-sN
_NAME = re.compile(r"([a-z0-9]+)-([a-z0-9]+)-(?:([a-z0-9]+-)?[0-9a-f]{6}-)?s(\d+)(-adamw)?")


def _train_hint(name: str) -> str:
    """The command that trains ``name`` (a plain recipe's), else where to list the trained ones.

    >>> _train_hint("cnn-digits-s9")
    'train it first: python -m stitchcore zoo train --arch cnn --dataset digits --seed 9'
    >>> _train_hint("cnn-imagefolder-pets-3fa2c1-s0")  # doctest: +ELLIPSIS
    'train it first: ... --dataset imagefolder:PATH --seed 0 (a model of files is named for them as ...'
    """
    m = _NAME.fullmatch(name)
    if m is None:
        return "list trained models with: python -m stitchcore zoo list"
    arch, data, seed, opt = m[1], m[2], m[4], " --optimizer adamw" if m[5] else ""
    command = f"train it first: python -m stitchcore zoo train --arch {arch} --dataset {data}"
    if m[3] is None and data not in _FILE_DATA:
        return f"{command} --seed {seed}{opt}"
    return (f"{command}:PATH --seed {seed}{opt} (a model of files is named for them as they were: list "
            "trained models with python -m stitchcore zoo list)")  # fmt: skip


_OPTIONS = ("init", "seed", "epoch")  # what a zoo: ref's query may hold


def zoo_options(ref: ModelRef) -> tuple[str, int | None]:
    """``(init, seed)`` of a zoo ref: ``("trained", None)``, or ``("random", N)`` (seed 0 by default).

    >>> from stitchcore.models.refs import parse_ref
    >>> zoo_options(parse_ref("zoo:cnn-digits-s0?init=random&seed=3"))
    ('random', 3)
    >>> zoo_options(parse_ref("zoo:cnn-digits-s0?init=random&seed=abc"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.RefError: bad seed 'abc' in zoo:cnn-digits-s0; write seed=N, ...
    """
    unknown = [k for k, _ in ref.params if k not in _OPTIONS]
    if unknown:
        raise RefError(f"unknown option {unknown[0]!r} in {ref}; zoo refs take only ?init=random&seed=N or ?epoch=K")
    init = ref.param("init", "trained")
    if init not in ("trained", "random"):
        raise RefError(f"unknown init {init!r} in {ref}; use ?init=random or leave it out")
    seed = ref.param("seed")
    if seed is None:
        return init, (0 if init == "random" else None)
    if init != "random":
        raise RefError(f"seed= in {ref} is for random weights; add init=random (zoo:NAME?init=random&seed=N)")
    return init, parse_seed(ref)  # ASCII digits, 0 .. 2**31 - 1, said in one line


def zoo_epoch(ref: ModelRef) -> int | None:
    """The checkpoint epoch K of ``zoo:NAME?epoch=K`` (None: the final weights).

    >>> from stitchcore.models.refs import parse_ref
    >>> zoo_epoch(parse_ref("zoo:cnn-digits-s0?epoch=2")), zoo_epoch(parse_ref("zoo:cnn-digits-s0"))
    (2, None)
    """
    epoch = ref.param("epoch")
    if epoch is None:
        return None
    if ref.param("init") is not None:
        raise RefError(f"{ref}: epoch= names a checkpoint of the trained run; leave out init= and seed=")
    if not (epoch.isascii() and epoch.isdigit() and len(epoch) <= 5):  # not "²", not 5,000 digits
        shown = repr(epoch) if len(epoch) <= 24 else repr(epoch[:21]) + "..."
        raise RefError(f"bad epoch {shown} in {ref.scheme}:{ref.name}; write epoch=K, K a whole number like 0 or 5")
    return int(epoch)


def _architecture(summary: dict, ref: str) -> nn.Module:
    """A zoo run's architecture with fresh weights: a zoo arch, or the hub model a recipe fine-tuned
    (``arch`` ``timm:NAME``, built by its family's builder as ``file:?arch=timm:NAME`` is)."""
    family, _, name = summary["arch"].partition(":")
    if name:
        model, _ = ARCH_BUILDERS.get(family)(name, dict(summary["arch_kwargs"]), ref, None)
        return model
    kwargs = summary["arch_kwargs"]
    check_buildable(f"{ref} ({summary['arch']})", lambda: create_arch(summary["arch"], **kwargs),
                    "its stored arch_kwargs ask for more than this machine holds")  # fmt: skip
    return create_arch(summary["arch"], **kwargs)


@register_source("zoo")
def load_zoo_model(ref: ModelRef, store: Store | None = None) -> LoadedModel:
    """Rebuild the architecture from the run summary and load its safetensors weights."""
    init, seed = zoo_options(ref)  # before the store: a malformed ref is refused as written
    epoch = zoo_epoch(ref)
    store = store if store is not None else Store()
    rec = find_zoo_run(store, ref.name)
    s = rec.summary
    if init == "random":
        with seeded_init(seed):  # the caller's RNG is left as it was
            model = _architecture(s, str(ref))
    else:
        model = _architecture(s, str(ref))
        kept = s.get("checkpoints") or []
        if epoch is not None and epoch not in kept:
            have = f"it kept epochs {', '.join(map(str, kept))}" if kept else "it kept no checkpoints"
            raise RefError(f"zoo:{ref.name} has no checkpoint of epoch {epoch} ({have}); train a recipe with "
                           f"keep_epochs=[{epoch}, ...] or use one of those")
        path = store.artifact_path(rec.id, "model.safetensors" if epoch is None else f"model-epoch{epoch}.safetensors")
        state, _ = read_checkpoint(path)  # CheckpointError names a corrupt blob
        load_into(model, state, f"zoo:{ref.name} ({path})", s["arch"])
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    # random weights: their seed, and no stored accuracy (that is the trained model's)
    drawn = {"init_seed": seed, "accuracy": None, "val_loss": None} if init == "random" else {}
    if epoch is not None:  # a checkpoint: not the final model's stored accuracy
        drawn = {"epoch": epoch, "accuracy": None}
    if s.get("input_kind") == "tokens":  # a GPT: its vocabulary (characters, or a BPE's JSON) travels in meta
        vocab = {"vocab": s["vocab"]} if "vocab" in s else {"bpe": s["bpe"]}
        return LoadedModel(
            ref=str(ref), model=model, input_kind="tokens", input_shape=tuple(s["input_shape"]), preprocess=None,
            num_classes=len(s["vocab"]) if "vocab" in s else model.config.vocab_size, dataset=s["dataset"],
            meta={"arch": s["arch"], "arch_kwargs": s["arch_kwargs"], **vocab, "run_id": rec.id,
                  "accuracy": s.get("accuracy"), "val_loss": s.get("val_loss"),
                  "context_length": s["input_shape"][0], **drawn},
        )
    preprocess = Preprocess.from_dict(s["preprocess"])
    if preprocess.size is None:  # trained on data loaded at its input size: other data is brought to that size
        preprocess = dataclasses.replace(preprocess, size=tuple(s["input_shape"][1:]))  # (a streamed folder)
    return LoadedModel(
        ref=str(ref),
        model=model,
        input_kind=getattr(model, "input_kind", "image"),
        input_shape=tuple(s["input_shape"]),
        preprocess=preprocess,
        num_classes=len(s["classes"]),
        dataset=s["dataset"],
        meta={"arch": s["arch"], "arch_kwargs": s["arch_kwargs"], "class_names": s["classes"], "run_id": rec.id,
              "accuracy": s.get("accuracy"), **drawn},
    )
