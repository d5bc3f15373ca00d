"""Datasets, trait transforms and text corpora.

The torchvision-backed sources are fed tiny files written here in the real on-disk
formats (IDX, CIFAR python pickles, PNG folders); nothing touches the network.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from stitchcore.data import images as D
from stitchcore.data.images import ImageDataset, drop_class, list_datasets, load_dataset, relabel
from stitchcore.errors import DataError
from stitchcore.data.text import CharVocab, char_splits, list_texts, lm_batches, load_text


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    """Every test gets its own data root and no network (urlopen fails as it does offline)."""
    monkeypatch.setenv("STITCHLAB_DATA", str(tmp_path / "default-root"))

    def no_network(*args, **kwargs):
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)


@pytest.fixture(scope="module")
def digits() -> ImageDataset:
    return load_dataset("digits")


# ---------------------------------------------------------------------------- digits


def test_digits_shapes_split_and_values(digits):
    assert digits.name == "digits" and digits.classes == tuple("0123456789")
    assert digits.x_train.shape == (1347, 1, 8, 8) and digits.x_test.shape == (450, 1, 8, 8)
    assert digits.x_train.dtype == torch.uint8 and digits.y_train.dtype == torch.int64
    assert digits.num_classes == 10 and digits.image_shape == (1, 8, 8)
    assert int(digits.x_train.max()) == 255 and int(digits.x_train.min()) == 0
    # 0..16 -> 0..255 by *255/16 rounded: only those 17 values occur
    allowed = set(np.rint(np.arange(17) * 255 / 16).astype(int).tolist())
    assert set(torch.unique(torch.cat([digits.x_train, digits.x_test])).tolist()) <= allowed
    x = digits.images("test")
    assert x.dtype == torch.float32 and x.shape == (450, 1, 8, 8) and 0 <= x.min() and x.max() <= 1
    assert "1347" in repr(digits) and "tensor" not in repr(digits)


def test_digits_split_is_stratified(digits):
    train, test = digits.class_counts("train"), digits.class_counts("test")
    total = train + test
    assert int(total.sum()) == 1797
    assert ((test.double() - 0.25 * total.double()).abs() <= 1).all()


def test_digits_deterministic_and_cached(digits):
    assert load_dataset("digits") is load_dataset("digits")
    D.clear_cache()
    again = load_dataset("digits")
    assert again is not digits
    for field in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(again, field), getattr(digits, field))


def test_mean_std_match_direct_computation(digits):
    x = digits.x_train.double() / 255
    assert digits.mean == pytest.approx([x.mean().item()], abs=1e-9)
    assert digits.std == pytest.approx([x.std(unbiased=False).item()], abs=1e-9)


def test_list_and_unknown_names():
    assert {"digits", "mnist", "fashion-mnist", "cifar10", "cifar100"} <= set(list_datasets())
    with pytest.raises(DataError, match="did you mean 'mnist'"):
        load_dataset("MNST")
    with pytest.raises(DataError, match="unknown dataset transform"):
        load_dataset("digits|shuffle")


def test_dataset_validation():
    x, y = torch.zeros(4, 1, 2, 2, dtype=torch.uint8), torch.tensor([0, 1, 0, 1])
    ImageDataset("ok", ("a", "b"), x, y, x, y)
    with pytest.raises(DataError, match="uint8"):
        ImageDataset("bad", ("a", "b"), x.float(), y, x, y)
    with pytest.raises(DataError, match="int64"):
        ImageDataset("bad", ("a", "b"), x, y[:3], x, y)
    with pytest.raises(DataError, match="test split is empty"):
        ImageDataset("bad", ("a", "b"), x, y, x[:0], y[:0])
    with pytest.raises(DataError, match="labels must lie in 0..1"):
        ImageDataset("bad", ("a", "b"), x, y + 1, x, y)
    with pytest.raises(DataError, match="resize"):
        ImageDataset("bad", ("a", "b"), x, y, torch.zeros(4, 1, 3, 3, dtype=torch.uint8), y)


# ---------------------------------------------------------------------------- batches and subsets


def test_batches_cover_everything_once_and_are_deterministic(digits):
    def run(**kw):
        return list(digits.batches("train", 100, **kw))

    plain = run()
    assert [len(y) for _, y in plain] == [100] * 13 + [47]
    assert torch.equal(torch.cat([x for x, _ in plain]), digits.images("train"))
    shuffled, same, other = run(shuffle=True, seed=1), run(shuffle=True, seed=1), run(shuffle=True, seed=2)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(shuffled, same))
    assert not torch.equal(shuffled[0][1], other[0][1])
    ys = torch.cat([y for _, y in shuffled])
    assert torch.equal(ys.sort().values, digits.y_train.sort().values)
    # each image appears exactly once: compare sorted flattened rows
    xs = torch.cat([x for x, _ in shuffled]).flatten(1)
    key = lambda t: sorted(map(tuple, t.tolist()))  # noqa: E731
    assert key(xs) == key(digits.images("train").flatten(1))
    assert sum(len(y) for _, y in digits.batches("test", 32, shuffle=True, limit=70)) == 70
    with pytest.raises(DataError, match="batch_size"):
        next(digits.batches("train", 0))
    with pytest.raises(DataError, match="unknown split"):
        next(digits.batches("valid", 8))


def test_subset_is_stratified_and_rebuildable(digits):
    sub = digits.subset("train", 100, seed=3)
    assert sub.name == "digits|subset100s3"
    assert sub.class_counts("train").tolist() == [10] * 10
    assert torch.equal(sub.y_test, digits.y_test)
    assert torch.equal(load_dataset(sub.name).x_train, sub.x_train)
    assert not torch.equal(digits.subset("train", 100, seed=4).x_train, sub.x_train)
    test_sub = digits.subset("test", 25)
    assert test_sub.name == "digits|subset25s0@test" and len(test_sub.y_test) == 25
    assert test_sub.class_counts("test").max() - test_sub.class_counts("test").min() <= 1


# ---------------------------------------------------------------------------- trait transforms


def test_relabel(digits):
    r = relabel(digits, 3, 8)
    before, after = digits.class_counts("train"), r.class_counts("train")
    assert after[3] == 0 and after[8] == before[3] + before[8]
    assert torch.equal(r.y_test, digits.y_test) and torch.equal(r.x_train, digits.x_train)
    assert r.name == "digits|relabel3to8" and r.classes == digits.classes
    assert torch.equal(load_dataset("digits|relabel3to8").y_train, r.y_train)
    both = relabel(digits, 3, 8, splits=("test", "train"))
    assert both.name == "digits|relabel3to8@train+test" and both.class_counts("test")[3] == 0
    assert torch.equal(load_dataset(both.name).y_test, both.y_test)
    assert torch.equal(digits.y_train, load_dataset("digits").y_train)  # the original is untouched


@pytest.mark.parametrize("src,dst", [(10, 1), (-1, 2), (True, 2), (3, 3)])
def test_relabel_rejects_bad_classes(digits, src, dst):
    with pytest.raises(DataError):
        relabel(digits, src, dst)


def test_drop_class(digits):
    d = drop_class(digits, 3)
    assert d.name == "digits|drop3" and d.class_counts("train")[3] == 0
    assert len(d.y_train) == len(digits.y_train) - int(digits.class_counts("train")[3])
    assert torch.equal(d.x_train, digits.x_train[digits.y_train != 3])
    assert torch.equal(d.y_test, digits.y_test) and d.num_classes == 10
    assert load_dataset("digits|drop3|relabel5to1").name == "digits|drop3|relabel5to1"
    with pytest.raises(DataError, match="does not exist"):
        drop_class(digits, 12)
    with pytest.raises(DataError, match="splits"):
        drop_class(digits, 1, splits=("val",))


# ---------------------------------------------------------------------------- MNIST / Fashion-MNIST (IDX files)


def write_idx(path: Path, arr: np.ndarray) -> None:
    """IDX: magic 0x0000 08 <ndim>, big-endian uint32 dims, then the uint8 data."""
    header = struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    path.write_bytes(header + arr.astype(np.uint8).tobytes())


def write_mnist(root: Path, folder: str, n_train: int = 50, n_test: int = 20) -> dict[str, np.ndarray]:
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        arrays[f"{split}-images"] = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        arrays[f"{split}-labels"] = (np.arange(n) % 10).astype(np.uint8)
        write_idx(raw / f"{split}-images-idx3-ubyte", arrays[f"{split}-images"])
        write_idx(raw / f"{split}-labels-idx1-ubyte", arrays[f"{split}-labels"])
    return arrays


@pytest.mark.parametrize("name,folder", [("mnist", "MNIST"), ("fashion-mnist", "FashionMNIST")])
def test_idx_datasets_load_from_root(tmp_path, name, folder):
    arrays = write_mnist(tmp_path, folder)
    ds = load_dataset(name, root=tmp_path)
    assert ds.name == name and ds.num_classes == 10
    assert ds.x_train.shape == (50, 1, 28, 28) and ds.x_test.shape == (20, 1, 28, 28)
    assert np.array_equal(ds.x_train[:, 0].numpy(), arrays["train-images"])
    assert np.array_equal(ds.y_test.numpy(), arrays["t10k-labels"].astype(np.int64))
    assert ds.y_train.dtype == torch.int64
    expected = "T-shirt/top" if name == "fashion-mnist" else "0 - zero"
    assert ds.classes[0] == expected


def test_mnist_root_from_environment(tmp_path, monkeypatch):
    write_mnist(tmp_path / "env-root", "MNIST")
    monkeypatch.setenv("STITCHLAB_DATA", str(tmp_path / "env-root"))
    assert len(load_dataset("mnist").y_train) == 50


def test_mnist_missing_says_where_to_put_files(tmp_path):
    with pytest.raises(DataError) as e:
        load_dataset("mnist", root=tmp_path)
    msg = str(e.value)
    assert f"mnist not found under {tmp_path}" in msg
    assert str(tmp_path / "MNIST" / "raw") in msg and "train-images-idx3-ubyte" in msg and "download=True" in msg


def test_mnist_download_offline_names_the_fix(tmp_path):
    with pytest.raises(DataError, match="offline") as e:
        load_dataset("mnist", root=tmp_path, download=True)
    assert str(tmp_path / "MNIST" / "raw") in str(e.value)


def test_mnist_corrupt_file(tmp_path):
    write_mnist(tmp_path, "MNIST")
    (tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03garbage")
    with pytest.raises(DataError, match="unreadable"):
        load_dataset("mnist", root=tmp_path)


def test_missing_class_in_test_split(tmp_path):
    arrays = write_mnist(tmp_path, "MNIST")
    labels = arrays["t10k-labels"].copy()
    labels[labels == 7] = 1
    write_idx(tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte", labels)
    with pytest.raises(DataError, match="no test examples of classes 7 - seven"):
        load_dataset("mnist", root=tmp_path)


# ---------------------------------------------------------------------------- CIFAR (python pickles)

CIFAR10_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]


def write_cifar10(root: Path, protocol: int = 2, n: int = 10) -> dict[str, dict]:
    """The python version's layout: pickled dicts, data uint8 [n, 3072] as R, G, B planes."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    written = {}
    for i, f in enumerate([*CIFAR10_TRAIN, "test_batch"]):
        entry = {
            "batch_label": f"batch {i}",
            "labels": [(j + i) % 10 for j in range(n)],
            "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            "filenames": [f"img_{i}_{j}.png" for j in range(n)],
        }
        if f == "data_batch_2":  # files pickled with bytes keys load too
            entry = {k.encode(): v for k, v in entry.items()}
        (folder / f).write_bytes(pickle.dumps(entry, protocol=protocol))
        written[f] = entry
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": names, "num_vis": 3072}, protocol=protocol))
    return written


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar10_loads_pickled_batches(tmp_path, protocol):
    written = write_cifar10(tmp_path, protocol)
    ds = load_dataset("cifar10", root=tmp_path)
    assert ds.x_train.shape == (50, 3, 32, 32) and ds.x_test.shape == (10, 3, 32, 32)
    assert ds.classes[1] == "automobile" and ds.num_classes == 10
    data = written["data_batch_1"]["data"]
    i, c, h, w = 4, 2, 5, 30
    assert int(ds.x_train[i, c, h, w]) == int(data[i, c * 1024 + h * 32 + w])  # CHW from the plane layout
    assert torch.equal(ds.x_test.flatten(1), torch.from_numpy(written["test_batch"]["data"]))
    assert ds.y_train[10:20].tolist() == written["data_batch_2"][b"labels"]
    assert len(ds.mean) == 3


def test_cifar10_written_under_numpy1_module_names(tmp_path):
    """Protocol-2 files name ``numpy.core.multiarray`` (numpy 1, like the published files)."""
    write_cifar10(tmp_path)
    for f in (tmp_path / "cifar-10-batches-py").iterdir():
        raw = f.read_bytes()
        f.write_bytes(raw.replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    assert b"numpy.core.multiarray" in (tmp_path / "cifar-10-batches-py" / "test_batch").read_bytes()
    assert load_dataset("cifar10", root=tmp_path).x_train.shape == (50, 3, 32, 32)


class _Evil:
    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return os.mkdir, (self.target,)


def test_cifar_refuses_pickles_that_run_code(tmp_path):
    write_cifar10(tmp_path)
    marker = tmp_path / "pwned"
    evil = {"data": _Evil(str(marker)), "labels": [0]}
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(pickle.dumps(evil, protocol=2))
    with pytest.raises(DataError, match="not allowed"):
        load_dataset("cifar10", root=tmp_path)
    assert not marker.exists()


def test_cifar_missing_and_offline(tmp_path):
    with pytest.raises(DataError) as e:
        load_dataset("cifar10", root=tmp_path)
    assert str(tmp_path / "cifar-10-batches-py") in str(e.value) and "download=True" in str(e.value)
    with pytest.raises(DataError, match="offline"):
        load_dataset("cifar100", root=tmp_path, download=True)


def test_cifar100_fine_labels(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    rng = np.random.default_rng(2)
    for f, n in (("train", 200), ("test", 100)):
        entry = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), "fine_labels": [j % 100 for j in range(n)]}
        entry["coarse_labels"] = [j % 20 for j in range(n)]
        (folder / f).write_bytes(pickle.dumps(entry))
    names = [f"class{k}" for k in range(100)]
    (folder / "meta").write_bytes(pickle.dumps({"fine_label_names": names, "coarse_label_names": names[:20]}))
    ds = load_dataset("cifar100", root=tmp_path)
    assert ds.num_classes == 100 and ds.x_train.shape == (200, 3, 32, 32) and ds.y_test[99] == 99


# ---------------------------------------------------------------------------- imagefolder

COLORS = {"cat": (200, 10, 10), "dog": (10, 200, 10), "fox": (10, 10, 200)}


def write_folder(root: Path, test_name: str = "test", classes=COLORS, n_train: int = 3, n_test: int = 2) -> Path:
    for split, n in (("train", n_train), (test_name, n_test)):
        for cls in classes:
            d = root / split / cls
            d.mkdir(parents=True)
            for j in range(n):
                Image.new("RGB", (16, 16), COLORS[cls]).save(d / f"{j}.png")
    return root


def test_imagefolder_loads_and_resizes(tmp_path):
    root = write_folder(tmp_path / "pets")
    Image.new("L", (40, 30), 128).save(root / "train" / "dog" / "gray.png")  # other size and mode
    (root / "train" / "dog" / "notes.txt").write_text("not an image")  # ignored by extension
    ds = load_dataset(f"imagefolder:{root}?size=16")
    assert ds.name == f"imagefolder:{root.resolve()}?size=16"
    assert ds.classes == ("cat", "dog", "fox") and ds.x_train.shape == (10, 3, 16, 16)
    assert ds.x_test.shape == (6, 3, 16, 16) and ds.class_counts("train").tolist() == [3, 4, 3]
    first_cat = ds.x_train[ds.y_train == 0][0]
    assert first_cat[:, 0, 0].tolist() == list(COLORS["cat"])
    assert ds.x_train[ds.y_train == 1][-1].unique().tolist() == [128]  # gray -> RGB (its file sorts last)
    default = load_dataset(f"imagefolder:{root}")
    assert default.name == f"imagefolder:{root.resolve()}" and default.image_shape == (3, 32, 32)
    assert load_dataset(f"imagefolder:{root}?size=8x12").image_shape == (3, 8, 12)


def test_imagefolder_val_folder_and_test_class_order(tmp_path):
    root = write_folder(tmp_path / "v", test_name="val")
    ds = load_dataset(f"imagefolder:{root}?size=4")
    assert len(ds.y_test) == 6 and ds.class_counts("test").tolist() == [2, 2, 2]


def test_imagefolder_errors(tmp_path):
    with pytest.raises(DataError, match="is not a folder"):
        load_dataset(f"imagefolder:{tmp_path / 'nowhere'}")
    (tmp_path / "empty" / "train").mkdir(parents=True)
    (tmp_path / "empty" / "test").mkdir()
    with pytest.raises(DataError, match="no class folders"):
        load_dataset(f"imagefolder:{tmp_path / 'empty'}")
    root = write_folder(tmp_path / "a")
    for f in (root / "test" / "fox").iterdir():
        f.unlink()
    with pytest.raises(DataError, match="no test images of classes fox"):
        load_dataset(f"imagefolder:{root}")
    root = write_folder(tmp_path / "b", classes=["cat", "dog"])
    (root / "test" / "fox").mkdir()
    Image.new("RGB", (4, 4)).save(root / "test" / "fox" / "x.png")
    with pytest.raises(DataError, match="classes fox are in test/ but not in train/"):
        load_dataset(f"imagefolder:{root}")
    root = write_folder(tmp_path / "c", classes=["cat", "dog"])
    (root / "train" / "cat" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match="cannot read image .*broken.png"):
        load_dataset(f"imagefolder:{root}")
    with pytest.raises(DataError, match="size=N"):
        load_dataset(f"imagefolder:{root}?width=3")


def test_a_one_class_dataset_is_refused(tmp_path):
    """One class would train a "100% accurate" model that means nothing."""
    root = write_folder(tmp_path / "one", classes=["cat"])
    with pytest.raises(DataError, match="at least 2 classes, found only 'cat'.*add a folder per class"):
        load_dataset(f"imagefolder:{root}")


# ---------------------------------------------------------------------------- text


def test_pydoc_corpus_is_large_and_stable():
    text = load_text("pydoc")
    assert len(text) > 400_000 and load_text("pydoc") == text
    assert "pydoc" in list_texts()


def test_file_corpus_and_errors(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("héllo wörld\n", encoding="utf-8")
    assert load_text(f"file:{f}") == "héllo wörld\n"
    with pytest.raises(DataError, match="not found"):
        load_text(f"file:{tmp_path / 'missing.txt'}")
    f.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(DataError, match="UTF-8"):
        load_text(f"file:{f}")
    f.write_text("")
    with pytest.raises(DataError, match="empty"):
        load_text(f"file:{f}")
    with pytest.raises(DataError, match="unknown text corpus"):
        load_text("shakespeare")


def test_tinyshakespeare_offline_and_local(tmp_path):
    with pytest.raises(DataError, match="offline") as e:
        load_text("tinyshakespeare", root=tmp_path)
    path = tmp_path / "tinyshakespeare" / "input.txt"
    assert str(path) in str(e.value) and not path.exists()
    with pytest.raises(DataError, match="download=True"):
        load_text("tinyshakespeare", root=tmp_path, download=False)
    path.parent.mkdir()
    path.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n")
    assert load_text("tinyshakespeare", root=tmp_path).startswith("First Citizen")


def test_char_vocab_roundtrip():
    text = load_text("pydoc")
    vocab = CharVocab.from_text(text)
    ids = vocab.encode(text)
    assert ids.dtype == torch.int64 and ids.shape == (len(text),) and int(ids.max()) == vocab.size - 1
    assert vocab.decode(ids) == text
    odd = CharVocab("zaé→\n")  # unsorted, non-ASCII
    assert odd.decode(odd.encode("é→za")) == "é→za" and odd.encode("a").tolist() == [1]
    assert CharVocab.from_json(odd.to_json()) == odd and json.loads(odd.to_json()) == {"chars": "zaé→\n"}
    with pytest.raises(DataError, match="'Q'"):
        odd.encode("zQa")
    with pytest.raises(DataError, match="once"):
        CharVocab("aba")
    with pytest.raises(DataError, match="0..4"):
        odd.decode([5])
    with pytest.raises(DataError, match="chars"):
        CharVocab.from_json('{"letters": "abc"}')


def test_char_splits_and_lm_batches():
    text = load_text("pydoc")
    vocab = CharVocab.from_text(text)
    train, val = char_splits(text, vocab, val_fraction=0.1)
    assert len(train) + len(val) == len(text) and abs(len(val) - 0.1 * len(text)) <= 1
    assert vocab.decode(val[:50]) == text[len(train) : len(train) + 50]
    batches = list(lm_batches(train, 32, 8, 0, 3))
    assert len(batches) == 3
    x, y = batches[0]
    assert x.shape == (8, 32) and y.shape == (8, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    again = list(lm_batches(train, 32, 8, 0, 3))
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(batches, again))
    assert not torch.equal(next(lm_batches(train, 32, 8, 1, 1))[0], x)
    with pytest.raises(DataError, match="too few"):
        next(lm_batches(train[:10], 32, 8, 0, 1))
    with pytest.raises(DataError, match="val_fraction"):
        char_splits(text, vocab, val_fraction=1.0)
