"""A zoo recipe: how to train a built-in model, and the name its trained model goes by.

Below both bodies of the ``zoo`` experiment (:mod:`~stitchcore.experiments.zoo` for image models,
:mod:`~stitchcore.experiments.lm_zoo` for char-GPTs), so neither imports the other to know it.

A recipe on files (``imagefolder:PATH``, a text ``file:PATH``) records their identity (``data_id``: the
resolved path and a fingerprint, :mod:`stitchcore.data.fingerprint`), so its name says which files: two
folders, or one folder before and after an edit, never share a name (nor a run, nor a stitch's cache).

>>> r = ZooRecipe(seed=3)
>>> r.short_name(), zoo_name(r, "abcdef123"), zoo_name(ZooRecipe(seed=3, epochs=5), "abcdef123")
('cnn-digits-s3', 'cnn-digits-s3', 'cnn-digits-s3-abcdef')
>>> pets = ZooRecipe(dataset="imagefolder:/data/pets", data_id={"path": "/data/pets", "sha256": "0" * 64})
>>> pets.short_name(), ZooRecipe.from_dict({"dataset": "imagefolder:/data/pets"}).short_name()
('cnn-imagefolder-pets-f0a57e-s0', 'cnn-imagefolder-s0')
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from stitchcore.data.augment import AUGMENTS
from stitchcore.data.fingerprint import data_source
from stitchcore.errors import DataError, StitchError
from stitchcore.experiments._bounds import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_IMAGE_SIZE,
    MAX_LR,
    MAX_PENALTY,
    MAX_WEIGHT_DECAY,
    check_count,
    check_rate,
)
from stitchcore.experiments._data_id import MEASURE_FILES, DataFiles
from stitchcore.experiments._spec import (
    Spec,
    check_at_least,
    check_choice,
    check_positive,
    check_seed,
    field_label,
)
from stitchcore.models.archs import arch_input_kind, arch_recipe_defaults
from stitchcore.models.archs.cnn import DEEP_CHANNELS
from stitchcore.models.refs import parse_ref
from stitchcore.stitching.train import OPTIMIZERS

__all__ = ["DATASET_RECIPE_DEFAULTS", "HUB_STARTS", "ZooRecipe", "check_data_files", "checkpoint_artifact",
           "dataset_recipe_defaults", "recipe_for", "starts_from_hub", "zoo_name"]

HUB_STARTS = ("timm", "torchvision")  # hub sources a recipe can fine-tune (start=), each a whole architecture


# Training defaults a built-in dataset needs beyond the recipe's, per architecture: what the CLI and the Models
# page start from, after the architecture's own (arch_recipe_defaults); a recipe stays explicit, so run ids never
# depend on this table.  mnist5k (4,000 train images at 28x28, 63 steps an epoch): three conv blocks
# (28 -> 14 -> 7 -> 3), where digits' two leave the work to the fc layers, and 10 epochs (630 steps): 0.97 on its
# 1,000 test images in ~25 s on one CPU thread (measured; tests/test_mnist5k.py trains a short one).
DATASET_RECIPE_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "mnist5k": {"cnn": {"epochs": 10, "arch_kwargs": {"channels": list(DEEP_CHANNELS)}}},
}


def dataset_recipe_defaults(dataset: str, arch: str) -> dict[str, Any]:
    """The recipe fields ``dataset`` (its transforms aside) sets for ``arch`` (a fresh copy; {} for none).

    >>> dataset_recipe_defaults("mnist5k|drop3", "cnn"), dataset_recipe_defaults("digits", "cnn")
    ({'epochs': 10, 'arch_kwargs': {'channels': [16, 32, 64]}}, {})
    """
    base = str(dataset).split("|")[0].strip()
    return json.loads(json.dumps(DATASET_RECIPE_DEFAULTS.get(base, {}).get(arch, {})))


def recipe_for(arch: str = "cnn", dataset: str = "digits", **fields: Any) -> ZooRecipe:
    """The recipe the zoo starts from for ``arch`` on ``dataset``: the architecture's training defaults
    (:func:`~stitchcore.models.archs.arch_recipe_defaults`), then the dataset's
    (:func:`dataset_recipe_defaults`), then ``fields``; ``arch_kwargs`` merge key by key, the given winning.

    >>> r = recipe_for("cnn", "mnist5k", seed=2)
    >>> r.epochs, r.arch_kwargs, r.short_name()
    (10, {'channels': [16, 32, 64]}, 'cnn-mnist5k-s2')
    >>> recipe_for("cnn", "mnist5k", arch_kwargs={"fc_widths": [64, 64]}).arch_kwargs
    {'channels': [16, 32, 64], 'fc_widths': [64, 64]}
    >>> recipe_for("cnn", "digits", seed=1) == ZooRecipe(seed=1)
    True
    """
    start = {**arch_recipe_defaults(arch), **dataset_recipe_defaults(dataset, arch)}
    kwargs = {**start.get("arch_kwargs", {}), **(fields.pop("arch_kwargs", None) or {})}
    start.pop("arch_kwargs", None)
    return ZooRecipe(arch=arch, dataset=dataset, **{**start, **fields}, **({"arch_kwargs": kwargs} if kwargs else {}))


def starts_from_hub(start: str | None) -> bool:
    """True for a ``start=`` of a hub source (its architecture replaces the recipe's ``arch``).

    >>> starts_from_hub("timm:resnet18?num_classes=10"), starts_from_hub("zoo:cnn-digits-s0"), starts_from_hub(None)
    (True, False, False)
    """
    return start is not None and str(start).split(":", 1)[0] in HUB_STARTS


@dataclass(frozen=True)
class ZooRecipe(DataFiles, Spec):
    """How to train a built-in (zoo) model; training one stores it as a run.

    Defaults train the small digits CNN to ~97% test accuracy in a few seconds
    on a laptop CPU, which is what the classroom demo needs.
    """

    arch: str = "cnn"  # a name from stitchcore.models.archs.list_archs()
    dataset: str = "digits"  # a name for stitchcore.data.load_dataset
    seed: int = 0  # weight init and data order
    optimizer: str = "sgd"  # sgd (momentum) | adamw (cosine schedule)
    epochs: int = 20  # digits: 1,347 training images, 20 epochs ~ 420 steps, ~97% in ~1 s
    lr: float | None = None  # None: 0.05 for sgd, 2e-3 for adamw
    batch_size: int = 64
    momentum: float = 0.9  # sgd only
    weight_decay: float | None = None  # None: 5e-4 for sgd, 0.05 for adamw
    image_size: int | None = None  # resize inputs (digits 8 -> 16/32 for deeper nets); None = native
    arch_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {"blocks": [1, 1, 1, 1], "width": 16}
    relabel: tuple[int, int] | None = None  # trait: train with class X labelled Y
    drop_class: int | None = None  # trait: class X never seen in training
    l1: float = 0.0  # L1 penalty on weights (simple models, with pruning)
    l2: float = 0.0  # explicit L2 penalty on weights (beyond weight decay)
    prune_every: int = 0  # epochs between magnitude-pruning steps (0 = never)
    prune_fraction: float = 0.0  # fraction of remaining weights pruned at each step
    # Special layer (trait localization): after the main training, fine-tune only this named layer
    # (e.g. "fc2"; all others frozen) for finetune_epochs on finetune_data (None: the untransformed dataset).
    finetune_layer: str | None = None
    finetune_epochs: int = 10  # digits: enough for the last hidden layer to bring a dropped class back
    finetune_data: str | None = None  # e.g. "digits|relabel3to8": the trait is taught to that layer only
    finetune_lr: float | None = None  # None: the recipe's lr; smaller keeps the layer's other behaviour
    # Fine-tune from a trained model instead of a fresh init (the report's Fig. 6: L1 + pruning vs L2 from one
    # start): a zoo: or file: ref of this arch (its weights load strictly), or a timm:/torchvision: model (which
    # brings its own architecture: ``arch`` becomes ``timm:NAME``; image_size overrides its input size);
    # None = fresh init, as before.
    start: str | None = None
    # Checkpoints kept beside the final weights (Bansal et al.'s "early layers converge faster"): after each of
    # these epochs (0 = the initial weights) the model is saved as model-epochK.safetensors, loaded as
    # zoo:NAME?epoch=K.  () = only the final model, as before.
    keep_epochs: tuple[int, ...] = ()
    # Training-time augmentation (stitchcore.data.augment): "none" | "crop-flip" (CIFAR's: pad and crop, flip) |
    # "resized-crop-flip" (ImageNet's: random resized crop, flip).  Digits: none (a flipped 2 is not a 2).
    augment: str = "none"
    # The identity of the files the recipe trains on (imagefolder:/file: datasets, and a finetune_data on
    # files): {"path": the resolved path, "sha256": a fingerprint of the files' names, sizes and times}, see
    # stitchcore.data.fingerprint.  Measured from disk when a recipe is made ("auto"), kept as stored when
    # one is read; None for built-in data, and for recipes stored before it (names and ids as they were).
    data_id: dict[str, str] | str | None = MEASURE_FILES
    # A language model's tokenizer (stitchcore.data.tokenize): "char" (one token a character, as before) or
    # "bpe:N" (a byte-level BPE of N tokens learned on the corpus's training text).  Image recipes keep "char".
    tokenizer: str = "char"

    # recipes stored before start= trained from scratch; before keep_epochs= they kept no checkpoints; before
    # augment= they saw their images as they are; before data_id= their files' identity was not recorded
    LEGACY: ClassVar[dict[str, Any]] = {"start": None, "keep_epochs": (), "augment": "none", "data_id": None,
                                        "tokenizer": "char"}
    # data_id (experiments._data_id): the fingerprint covers the fine-tuning data too; the refusal names the fix
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("dataset", "finetune_data")
    DATA_WHAT: ClassVar[str] = "recipe"
    STREAMS_FOLDERS: ClassVar[bool] = False  # a zoo model trains at the folder's load size (size=N, 32 by default)
    DATA_FIX: ClassVar[str] = ("make the recipe again (the same zoo train command, or the app's form): it is named "
                               "for the files as they are now (a model of its own name); the earlier model keeps "
                               "its name")  # fmt: skip

    def __post_init__(self) -> None:
        for name in ("arch", "dataset"):  # a bundle's spec could carry a number here: refused now, not when named
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise StitchError(f"{name} must be a name such as {'cnn' if name == 'arch' else 'digits'} (got {value!r})")
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_at_least("seed", self.seed, 0)
        check_seed("seed", self.seed)  # 2**70 would overflow torch's generator when the run starts
        # a linear probe of a hub model: no epoch of the whole network, its finetune_layer (the head) trained alone
        probe = self.finetune_layer is not None and starts_from_hub(self.start)
        check_count("epochs", self.epochs, 0 if probe else 1, MAX_EPOCHS, "e.g. 20; 0 only for a hub start's "
                    "finetune_layer trained alone (a linear probe)", "each epoch passes over the training images")
        check_count("batch_size", self.batch_size, 1, MAX_BATCH, "e.g. 64")
        if self.lr is not None:
            check_positive("lr", self.lr, "typical values 1e-3 .. 1e-1; leave it out for the default")
            check_rate("lr", self.lr, MAX_LR, "typical values 1e-3 .. 1e-1")
        if self.weight_decay is not None:
            check_at_least("weight_decay", self.weight_decay, 0, "typical values 0 .. 0.1")
            check_rate("weight_decay", self.weight_decay, MAX_WEIGHT_DECAY, "typical values 0 .. 0.1")
        check_at_least("momentum", self.momentum, 0, "e.g. 0.9")
        if self.momentum >= 1.0:
            raise StitchError(f"momentum must be below 1 (got {self.momentum!r}); e.g. 0.9")
        if self.image_size is not None:
            check_count("image_size", self.image_size, 1, MAX_IMAGE_SIZE, "leave it out for the dataset's native size")
        for name in ("l1", "l2"):
            check_at_least(name, getattr(self, name), 0, "0 turns the penalty off")
            check_rate(name, getattr(self, name), MAX_PENALTY, "typical values 1e-5 .. 1e-2")
        check_count("prune_every", self.prune_every, 0, MAX_EPOCHS, "0 never prunes")
        check_at_least("prune_fraction", self.prune_fraction, 0)
        if self.prune_fraction >= 1.0:
            raise StitchError(f"{field_label('prune_fraction')} must be below 1 (got {self.prune_fraction})")
        if bool(self.prune_fraction) != bool(self.prune_every):  # one without the other would silently not prune
            raise StitchError(f"pruning needs both {field_label('prune_every')} (epochs between prunes, >= 1) and "
                              f"{field_label('prune_fraction')} (the share pruned each time, > 0); got "
                              f"{self.prune_every} and {self.prune_fraction}")  # fmt: skip
        if not isinstance(self.arch_kwargs, dict):
            raise StitchError(f"{field_label('arch_kwargs')} must be a JSON object, e.g. {{\"width\": 32}}")
        if self.relabel is not None:
            if (not isinstance(self.relabel, (list, tuple)) or len(self.relabel) != 2
                    or any(isinstance(v, bool) or not isinstance(v, int) for v in self.relabel)):
                raise StitchError(f"relabel takes two classes X:Y, got {str(self.relabel)[:60]!r}")
            object.__setattr__(self, "relabel", tuple(int(v) for v in self.relabel))
        if self.finetune_layer is None and (self.finetune_data is not None or self.finetune_lr is not None):
            raise StitchError("finetune_data and finetune_lr need a finetune_layer (the one layer trained)")
        if self.finetune_layer is not None:
            check_count("finetune_epochs", self.finetune_epochs, 1, MAX_EPOCHS, "a finetune_layer trains >= 1 epoch")
        if self.finetune_lr is not None:
            check_positive("finetune_lr", self.finetune_lr, "leave it out for the recipe's lr")
            check_rate("finetune_lr", self.finetune_lr, MAX_LR)
        epochs = (self.keep_epochs,) if isinstance(self.keep_epochs, int) else tuple(self.keep_epochs)
        if any(isinstance(e, bool) or not isinstance(e, int) or not 0 <= e < self.epochs for e in epochs):
            raise StitchError(f"keep_epochs lists epochs 0..{self.epochs - 1} (0 = the initial weights; the last "
                              f"epoch is the model itself), got {list(epochs)}")
        object.__setattr__(self, "keep_epochs", tuple(sorted(set(epochs))))
        if self.augment not in AUGMENTS:
            raise StitchError(f"unknown augment {self.augment!r}; use one of: {', '.join(AUGMENTS)}")
        if self.start is not None:
            self._check_start()
        self._check_tokenizer()
        self._check_data_id()  # last: measuring walks the files, after every cheaper check has passed

    def _check_tokenizer(self) -> None:
        """``char`` or ``bpe:N``, and a BPE only for a language model (an image has no tokens)."""
        from stitchcore.data.tokenize import parse_tokenizer

        try:
            parse_tokenizer(self.tokenizer)
        except DataError as e:
            raise StitchError(str(e)) from None
        if self.tokenizer != "char" and not self.trains_language_model():
            raise StitchError(f"tokenizer {self.tokenizer} is for a language model (arch gpt on a text corpus); "
                              f"{self.arch} reads images: leave tokenizer out")

    def _check_start(self) -> None:
        """A zoo:/file: start keeps ``arch``; a hub start sets it to the hub model's (``timm:NAME``)."""
        scheme = str(self.start).split(":", 1)[0]
        if scheme in ("zoo", "file"):
            return
        if not starts_from_hub(self.start):
            raise StitchError(f"start {self.start!r}: fine-tuning starts from a zoo:, file: (of a zoo arch), timm: or "
                              f"torchvision: model (a hub model's own weights in a file: timm:NAME@file=PATH)")
        hub_arch = f"{scheme}:{parse_ref(self.start).name}"
        if self.arch not in (ZooRecipe.arch, hub_arch) or self.arch_kwargs:
            raise StitchError(f"start {self.start} brings its own architecture ({hub_arch}): leave arch and "
                              f"arch_kwargs out (got arch {self.arch!r}, arch_kwargs {self.arch_kwargs or {}})")
        object.__setattr__(self, "arch", hub_arch)

    @property
    def fine_tunes_hub(self) -> bool:
        """True when the model is a timm:/torchvision: start fine-tuned (``arch`` is then ``timm:NAME``).

        >>> ZooRecipe(start="timm:resnet18?num_classes=10&pretrained=false").arch, ZooRecipe().fine_tunes_hub
        ('timm:resnet18', False)
        """
        return ":" in self.arch

    @property
    def resolved_lr(self) -> float:
        return self.lr if self.lr is not None else (0.05 if self.optimizer == "sgd" else 2e-3)

    @property
    def resolved_weight_decay(self) -> float:
        if self.weight_decay is not None:
            return self.weight_decay
        return 5e-4 if self.optimizer == "sgd" else 0.05

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if self.finetune_layer is None:  # absent unless used: run ids of older recipes stay the same
            del d["finetune_layer"], d["finetune_epochs"], d["finetune_data"], d["finetune_lr"]
        return d

    def is_plain(self) -> bool:
        """True when only arch, dataset (and its files' identity), seed and optimizer differ from defaults."""
        base = ZooRecipe(arch=self.arch, dataset=self.dataset, seed=self.seed, optimizer=self.optimizer,
                         data_id=self.data_id, tokenizer=self.tokenizer)
        return base == self

    def label(self) -> str:
        """Human label for run lists: 'train cnn on digits (seed 0, sgd, 20 epochs, drop 3)'."""
        extras = [f"seed {self.seed}", self.optimizer, f"{self.epochs} epochs"]
        if self.relabel:
            extras.append(f"relabel {self.relabel[0]}->{self.relabel[1]}")
        if self.drop_class is not None:
            extras.append(f"drop {self.drop_class}")
        if self.l1 or self.prune_fraction:
            extras.append("L1/pruned")
        if self.l2:
            extras.append(f"L2 {self.l2:g}")
        if self.start is not None:
            extras.append(f"from {self.start}")
        if self.keep_epochs:
            extras.append(f"checkpoints {','.join(map(str, self.keep_epochs))}")
        if self.augment != "none":
            extras.append(f"augment {self.augment}")
        if self.tokenizer != "char":
            extras.append(f"tokenizer {self.tokenizer}")
        if self.finetune_layer is not None:
            extras.append(f"fine-tune {self.finetune_layer}" + (f" on {self.finetune_data}" if self.finetune_data else ""))
        return f"train {self.arch} on {self.dataset} ({', '.join(extras)})"

    def trains_language_model(self) -> bool:
        """True for a recipe of a language model (a char-GPT): trained by :mod:`stitchcore.experiments.lm_zoo`.

        >>> ZooRecipe(arch="gpt", dataset="pydoc").trains_language_model(), ZooRecipe().trains_language_model()
        (True, False)
        """
        if self.fine_tunes_hub:
            return False
        try:
            return arch_input_kind(self.arch) != "image"
        except StitchError:  # an unknown arch: the run will say so
            return False

    def short_name(self) -> str:
        """Readable part of the zoo ref: ``cnn-digits-s0`` (``-adamw`` when not sgd); a recipe on files also
        names them: ``cnn-imagefolder-pets-3fa2c1-s0`` (the folder's or file's name, and a short hash of the
        dataset as written and the files' identity)."""
        dataset = re.sub(r"[^a-z0-9]+", "", self.dataset.lower().split(":")[0])
        arch = re.sub(r"[^a-z0-9]+", "", self.arch.split(":")[-1].lower())  # timm:test_resnet -> testresnet
        if isinstance(self.data_id, dict):  # None: built-in data, or a recipe stored before data_id
            dataset += self._files_part(self.data_id)
        if self.tokenizer != "char":  # gpt-pydoc-bpe512-s0: a model of other tokens is another model
            dataset += "-" + self.tokenizer.replace(":", "")
        name = f"{arch}-{dataset}-s{self.seed}"
        return name + ("-adamw" if self.optimizer == "adamw" else "")

    def _files_part(self, data_id: dict[str, str]) -> str:
        """``-pets-3fa2c1``: the name of the folder (or the stem of the text file) the files lie in, and the
        first 6 hex digits of a sha256 over the dataset as written (options, transforms) and ``data_id``."""
        path = data_id["path"].rstrip("/")
        leaf = path.rsplit("/", 1)[-1]
        if (data_source(self.dataset) or ("", ""))[0] == "file":
            leaf = leaf.rsplit(".", 1)[0] if "." in leaf.strip(".") else leaf  # input.txt -> input
        word = re.sub(r"[^a-z0-9]+", "", leaf.lower())[:24]
        what = json.dumps([self.dataset, self.finetune_data, data_id["path"], data_id["sha256"]])
        return (f"-{word}" if word else "") + "-" + hashlib.sha256(what.encode()).hexdigest()[:6]


def checkpoint_artifact(epoch: int | None) -> str:
    """The store artifact holding a zoo model's weights: the final ones, or those after ``epoch`` (keep_epochs).

    >>> checkpoint_artifact(None), checkpoint_artifact(3)
    ('model.safetensors', 'model-epoch3.safetensors')
    """
    return "model.safetensors" if epoch is None else f"model-epoch{epoch}.safetensors"


def zoo_name(recipe: ZooRecipe, run_id: str) -> str:
    """``cnn-digits-s0`` for plain recipes; a run-id suffix keeps other recipes apart."""
    name = recipe.short_name()
    return name if recipe.is_plain() else f"{name}-{run_id[:6]}"


def check_data_files(recipe: ZooRecipe) -> None:
    """DataError unless the recipe's files are, now, the ones its ``data_id`` names (a recipe on files made
    before data_id was recorded is refused too: made again, it is named for its files); see
    :meth:`~stitchcore.experiments._data_id.DataFiles.check_data_files`.

    >>> check_data_files(ZooRecipe())  # digits: nothing on disk to compare
    >>> ZooRecipe.new({"seed": 2, "data_id": None}).data_id is None  # made anew: measured (digits: no files)
    True
    """
    recipe.check_data_files()
