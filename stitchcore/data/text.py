"""Text corpora and the character vocabulary of the small GPTs.

Corpus names::

    pydoc             CPython's bundled documentation topics (~465k characters; offline default)
    file:PATH         any UTF-8 text file
    tinyshakespeare   Karpathy's 1.1M-character Shakespeare, fetched into the data root once

>>> text = load_text("pydoc")
>>> vocab = CharVocab.from_text(text)
>>> vocab.decode(vocab.encode("def f(x):"))
'def f(x):'
>>> train, val = char_splits(text, vocab)
>>> x, y = next(lm_batches(train, block_size=64, batch_size=4, seed=0, steps=1))
>>> x.shape, bool((x[:, 1:] == y[:, :-1]).all())
(torch.Size([4, 64]), True)
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import torch

from stitchcore.data.images import data_root, note_other_data
from stitchcore.errors import DataError

__all__ = ["CharVocab", "char_splits", "check_text", "list_texts", "lm_batches", "load_text"]

log = logging.getLogger(__name__)

TINYSHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
_DOWNLOAD_TIMEOUT_S = 30  # one 1.1 MB file; fail fast when offline instead of hanging a job


def list_texts() -> list[str]:
    """Named corpora; ``file:PATH`` works besides these."""
    return ["pydoc", "tinyshakespeare"]


note_other_data(list_texts(), "a text corpus (for language models)")


@lru_cache(maxsize=1)
def _pydoc_text() -> str:
    from pydoc_data.topics import topics

    return "\n".join(topics[k] for k in sorted(topics))  # sorted keys: the same text on every run


def _tinyshakespeare(root: Path, download: bool) -> str:
    path = root / "tinyshakespeare" / "input.txt"
    if not path.is_file():
        fix = f"save {TINYSHAKESPEARE_URL} as {path}"
        if not download:
            raise DataError(f"tinyshakespeare not found: {fix}, or pass download=True when online")
        log.info("downloading %s to %s", TINYSHAKESPEARE_URL, path)
        try:
            with urllib.request.urlopen(TINYSHAKESPEARE_URL, timeout=_DOWNLOAD_TIMEOUT_S) as r:
                data = r.read()
        except (urllib.error.URLError, OSError) as e:
            raise DataError(f"could not download tinyshakespeare ({e}); you look offline: {fix}") from e
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: a half-written file never looks complete
    check_text(f"file:{path}")  # an empty or unreadable copy: one line
    return _read_file(path)


def _read_file(path: Path) -> str:
    """The file's text (:func:`check_text` has said it exists, is readable and is not empty)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path} is not UTF-8 text ({e}); convert it, e.g. iconv -t utf-8") from e
    except OSError as e:
        raise DataError(f"cannot read {path} ({e}); check that it is a readable file") from e


def check_text(name: str) -> None:
    """Refuse, before a run is stored, a corpus that cannot load: an unknown name, a missing, unreadable or
    empty file (without reading a large one whole: files are read in full when the run starts).

    >>> check_text("pydoc")
    >>> check_text("file:/no/such/file.txt")
    Traceback (most recent call last):
    ...
    stitchcore.errors.DataError: text file /no/such/file.txt not found; check the path after file:
    """
    if name in list_texts():
        return
    if not (name.startswith("file:") and len(name) > len("file:")):
        raise DataError(f"unknown text corpus {name!r}; use one of {', '.join(list_texts())} or file:PATH")
    path = Path(name.removeprefix("file:")).expanduser()
    if not path.exists():
        raise DataError(f"text file {path} not found; check the path after file:")
    if not path.is_file() or not os.access(path, os.R_OK):
        raise DataError(f"cannot read {path}; check that it is a readable file")
    if path.stat().st_size == 0:
        raise DataError(f"{path} is empty; give a file with some text in it")


def load_text(name: str, *, root: str | Path | None = None, download: bool = True) -> str:
    """A corpus by name (see the module docstring) as one string.

    ``tinyshakespeare`` is read from ``data_root(root)/tinyshakespeare/input.txt`` and fetched
    there first when missing and ``download`` is True; offline, the error says where to put it.
    """
    if name == "pydoc":
        return _pydoc_text()
    if name == "tinyshakespeare":
        return _tinyshakespeare(data_root(root), download)
    check_text(name)  # an unknown name, a missing, unreadable or empty file: one line
    return _read_file(Path(name.removeprefix("file:")).expanduser())


@dataclass(frozen=True)
class CharVocab:
    """Character-level vocabulary: token id i is ``chars[i]``.

    >>> v = CharVocab.from_text("hello")
    >>> v.chars, v.encode("hole").tolist()
    ('ehlo', [1, 3, 2, 0])
    """

    chars: str  # every symbol once, index = token id; sorted when built by from_text

    def __post_init__(self) -> None:
        if not self.chars:
            raise DataError("a CharVocab needs at least one character; build it with CharVocab.from_text")
        if len(set(self.chars)) != len(self.chars):
            raise DataError("CharVocab chars repeat a character; each symbol must appear once")

    @classmethod
    def from_text(cls, text: str) -> CharVocab:
        """The sorted set of characters in ``text``."""
        return cls("".join(sorted(set(text))))

    @property
    def size(self) -> int:
        """Number of tokens (the model's vocab_size)."""
        return len(self.chars)

    @cached_property
    def _lookup(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted code points [V], token id of each [V]) for vectorised encoding."""
        cps = np.array([ord(c) for c in self.chars], dtype=np.int64)
        order = np.argsort(cps)
        return cps[order], order.astype(np.int64)

    def encode(self, text: str) -> torch.Tensor:
        """Token ids int64 [T]; a character outside the vocabulary raises DataError naming it."""
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.int64)  # [T]
        keys, ids = self._lookup
        pos = np.searchsorted(keys, cps).clip(max=len(keys) - 1)
        unknown = keys[pos] != cps
        if unknown.any():
            bad = "".join(sorted({chr(c) for c in cps[unknown][:1000]}))
            raise DataError(
                f"characters {bad!r} are not in the vocabulary; build it from this text "
                "(CharVocab.from_text) or remove them"
            )
        return torch.from_numpy(ids[pos])

    def decode(self, ids: torch.Tensor | list[int]) -> str:
        """Text of token ids [T]."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        if ids and not 0 <= min(ids) <= max(ids) < self.size:
            raise DataError(f"token ids must lie in 0..{self.size - 1}; were they made with another vocab?")
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return {"chars": self.chars}

    @classmethod
    def from_dict(cls, d: dict) -> CharVocab:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(d, dict) or not isinstance(d.get("chars"), str):
            raise DataError('a CharVocab dict needs a "chars" string, e.g. {"chars": "abc"}')
        return cls(d["chars"])

    def to_json(self) -> str:
        """One JSON object (non-ASCII characters kept as escapes, so the file is ASCII)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, s: str) -> CharVocab:
        """Inverse of :meth:`to_json`."""
        try:
            return cls.from_dict(json.loads(s))
        except json.JSONDecodeError as e:
            raise DataError(f"not a CharVocab JSON ({e}); expected {{\"chars\": \"...\"}}") from e


def char_splits(text: str, vocab: CharVocab, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode ``text`` and cut it into (train ids [N], val ids [M]): the last ``val_fraction`` is val."""
    if not 0.0 < val_fraction < 1.0:
        raise DataError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction}")
    ids = vocab.encode(text)
    n_val = int(round(len(ids) * val_fraction))
    if n_val < 2 or len(ids) - n_val < 2:
        raise DataError(f"text of {len(ids)} characters is too short to split; use a longer corpus")
    return ids[: len(ids) - n_val], ids[len(ids) - n_val :]


def lm_batches(
    ids: torch.Tensor, block_size: int, batch_size: int, seed: int, steps: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield ``steps`` batches of random windows: (x int64 [B, T], y int64 [B, T]) with y = x shifted by one.

    The windows come from a generator seeded with ``seed``: same arguments, same batches.
    """
    if block_size < 1 or batch_size < 1 or steps < 0:
        got = f"got {block_size}, {batch_size}, {steps}"
        raise DataError(f"need block_size >= 1, batch_size >= 1, steps >= 0; {got}")
    if ids.ndim != 1 or ids.dtype != torch.int64:
        raise DataError(f"ids must be int64 [N] (from CharVocab.encode), got {ids.dtype} {tuple(ids.shape)}")
    if len(ids) < block_size + 1:
        raise DataError(
            f"{len(ids)} tokens are too few for block_size {block_size} (needs {block_size + 1}); "
            "lower the block size or use a longer corpus"
        )
    g = torch.Generator().manual_seed(seed)
    offsets = torch.arange(block_size)  # [T]
    for _ in range(steps):
        starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=g)  # [B]
        idx = starts[:, None] + offsets  # [B, T]
        yield ids[idx], ids[idx + 1]
