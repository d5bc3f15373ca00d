"""The identity of the files a spec reads (``data_id``), written once for every kind whose spec names a
dataset that can lie on disk (``imagefolder:PATH``, a text ``file:PATH``).  Private to
:mod:`stitchcore.experiments`.

A spec being made (its constructor's default ``"auto"``, ``Spec.new``) measures the files
(:func:`stitchcore.data.fingerprint.data_identity`: the resolved path and a sha256 of the files' names,
sizes and times), so the run id changes with them: the same command on other files is another run, never a
cache hit for numbers measured on other images.  A stored spec (``from_dict``) is read as stored, never
measured.  Built-in data gives None, left out of ``to_dict`` (LEGACY), so the run ids of every spec on built-in
data are those they always were.  :meth:`DataFiles.check_data_files` refuses, in one line, to run a spec whose
files are not (or no longer) the ones it names.

>>> from dataclasses import dataclass
>>> from typing import ClassVar
>>> from stitchcore.experiments._spec import Spec
>>> @dataclass(frozen=True)
... class Demo(DataFiles, Spec):
...     dataset: str | None = None
...     data_id: dict[str, str] | str | None = MEASURE_FILES
...     LEGACY: ClassVar[dict] = {"data_id": None}
...     def __post_init__(self) -> None:
...         self._check_data_id()
>>> Demo("digits").data_id is None, Demo("digits").to_dict(), Demo.from_dict({"dataset": "digits"})
(True, {'dataset': 'digits'}, Demo(dataset='digits', data_id=None))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar, Self

from stitchcore.data.fingerprint import data_identity, data_source, is_identity
from stitchcore.errors import DataError, StitchError

__all__ = ["MEASURE_FILES", "DataFiles", "check_spec_files", "streamed_folder"]

MEASURE_FILES = "auto"  # data_id of a spec being made: the files' identity is measured from disk


def streamed_folder(name: str) -> str:
    """A plain ``imagefolder:PATH`` (no option) as a new run of a pretrained pair reads it (issue 42): per batch,
    at each model's own transform (``?full``), never squashed; ``?size=N`` (the squash, said explicitly), other
    options and other data as given.  A stored spec's plain folder keeps its reading (squashed to 32x32).

    >>> streamed_folder("imagefolder:/data/pets|drop3"), streamed_folder("imagefolder:/data/pets?size=32")
    ('imagefolder:/data/pets?full|drop3', 'imagefolder:/data/pets?size=32')
    >>> streamed_folder("digits")
    'digits'
    """
    return _plain_folder_with(name, "full")


def _plain_folder_with(name: str, option: str) -> str:
    """``name`` with ``option`` added when it is a plain ``imagefolder:PATH`` (no option; transforms after ``|``)."""
    base, sep, rest = name.partition("|")
    if base.startswith("imagefolder:") and "?" not in base:
        return f"{base}?{option}{sep}{rest}"
    return name


def squashed_folder(name: str) -> str:
    """A stored spec's plain ``imagefolder:PATH`` said so that a new spec reads it as the stored run did:
    squashed to 32x32 in memory (``?size=32``); anything else as given.

    >>> squashed_folder("imagefolder:/data/pets|drop3"), squashed_folder("imagefolder:/data/pets?full")
    ('imagefolder:/data/pets?size=32|drop3', 'imagefolder:/data/pets?full')
    """
    return _plain_folder_with(name, "size=32")


class DataFiles:
    """Mixin (before :class:`Spec`) for a spec dataclass with a ``data_id`` field (default
    :data:`MEASURE_FILES`, LEGACY None) whose ``__post_init__`` ends with ``self._check_data_id()``."""

    data_id: dict[str, str] | str | None  # the dataclass's field (declared there, after its other fields)
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("dataset",)  # the fields naming data the spec reads
    DATA_WHAT: ClassVar[str] = "run"  # what a person makes again: "this run was made for"
    # a new spec's plain imagefolder:PATH is read per batch at the models' own transform (streamed_folder); the
    # zoo, which trains a model at the folder's load size, keeps the squash
    STREAMS_FOLDERS: ClassVar[bool] = True
    # how to make it again, named in the refusal
    DATA_FIX: ClassVar[str] = ("run the same command (or the app's page) again: a new run measures the files as "
                               "they are now; the earlier run keeps its results")  # fmt: skip

    @classmethod
    def read_data(cls, field: str, value: Any) -> Any:
        """``value`` of ``field`` as a new spec of this class reads it (a plain folder streamed, where the class
        streams): what a lesson's choice or a student's pick means, compared with the step's own value."""
        return streamed_folder(value) if cls._names_data(field, value) else value

    @classmethod
    def said_data(cls, field: str, value: Any) -> Any:
        """``value`` of ``field`` written for a link or a command line, so that the new spec they make reads the
        data as this spec does (a stored plain folder: ``?size=32``, the squash it computed)."""
        return squashed_folder(value) if cls._names_data(field, value) else value

    @classmethod
    def _names_data(cls, field: str, value: Any) -> bool:
        """Whether ``value`` of ``field`` names data this class reads a plain folder of by today's reading."""
        return cls.STREAMS_FOLDERS and field in cls.DATA_FIELDS and isinstance(value, str)

    def data_sources(self) -> tuple[str, ...]:
        """The datasets the spec names (its DATA_FIELDS that are set), in order."""
        return tuple(str(v) for n in self.DATA_FIELDS if (v := getattr(self, n)) is not None)

    def reads_files(self) -> bool:
        """True when one of the spec's datasets is read from disk (imagefolder:, file:)."""
        return any(data_source(d) for d in self.data_sources())

    def _check_data_id(self) -> None:
        """``data_id`` measured (a spec being made), or checked for its shape (one read from a store)."""
        data_id = self.data_id
        if data_id == MEASURE_FILES:  # a spec being made: today's reading of a plain folder, then its files
            for name in self.DATA_FIELDS if self.STREAMS_FOLDERS else ():
                if isinstance(value := getattr(self, name), str):
                    object.__setattr__(self, name, streamed_folder(value))
            object.__setattr__(self, "data_id", data_identity(*self.data_sources()))
        elif data_id is not None:
            if not is_identity(data_id):
                shape = '{"path": ..., "sha256": 64 hex digits}'
                raise StitchError(f"data_id must be the files' identity {shape} (got {str(data_id)[:60]!r}); "
                                  f"leave it out: a new {self.DATA_WHAT} measures it")  # fmt: skip
            if not self.reads_files():
                first = getattr(self, self.DATA_FIELDS[0])
                raise StitchError(f"data_id is the identity of files, and {first!r} is not read from files "
                                  "(imagefolder:PATH, file:PATH); leave it out")  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """A stored spec as it was stored: its ``data_id`` is read, never measured from this machine's disk
        (a bundle's spec keeps its run id whatever files lie here)."""
        if isinstance(d, Mapping) and d.get("data_id") == MEASURE_FILES:
            raise StitchError(f"a stored {cls.DATA_WHAT}'s data_id is the identity its files had, not "
                              f"{MEASURE_FILES!r}; leave it out when writing a new {cls.DATA_WHAT}: it is "
                              "measured then")  # fmt: skip
        return super().from_dict(d)  # type: ignore[misc]

    @classmethod
    def new(cls, d: Mapping[str, Any]) -> Self:
        """A spec being made (a lesson's, one written by hand): its files' identity is measured now, never
        taken as written."""
        return replace(super().new({**d, "data_id": None}), data_id=MEASURE_FILES)  # type: ignore[misc]

    def check_data_files(self) -> None:
        """DataError unless the spec's files are, now, the ones its ``data_id`` names (a spec on files stored
        before data_id was recorded is refused too: made again, its run id names its files)."""
        if not self.reads_files():
            return
        sources, then = self.data_sources(), self.data_id
        if then is None:
            raise DataError(f"this {self.DATA_WHAT} on {sources[0]} does not record its files' identity "
                            f"(data_id; a {self.DATA_WHAT} stored before it was kept); {self.DATA_FIX}")
        now = data_identity(*sources)
        if now != then and isinstance(then, dict) and now is not None:
            raise DataError(f"the files of {sources[0]} are not the ones this {self.DATA_WHAT} was made for "
                            f"(then {then['path']} {then['sha256'][:6]}, now {now['path']} {now['sha256'][:6]}): "
                            f"{self.DATA_FIX}")  # fmt: skip


def check_spec_files(spec: Any) -> None:
    """:meth:`DataFiles.check_data_files` of a spec that records its files; nothing for any other spec."""
    if isinstance(spec, DataFiles):
        spec.check_data_files()
