"""Hostile image folders (issue 45): sizes, decompression bombs, broken and special files, class names that
collide, link loops, too many classes.  Each is refused in one line naming the file or the fix, before the
images are allocated, through the library and the CLI, and the store is left as it was (hashed before and after).

Bombs are small files: a PNG whose header claims 40000x40000 (written 1x1 by PIL, then its IHDR patched) and a
real 1-bit PNG of 8200x8200 that compresses to a few kB.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import struct
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Self

import pytest
from PIL import Image

from stitchcore.cli.main import main
from stitchcore.data import imagefolder, images, load_dataset
from stitchcore.errors import DataError
from stitchcore.store.results import Store
from tests.conftest import copy_store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def claimed_png(width: int, height: int) -> bytes:
    """A 1x1 PNG whose IHDR (and its CRC) says ``width`` x ``height``: PIL sees the size before any pixel."""
    buf = io.BytesIO()
    Image.new("RGB", (1, 1), (9, 9, 9)).save(buf, "PNG")
    data = bytearray(buf.getvalue())
    assert data[12:16] == b"IHDR"
    ihdr = struct.pack(">II", width, height) + bytes(data[24:29])
    data[8:33] = _chunk(b"IHDR", ihdr)
    return bytes(data)


def one_bit_png(width: int, height: int) -> bytes:
    """A real, valid black 1-bit greyscale PNG: ``width`` x ``height`` pixels in a few kB (a decompression bomb
    for any reader that decodes it: RGB is 3 bytes a pixel)."""
    comp, row = zlib.compressobj(9), b"\x00" + bytes((width + 7) // 8)
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def good_folder(root: Path, classes: tuple[str, ...] = ("cat", "dog")) -> Path:
    """train/ and test/ with two 8x8 images of each class in train and one in test."""
    for split, n in (("train", 2), ("test", 1)):
        for k, cls in enumerate(classes):
            (root / split / cls).mkdir(parents=True)
            for j in range(n):
                Image.new("RGB", (8, 8), (40 * k, 10 * j, 100)).save(root / split / cls / f"{j}.png")
    return root


def put(data: bytes, name: str = "bad.png") -> Callable[[Path, pytest.MonkeyPatch], str]:
    """A builder: the good folder with ``data`` written as train/cat/``name``."""
    def build(root: Path, mp: pytest.MonkeyPatch) -> str:
        (good_folder(root) / "train" / "cat" / name).write_bytes(data)
        return f"imagefolder:{root}"
    return build


def option(query: str) -> Callable[[Path, pytest.MonkeyPatch], str]:
    return lambda root, mp: f"imagefolder:{good_folder(root)}?{query}"


def fifo(root: Path, mp: pytest.MonkeyPatch) -> str:
    os.mkfifo(good_folder(root) / "train" / "cat" / "pipe.png")  # opened, it blocks until a writer comes
    return f"imagefolder:{root}"


def device(root: Path, mp: pytest.MonkeyPatch) -> str:
    os.symlink("/dev/zero", good_folder(root) / "train" / "dog" / "zero.jpg")  # endless bytes
    return f"imagefolder:{root}"


def link_loop_file(root: Path, mp: pytest.MonkeyPatch) -> str:
    os.symlink("self.png", good_folder(root) / "train" / "cat" / "self.png")
    return f"imagefolder:{root}"


def classes(*names: str) -> Callable[[Path, pytest.MonkeyPatch], str]:
    return lambda root, mp: f"imagefolder:{good_folder(root, names)}"


def too_many_classes(root: Path, mp: pytest.MonkeyPatch) -> str:
    mp.setattr(imagefolder, "MAX_CLASSES", 3)  # the bound (10,000), scaled down: 10**6 folders take minutes to make
    return f"imagefolder:{good_folder(root, ('a', 'b', 'c', 'd'))}"


def too_many_files(root: Path, mp: pytest.MonkeyPatch) -> str:
    mp.setattr(imagefolder, "MAX_ENTRIES", 3)  # the bound (10 M), scaled down
    return f"imagefolder:{good_folder(root)}"


def no_memory(root: Path, mp: pytest.MonkeyPatch) -> str:
    mp.setattr(imagefolder, "_free_bytes", lambda: 10_000)
    return f"imagefolder:{good_folder(root)}?size=64"


def half_png() -> bytes:
    buf = io.BytesIO()
    Image.effect_noise((64, 64), 50).save(buf, "PNG")
    return buf.getvalue()[: len(buf.getvalue()) // 2]


# (id, builder(root, monkeypatch) -> dataset name, what the one line says)
ROWS = [
    ("size-a-billion", option("size=1000000000"), "size=1000000000 is outside 1..4096 pixels a side"),
    ("size-5000-digits", option("size=" + "9" * 5000), "is outside 1..4096 pixels a side"),
    ("size-wide", option("size=32x99999"), "size=32x99999 is outside 1..4096"),
    ("size-zero-side", option("size=0x32"), "size=0x32 is outside 1..4096"),
    ("path-unknown-user", lambda root, mp: "imagefolder:~no-such-user-h5/pets", "(Could not determine home directory"),
    ("bomb-header-40000", put(claimed_png(40000, 40000)), "bad.png has more than 64,000,000 pixels"),
    ("bomb-header-10000", put(claimed_png(10000, 10000)), "bad.png is 10000x10000 = 100,000,000 pixels, over the"),
    ("bomb-1bit-8200", put(one_bit_png(8200, 8200)), "bad.png is 8200x8200 = 67,240,000 pixels, over the limit"),
    ("truncated-png", put(half_png()), "cannot read image"),
    ("garbage-named-jpg", put(b"GIF89a but not really an image", "x.jpg"), "x.jpg ("),
    ("empty-png", put(b""), "cannot read image"),
    ("newline-in-name", put(b"junk", "a\nb.png"), "cannot read image '"),
    ("fifo-in-class", fifo, "pipe.png is a FIFO, not an image file"),
    ("device-link", device, "zero.jpg is a device, not an image file"),
    ("link-loop-file", link_loop_file, "self.png (Too many levels of symbolic links)"),
    ("classes-case", classes("Cat", "cat"), "class folders 'Cat' and 'cat'"),
    ("classes-unicode-form", classes("caf\u00e9", "cafe\u0301"), "differ only by case or Unicode form"),
    ("class-control-char", classes("a\tb", "c"), "class folder 'a\\tb'"),
    ("classes-too-many", too_many_classes, "holds more than 3 class folders"),
    ("files-too-many", too_many_files, "more than 3 files and folders"),
    ("memory", no_memory, "6 images at 64x64 need about 147 kB of memory and this machine has 10 kB free"),
]


def snapshot(root: Path) -> tuple:
    """The store's rows and every file's sha256 (SQLite's own files aside: opening may touch them)."""
    with Store(root) as store:
        runs = store.list_runs(limit=10_000)
    files = {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith("stitchlab.sqlite")}
    return runs, files


@pytest.fixture(scope="module")
def store_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-images") / "store"
    copy_store(FIXTURE, root)
    return root


class Unblock:
    """Opens every FIFO under ``root`` for writing after ``seconds`` (then closes it): a reader that opened one
    gets end-of-file instead of waiting forever, so a test of code that opens FIFOs fails instead of hanging."""

    def __init__(self, root: Path, seconds: float = 10.0) -> None:
        self.root, self.timer = root, threading.Timer(seconds, self.fire)

    def fire(self) -> None:
        for p in self.root.rglob("*"):
            if stat.S_ISFIFO(os.lstat(p).st_mode):
                try:
                    os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass  # no reader yet

    def __enter__(self) -> Self:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()


@pytest.mark.parametrize(("name", "build", "needle"), ROWS, ids=[r[0] for r in ROWS])
def test_a_hostile_folder_is_one_line_and_changes_nothing(name, build, needle, tmp_path, monkeypatch, capsys,
                                                          store_root):  # fmt: skip
    dataset = build(tmp_path / "pets", monkeypatch)
    images.clear_cache()
    with Unblock(tmp_path):
        t0 = time.perf_counter()
        with pytest.raises(DataError) as err:
            load_dataset(dataset)
        assert time.perf_counter() - t0 < 10, "refused before the images are read"
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)

    before = snapshot(store_root)  # the CLI: exit 2, one `error: ...` line, the store as it was
    capsys.readouterr()
    with Unblock(tmp_path):
        code = main(["zoo", "train", "--dataset", dataset, "--epochs", "1", "--store", str(store_root), "--quiet"])
    out, errtext = capsys.readouterr()
    assert code == 2 and out == "" and errtext.startswith("error: ") and errtext.count("\n") == 1, errtext
    assert needle in errtext and "Traceback" not in errtext
    assert snapshot(store_root) == before


STREAMED = [r for r in ROWS if r[0] in ("bomb-header-40000", "bomb-1bit-8200", "truncated-png", "fifo-in-class",
                                        "device-link", "newline-in-name")]  # fmt: skip


@pytest.mark.parametrize(("name", "build", "needle"), STREAMED, ids=[r[0] for r in STREAMED])
def test_a_hostile_file_read_per_batch_is_one_line(name, build, needle, tmp_path, monkeypatch):
    """``?full`` keeps the paths and reads each file when a batch needs it: the same checks, the same line."""
    dataset = build(tmp_path / "pets", monkeypatch) + "?full"
    images.clear_cache()
    ds = load_dataset(dataset)  # paths only: nothing is opened yet
    with Unblock(tmp_path), pytest.raises(DataError) as err:
        ds.images("train")
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("links", [1, 2])
def test_a_folder_that_links_to_itself_is_walked_once(tmp_path, links):
    """A class folder holding links back to itself: ImageFolder walked each path until the kernel's link limit
    (40 levels: every image 40 times over with one link, 2**40 paths with two, never ending); each folder is
    walked once per path down to it now, so the dataset is the images that are there."""
    root = good_folder(tmp_path / "pets")
    for k in range(links):
        os.symlink(".", root / "train" / "cat" / f"again{k}")
    images.clear_cache()
    t0 = time.perf_counter()
    ds = load_dataset(f"imagefolder:{root}?size=8")
    assert time.perf_counter() - t0 < 10
    assert ds.class_counts("train").tolist() == [2, 2] and ds.class_counts("test").tolist() == [1, 1]


def test_the_folder_walk_keeps_imagefolder_order(tmp_path):
    """Classes, files and their order as torchvision's ImageFolder gives them (stored runs read folders so): nested
    folders, links to folders, a name in capitals, files that are not images."""
    from torchvision.datasets import ImageFolder

    root = good_folder(tmp_path / "pets", ("b", "a", "Z"))
    (root / "train" / "a" / "deep" / "er").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(root / "train" / "a" / "deep" / "er" / "x.PNG")
    Image.new("RGB", (8, 8)).save(root / "train" / "a" / "deep" / "0.jpeg")
    (root / "train" / "a" / "notes.txt").write_text("not an image")
    os.symlink(root / "test" / "b", root / "train" / "a" / "linked")
    ours = imagefolder._class_folders(root / "train", "x", "")
    theirs = ImageFolder(str(root / "train"), allow_empty=True)
    assert ours == theirs.classes
    walked = [(f, i) for i, c in enumerate(ours) for f in imagefolder._image_files(root / "train" / c, "x", [10**6])]
    assert walked == theirs.samples


def test_the_table_is_large():
    assert len(ROWS) >= 10 and len({r[0] for r in ROWS}) == len(ROWS)


# ---------------------------------------------------------------------------------------- uploads


class _Root:
    def __init__(self, root: Path) -> None:
        self.root = root


@pytest.mark.parametrize("planted", ["link", "other-bytes", "folder-entry", "uploads-is-a-file"])
def test_an_upload_never_trusts_what_was_planted_at_its_name(tmp_path, planted):
    """The upload's content address holds its bytes, or the upload is refused in one line: a link planted at the
    name (to a file of the same size) is replaced, not followed; an ``uploads`` entry that is a file is named."""
    from stitchcore.errors import CheckpointError
    from stitchcore.store.uploads import save_upload

    store, data = _Root(tmp_path / "store"), b"\x80\x02weights" * 10
    first = save_upload(store, "m.pt", data)
    first.unlink()
    other = tmp_path / "other.pt"
    other.write_bytes(bytes(len(data)))  # same size, other bytes
    if planted == "link":
        first.symlink_to(other)
    elif planted == "other-bytes":
        first.write_bytes(bytes(len(data)))
    elif planted == "folder-entry":
        first.mkdir()
    else:
        first.parent.rmdir()
        first.parent.write_bytes(b"not a folder")
    if planted in ("link", "other-bytes"):
        path = save_upload(store, "m.pt", data)
        assert path == first and not path.is_symlink() and path.read_bytes() == data
        assert other.read_bytes() == bytes(len(data))  # the link's target untouched
        return
    with pytest.raises(CheckpointError) as err:
        save_upload(store, "m.pt", data)
    assert "\n" not in str(err.value) and "move it away and upload again" in str(err.value)
