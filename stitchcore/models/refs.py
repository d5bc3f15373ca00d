"""ModelRef: one string names any checkpoint.

Grammar::

    scheme:name[@file=PATH][?key=value&key=value...]

``scheme`` says where the model comes from (see :data:`SCHEMES`), ``name`` is a
model name or a path, ``@file=PATH`` gives local weights for a hub model, and the
query carries options (``pretrained=false``, ``weights=none``, ``arch=zoo:cnn`` ...).
There is no escaping: values may contain ``:``, ``,`` and ``=`` but not ``&``.

Random weights are seeded by the ref: ``seed=N`` (default 0) on a random-init hub ref
(``timm:...?pretrained=false``, ``torchvision:...?weights=none``, ``hf:`` tensors missing from the
checkpoint) and on ``zoo:NAME?init=random``.  On ``timm:``, ``torchvision:`` and ``hf:`` refs the
default ``seed=0`` is left out of the canonical spelling (so refs written before seeds keep their run
ids) and a seed is written as a plain whole number:

>>> str(parse_ref("timm:resnet18?pretrained=false&seed=0"))
'timm:resnet18?pretrained=false'
>>> str(parse_ref("timm:resnet18?seed=03&pretrained=false"))
'timm:resnet18?pretrained=false&seed=3'

>>> r = parse_ref("timm:resnet18?pretrained=false")
>>> r.scheme, r.name, r.param("pretrained")
('timm', 'resnet18', 'false')
>>> str(parse_ref("file:/m.pt?num_classes=10&arch=zoo:cnn"))
'file:/m.pt?arch=zoo:cnn&num_classes=10'

Parsing, validation and the error for a bad string live here and nowhere else.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stitchcore.errors import RefError
from stitchcore.models.preprocess import format_size, format_values, parse_size, parse_values

__all__ = ["MAX_SEED", "SCHEMES", "TWIN_SEEDS", "ModelRef", "check_store_ref", "dataset_outside", "parse_ref", "parse_seed", "random_twin", "random_twins",
           "upload_ref"]

# Where a model can come from; the order is the order shown in help texts.
SCHEMES: tuple[str, ...] = ("zoo", "timm", "torchvision", "hf", "file")

# Spellings people reach for, mapped to the scheme they mean.
_ALIASES = {
    "tv": "torchvision",
    "vision": "torchvision",
    "huggingface": "hf",
    "hf-hub": "hf",
    "transformers": "hf",
    "local": "file",
    "path": "file",
    "local-dir": "file",
    "builtin": "zoo",
}

_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_SEED_RE = re.compile(r"^[0-9]{1,10}$")  # ASCII digits; 2**31 - 1 has 10 (a 5,000-digit int() raises)
MAX_SEED = 2**31 - 1  # the largest seed a ref or a spec takes: numpy, torch and Python's random all accept it
# Schemes whose seed= defaults to 0 and is then left out of the canonical ref. Not zoo:, whose stored
# specs already spell ?init=random&seed=0 out (its run ids must not move).
_SEED_DEFAULT_DROPPED = ("timm", "torchvision", "hf")
_FILE_MARK = "@file="
_CHECKPOINT_EXTS = (".pt", ".pth", ".safetensors", ".bin", ".ckpt")
_SHAPE = (
    "a model ref looks like 'timm:resnet18', 'zoo:cnn-digits-s0', 'hf:gpt2' "
    "or 'file:/path/model.pt?arch=zoo:cnn'"
)


@dataclass(frozen=True)
class ModelRef:
    """A parsed model reference; ``str(ref)`` is its one canonical spelling."""

    scheme: str  # one of SCHEMES: which loader builds the model
    name: str  # model name (timm/torchvision/hf hub id, zoo model) or a path (file:, hf:/dir)
    file: str | None = None  # local weights for a timm/torchvision model (the @file= part), else None
    params: tuple[tuple[str, str], ...] = ()  # query options as (key, value) pairs, sorted by key

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise RefError(_scheme_message(self.scheme, f"{self.scheme}:{self.name}"))
        if not self.name:
            raise RefError(f"model ref '{self.scheme}:' has no name; {_SHAPE}")
        if self.file is not None and (not self.file or "?" in self.file):
            raise RefError(
                f"bad @file= path {self.file!r}; give a path without '?', e.g. @file=/path/w.safetensors"
            )
        params = tuple(sorted((str(k), str(v)) for k, v in self.params))
        if self.scheme in _SEED_DEFAULT_DROPPED:
            params = _canonical_seed(params)
        keys = [k for k, _ in params]
        for key, value in params:
            if not _KEY_RE.match(key):
                raise RefError(
                    f"bad option name {key!r} in model ref; use letters, digits and '_' like ?num_classes=10"
                )
            if "&" in value:
                raise RefError(f"option {key}={value!r} contains '&'; values cannot contain '&'")
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise RefError(f"option {dupes[0]!r} given twice in model ref; give each option once")
        object.__setattr__(self, "params", params)

    def __str__(self) -> str:
        text = f"{self.scheme}:{self.name}"
        if self.file is not None:
            text += f"{_FILE_MARK}{self.file}"
        if self.params:
            text += "?" + "&".join(f"{k}={v}" for k, v in self.params)
        return text

    def param(self, key: str, default: str | None = None) -> str | None:
        """The value of query option ``key``, or ``default`` when absent."""
        for k, v in self.params:
            if k == key:
                return v
        return default

    def param_dict(self) -> dict[str, str]:
        """All query options as a plain dict."""
        return dict(self.params)

    def without_params(self, *keys: str) -> dict[str, str]:
        """Query options except ``keys`` (e.g. arch kwargs once ``arch`` is taken)."""
        return {k: v for k, v in self.params if k not in keys}


def _canonical_seed(params: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``seed=`` written as a plain whole number, and left out when it is the default 0.

    A value that is no whole number stays as written: the source refuses it, naming the fix.
    """
    out = []
    for key, value in params:
        if key == "seed" and _SEED_RE.match(value):
            if int(value) == 0:
                continue
            value = str(int(value))
        out.append((key, value))
    return tuple(out)


def parse_seed(ref: ModelRef) -> int:
    """The ``seed=`` of ``ref`` as an int (0 when absent); RefError for anything but a whole number >= 0.

    >>> parse_seed(parse_ref("timm:resnet18?pretrained=false&seed=7")), parse_seed(parse_ref("timm:resnet18"))
    (7, 0)
    """
    value = ref.param("seed")
    if value is None:
        return 0
    if not _SEED_RE.match(value) or int(value) > MAX_SEED:
        shown = repr(value) if len(value) <= 24 else repr(value[:21]) + "..."
        raise RefError(f"bad seed {shown} in {ref.scheme}:{ref.name}; write seed=N, N a whole number 0 .. {MAX_SEED}")
    return int(value)


def _scheme_message(scheme: str, text: str) -> str:
    """Error text for an unknown scheme, with a suggestion when one is close."""
    options = ", ".join(f"{s}:" for s in SCHEMES)
    guess = _ALIASES.get(scheme.lower())
    if guess is None:
        close = difflib.get_close_matches(scheme.lower(), SCHEMES, n=1, cutoff=0.5)
        guess = close[0] if close else None
    if guess is None and len(scheme) == 1 and scheme.isalpha():
        guess = "file"  # a Windows drive letter: C:/models/x.pt
    hint = f" (did you mean {guess}:?)" if guess else ""
    return f"unknown model source '{scheme}' in '{text}'; use one of {options}{hint}"


def _bare_message(text: str) -> str:
    """Error text for a ref without a scheme, guessing what was meant."""
    looks_like_path = text.startswith(("/", ".", "~")) or text.lower().endswith(_CHECKPOINT_EXTS)
    if looks_like_path:
        suggestion = f"file:{text}?arch=zoo:cnn" if not text.endswith(".safetensors") else f"file:{text}"
        return f"model ref '{text}' has no source; for a checkpoint write '{suggestion}'"
    if "/" in text:
        return f"model ref '{text}' has no source; for a Hugging Face model write 'hf:{text}'"
    return (
        f"model ref '{text}' has no source; write e.g. 'timm:{text}' "
        f"(or torchvision:{text}, zoo:{text}); sources are " + ", ".join(f"{s}:" for s in SCHEMES)
    )


def _parse_query(query: str, text: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for part in query.split("&"):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise RefError(f"bad option {part!r} in '{text}'; options are key=value pairs joined by '&'")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def parse_ref(text: str | ModelRef) -> ModelRef:
    """Parse ``scheme:name[@file=PATH][?k=v&...]`` into a :class:`ModelRef`.

    >>> parse_ref("timm:resnet18@file=/w/r18.safetensors").file
    '/w/r18.safetensors'
    >>> parse_ref("tim:resnet18")
    Traceback (most recent call last):
    ...
    stitchcore.errors.RefError: unknown model source 'tim' in 'tim:resnet18'; use one of zoo:, timm:, \
torchvision:, hf:, file: (did you mean timm:?)

    Raises :class:`RefError` with a one-line fix for anything malformed.
    """
    if isinstance(text, ModelRef):
        return text
    if not isinstance(text, str):
        raise RefError(f"a model ref must be a string, got {type(text).__name__}; {_SHAPE}")
    text = text.strip()
    if not text:
        raise RefError(f"empty model ref; {_SHAPE}")
    scheme, sep, rest = text.partition(":")
    if not sep:
        raise RefError(_bare_message(text))
    scheme = scheme.strip().lower()
    if scheme not in SCHEMES:
        raise RefError(_scheme_message(scheme, text))
    body, qmark, query = rest.partition("?")
    if qmark and not query:
        raise RefError(
            f"model ref '{text}' ends with '?'; add options like ?pretrained=false or drop the '?'"
        )
    name, mark, file = body.partition(_FILE_MARK)
    name = name.strip()
    if not name:
        example = {"file": "file:/path/model.pt?arch=zoo:cnn", "hf": "hf:gpt2", "zoo": "zoo:cnn-digits-s0"}
        raise RefError(
            f"model ref '{text}' has no name after '{scheme}:'; "
            f"e.g. {example.get(scheme, scheme + ':resnet18')}"
        )
    if mark:
        file = file.strip()
        if not file:
            raise RefError(
                f"model ref '{text}' has an empty @file=; give a path like @file=/path/w.safetensors"
            )
        if scheme == "hf":
            raise RefError(
                "@file= is not used with hf:; for a local Hugging Face model write 'hf:/local/dir'"
            )
        if scheme in ("file", "zoo"):
            raise RefError(
                f"@file= is for hub models (timm:, torchvision:); for a checkpoint write 'file:{file}'"
            )
    return ModelRef(scheme=scheme, name=name, file=file if mark else None, params=_parse_query(query, text))


def random_twin(ref: str, seed: int) -> str:
    """The untrained twin of a ref, drawn from ``seed``: the random-weight control of matrices and sweeps.

    zoo: ``?init=random&seed=S`` (the seed always written, as stored runs spell it); timm:
    ``?pretrained=false&seed=S``, torchvision: ``?weights=none&seed=S`` (``seed=0`` left out, as in
    every canonical hub ref), other options (``num_classes``, ``in_chans``) kept.  A hub ref with
    ``@file=`` keeps its head only when it says ``num_classes=``; hf: and file: refs have no twin.
    Each is a RefError naming the fix.

    >>> random_twin("zoo:cnn-digits-s0", 3)
    'zoo:cnn-digits-s0?init=random&seed=3'
    >>> random_twin("timm:resnet18?num_classes=10", 0), random_twin("torchvision:resnet18", 2)
    ('timm:resnet18?num_classes=10&pretrained=false', 'torchvision:resnet18?seed=2&weights=none')
    """
    r = parse_ref(ref)
    params = dict(r.params)
    if r.scheme == "zoo":
        params.update(init="random", seed=str(seed))
        return str(ModelRef(r.scheme, r.name, r.file, tuple(params.items())))
    if r.scheme not in _RANDOM_OPTION:
        raise RefError(
            f"{r} has no random-init twin: random-weight controls need zoo:, timm: or torchvision: models"
        )
    if r.file is not None and "num_classes" not in params:
        raise RefError(
            f"the random twin of {r} needs its head size: add ?num_classes=N (the rows of its classifier)"
        )
    key, value = _RANDOM_OPTION[r.scheme]
    params.update({key: value, "seed": str(seed)})
    return str(ModelRef(r.scheme, r.name, None, tuple(params.items())))


TWIN_SEEDS = ("distinct", "shared")  # how a random-init control pair draws its two networks (see random_twins)


def random_twins(a: str, b: str, seed: int, k: int = 0, rule: str = "distinct") -> tuple[str, str]:
    """The ``k``-th random-init control pair of A and B (matrix and sweep controls), drawn from ``seed``.

    ``distinct`` (new runs): A's twin from seed 2(seed + k), B's from 2(seed + k) + 1, so two refs of one
    architecture give two different untrained networks, and no seed serves two pairs.  ``shared`` (runs
    stored before the fix, whose specs lack the rule): both from seed + k, so A's and B's twins of one
    architecture were one network.

    >>> random_twins("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", 0)
    ('zoo:cnn-digits-s0?init=random&seed=0', 'zoo:cnn-digits-s1?init=random&seed=1')
    >>> random_twins("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", 3, k=1, rule="shared")
    ('zoo:cnn-digits-s0?init=random&seed=4', 'zoo:cnn-digits-s1?init=random&seed=4')
    """
    if rule == "shared":
        return random_twin(a, seed + k), random_twin(b, seed + k)
    if rule != "distinct":
        raise RefError(f"unknown twin seed rule {rule!r}; use one of: {', '.join(TWIN_SEEDS)}")
    base = 2 * (seed + k)
    return random_twin(a, base), random_twin(b, base + 1)


# the option that makes a hub ref random init
_RANDOM_OPTION = {"timm": ("pretrained", "false"), "torchvision": ("weights", "none")}


def _option_text(key: str, value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float, str)):
        return str(value)
    raise RefError(
        f"architecture option {key!r} must be a number, string or list, not {type(value).__name__}"
    )


def upload_ref(
    path: str | os.PathLike,
    arch: str = "",
    options: str | dict[str, Any] | None = None,
    *,
    dataset: str | None = None,
    mean: str | Sequence[float] | None = None,
    std: str | Sequence[float] | None = None,
    size: str | int | Sequence[int] | None = None,
) -> str:
    """The ``file:`` ref of a saved upload: ``file:PATH?arch=ARCH&k=v...`` (canonical spelling).

    >>> upload_ref("/s/uploads/ab-m.pt", "zoo:cnn", '{"channels": [8, 16], "num_classes": 3}')
    'file:/s/uploads/ab-m.pt?arch=zoo:cnn&channels=8,16&num_classes=3'
    >>> upload_ref("/u/m.pt", "zoo:cnn", dataset="digits", mean=[0.3052753395], std="0.3758", size=8)
    'file:/u/m.pt?arch=zoo:cnn&dataset=digits&mean=0.30527535&size=8&std=0.3758'

    ``arch`` is ``zoo:cnn``, ``timm:resnet18`` ... or blank for a stitchcore
    safetensors file that records its architecture; ``options`` is a JSON object
    (text or dict) of architecture options, lists written as ``8,16``.  The
    keywords are the input options of :mod:`stitchcore.models.sources.file`:
    the training ``dataset`` and the preprocessing (``mean``/``std`` as numbers
    or ``"0.485,0.456,0.406"``, ``size`` as a side, (H, W) or ``"24,32"``); blank
    or None leaves one out.  A malformed value is a RefError.
    """
    if isinstance(options, str):
        text = options.strip()
        try:
            options = json.loads(text) if text else {}
        except json.JSONDecodeError as e:
            raise RefError(
                f'architecture options are not valid JSON ({e.msg}); write an object like {{"num_classes": 10}}'
            ) from None
    options = options or {}
    if not isinstance(options, dict):
        raise RefError('architecture options must be a JSON object like {"num_classes": 10}')
    arch = arch.strip()
    if options and not arch:
        raise RefError("architecture options need an architecture; fill in e.g. zoo:cnn or timm:resnet18")
    params = [("arch", arch)] if arch else []
    params += [(str(k), _option_text(str(k), v)) for k, v in options.items()]
    params += _input_options(dataset, mean, std, size)
    return str(ModelRef(scheme="file", name=str(path), params=tuple(params)))


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _input_options(dataset: str | None, mean: Any, std: Any, size: Any) -> list[tuple[str, str]]:
    """The ref spelling of the input options given (checked); blank ones are left out."""
    out = []
    if not _blank(dataset):
        out.append(("dataset", str(dataset).strip()))
    for key, value in (("mean", mean), ("std", std)):
        if not _blank(value):
            text = value.replace(" ", "") if isinstance(value, str) else format_values(value)
            parse_values(key, text)
            out.append((key, text))
    if not _blank(size):
        text = size if isinstance(size, str) else str(size) if isinstance(size, int) else ",".join(map(str, size))
        out.append(("size", format_size(parse_size(text))))
    return out


_PATH_DATASETS = ("imagefolder:", "file:")  # dataset options that name a folder or file on the server


def _inside(path: str, root: Path) -> bool:
    """Whether ``path`` (links and ``..`` resolved) lies under ``root``."""
    return Path(path.partition("?")[0]).expanduser().resolve().is_relative_to(root)


def dataset_outside(dataset: str, store_root: str | os.PathLike) -> bool:
    """Whether a dataset name reads a folder or file on the server outside ``store_root`` (``imagefolder:`` /
    ``file:`` paths; a built-in name such as digits never does).  What viewer mode refuses.

    >>> dataset_outside("imagefolder:/data/pets", "/srv/store"), dataset_outside("digits|drop3", "/srv/store")
    (True, False)
    """
    root = Path(store_root).expanduser().resolve()
    return any(dataset.startswith(p) and not _inside(dataset.removeprefix(p), root) for p in _PATH_DATASETS)


def check_store_ref(ref: str | ModelRef, store_root: str | os.PathLike) -> ModelRef:
    """``ref`` parsed, if it names only what the store holds: a ``zoo:`` model, or a ``file:`` upload
    under ``store_root`` (its ``dataset=`` a named one or a folder there too).  What viewer mode opens.

    Anything else (a server path, a hub model) is a RefError saying what to open instead.

    >>> str(check_store_ref("zoo:cnn-digits-s0?init=random", "/srv/store"))
    'zoo:cnn-digits-s0?init=random'
    >>> str(check_store_ref("file:/srv/store/uploads/ab-m.pt?arch=zoo:cnn", "/srv/store"))
    'file:/srv/store/uploads/ab-m.pt?arch=zoo:cnn'
    >>> check_store_ref("file:/srv/store/../../etc/passwd?arch=zoo:cnn", "/srv/store")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.RefError: viewer mode opens only models in the store: ... reads /etc/passwd, outside it
    """
    parsed = parse_ref(ref)
    root = Path(store_root).expanduser().resolve()
    fix = f"viewer mode opens only models in the store: pick a zoo: model or an upload under {root}"
    if parsed.scheme not in ("zoo", "file"):
        raise RefError(f"{fix}; '{parsed}' loads a {parsed.scheme}: model from outside it")
    if parsed.scheme == "file" and not _inside(parsed.name, root):
        where = Path(parsed.name).expanduser().resolve()
        raise RefError(f"{fix}; '{parsed}' reads {where}, outside it")
    dataset = parsed.param("dataset") or ""
    if dataset_outside(dataset, root):
        raise RefError(f"{fix}; its dataset {dataset} is outside it: leave dataset= out or name a"
                       " built-in dataset such as digits")  # fmt: skip
    return parsed
