"""``imagefolder:PATH?full``: files read per batch at full resolution, each model's own transform applied to the
original image; bad files get one line naming them; a stitch runs on it end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from stitchcore.data.images import clear_cache, load_dataset
from stitchcore.errors import DataError
from stitchcore.models.sources import load_model

SIZES = [(300, 400), (256, 256), (80, 64), (500, 333)]  # (H, W): mixed sizes and aspect ratios


def _photo(h: int, w: int, seed: int, mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(seed)
    coarse = Image.fromarray((rng.random((6, 6, 3)) * 255).astype(np.uint8), "RGB")
    return coarse.resize((w, h), Image.Resampling.BICUBIC).convert(mode)  # smooth: resampling differences stay small


@pytest.fixture
def folder(tmp_path):
    """2 classes; train has mixed sizes, a greyscale, an RGBA and a palette file; test has 3 per class."""
    modes = ["RGB", "L", "RGBA", "P"]
    for split, n in (("train", 8), ("test", 3)):
        for c in ("cat", "dog"):
            d = tmp_path / split / c
            d.mkdir(parents=True)
            for i in range(n):
                h, w = SIZES[i % len(SIZES)]
                _photo(h, w, seed=i + (100 if c == "dog" else 0), mode=modes[i % 4]).save(d / f"{i}.png")
    clear_cache()
    yield tmp_path
    clear_cache()


def test_files_are_kept_as_paths_and_labels_as_in_memory(folder):
    ds = load_dataset(f"imagefolder:{folder}?full")
    assert ds.streamed and ds.name == f"imagefolder:{folder}?full"
    assert ds.classes == ("cat", "dog") and len(ds.labels("train")) == 16 and ds.image_shape == (3, 224, 224)
    small = load_dataset(f"imagefolder:{folder}?size=32")  # the in-memory, squashed form is unchanged
    assert not small.streamed and torch.equal(small.labels("train"), ds.labels("train"))


def test_a_hub_model_gets_its_library_s_transform_of_each_original_file(folder):
    import timm

    ds = load_dataset(f"imagefolder:{folder}?full")
    m = load_model("timm:resnet50?pretrained=false&num_classes=2")
    theirs_fn = timm.data.create_transform(**timm.data.resolve_data_config({}, model=m.model))
    x, y = next(ds.model_batches("train", 16, m.preprocess))
    assert x.shape == (16, 3, 224, 224) and y.tolist() == ds.labels("train").tolist()
    for i, path in enumerate(ds.x_train.paths):
        with Image.open(path) as im:
            theirs = theirs_fn(im.convert("RGB"))
        assert float((x[i] - theirs).abs().mean()) < 0.05, path  # resampling differences only


def test_without_a_hub_transform_files_come_at_the_load_size_never_squashed(folder):
    ds = load_dataset(f"imagefolder:{folder}?full&size=64")
    assert ds.name.endswith("?full&size=64") and ds.image_shape == (3, 64, 64)
    x, _ = next(ds.batches("train", 16))
    assert x.shape == (16, 3, 64, 64) and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    with Image.open(ds.x_train.paths[0]) as im:  # 300 x 400: the centre 300 x 300, then 64 x 64
        rgb = im.convert("RGB")
        centre = np.asarray(rgb.crop((50, 0, 350, 300)).resize((64, 64), Image.Resampling.BILINEAR)) / 255.0
        squashed = np.asarray(rgb.resize((64, 64), Image.Resampling.BILINEAR)) / 255.0
    ours = x[0].permute(1, 2, 0).numpy()
    assert np.abs(ours - centre).mean() < 0.02 < np.abs(ours - squashed).mean()


def test_shuffled_batches_keep_images_and_labels_together_and_transforms_apply(folder):
    ds = load_dataset(f"imagefolder:{folder}?full&size=32")
    order = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    xs, ys = zip(*ds.batches("train", 5, shuffle=True, seed=3))
    assert torch.cat(ys).tolist() == ds.labels("train")[order].tolist()
    assert torch.equal(torch.cat(xs), ds.images("train", order))
    dropped = load_dataset(f"imagefolder:{folder}?full&size=32|drop1")
    assert dropped.streamed and len(dropped.labels("train")) == 8 and set(dropped.labels("train").tolist()) == {0}
    sub = load_dataset(f"imagefolder:{folder}?full&size=32|subset4s0")
    assert len(sub.x_train) == 4 and sorted(sub.labels("train").tolist()) == [0, 0, 1, 1]


def test_an_unreadable_file_stops_the_run_with_one_line_naming_it_in_a_worker_too(folder, monkeypatch):
    for i in range(60):  # over the in-process limit: the files are read by a DataLoader worker
        _photo(64, 64, seed=i).save(folder / "train" / "cat" / f"x{i}.png")
    bad = folder / "train" / "cat" / "zz_broken.png"
    bad.write_bytes(b"not an image")
    monkeypatch.setenv("STITCHLAB_DATA_WORKERS", "1")
    clear_cache()
    ds = load_dataset(f"imagefolder:{folder}?full&size=32")
    with pytest.raises(DataError) as err:
        for _ in ds.batches("train", 16):
            pass
    message = str(err.value)
    assert "\n" not in message and str(bad) in message and "remove or replace it" in message


def test_a_stitch_runs_on_a_streamed_folder(folder, tmp_path):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.stitch import StitchSpec
    from stitchcore.store.results import Store

    ref = "timm:test_resnet?pretrained=false&num_classes=2"
    spec = StitchSpec(ref, ref + "&seed=1", "layer1.0", "layer1.0", epochs=1, dataset=f"imagefolder:{folder}?full")
    with Store(tmp_path / "store") as store:
        out = run_experiment("stitch", spec, store, device="cpu").record.summary
    assert out["dataset"] == f"imagefolder:{folder}?full" and out["n_test"] == 6
    assert (out["n_train"], out["n_val"]) == (14, 2)  # 10% of the 16 train images held out as validation
    assert 0.0 <= out["accuracy"] <= 1.0


def test_over_the_activation_budget_a_stitch_streams_its_prefix_and_learns_the_same(tmp_path, monkeypatch):
    """Under the budget the prefix activations are cached; over it each batch's are computed when it is drawn.
    Same data, order and adapter: the two runs agree (up to float rounding of different batch shapes)."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.stitch import StitchSpec
    from stitchcore.store.results import Store

    ref = "timm:test_resnet?pretrained=false&num_classes=10"
    spec = StitchSpec(ref, ref + "&seed=1", "layer1.0", "layer1.0", epochs=2, dataset="digits", max_train=128,
                      max_test=64, objective="task+0.5*match")
    with Store(tmp_path / "cached") as store:
        cached = run_experiment("stitch", spec, store, device="cpu").record.summary
    monkeypatch.setenv("STITCHLAB_ACT_BUDGET_MB", "1")  # the cache: 320 x 32x40x40 floats, ~66 MB
    with Store(tmp_path / "streamed") as store:
        streamed = run_experiment("stitch", spec, store, device="cpu").record.summary
    assert "activations" not in cached and streamed["activations"] == "streamed"
    assert streamed["n_train"] == cached["n_train"] == 128 and streamed["n_test"] == cached["n_test"] == 64
    assert abs(streamed["lstsq_residual"] - cached["lstsq_residual"]) < 1e-3
    for got, want in zip(streamed["history"], cached["history"], strict=True):
        assert abs(got["train_loss"] - want["train_loss"]) < 1e-3 * max(1.0, want["train_loss"])
    assert abs(streamed["accuracy"] - cached["accuracy"]) <= 1 / 64
    assert streamed["base"] == cached["base"]


def test_a_hub_checkpoint_keeps_the_preprocess_and_dataset_it_records(tmp_path):
    """A fine-tuned timm model saved as a file is read with the input it was trained on, not the arch's default."""
    from stitchcore.models.sources.checkpoint import save_checkpoint

    m = load_model("timm:resnet18?pretrained=false&num_classes=10")
    at_64 = m.preprocess.at_size(64)
    path = save_checkpoint(m.model, tmp_path / "r18.safetensors", meta={"preprocess": at_64.to_dict(),
                           "dataset": "digits"}, arch=("timm:resnet18", {"num_classes": 10}))  # fmt: skip
    loaded = load_model(f"file:{path}")
    assert loaded.preprocess == at_64 and loaded.input_shape == (3, 64, 64) and loaded.dataset == "digits"
    assert "checkpoint's record" in loaded.meta["defaults"]
    assert load_model(f"file:{path}?size=32").preprocess == at_64.at_size(32)  # a ref option still wins
    bare = save_checkpoint(m.model, tmp_path / "bare.safetensors", arch=("timm:resnet18", {"num_classes": 10}))
    assert load_model(f"file:{bare}").preprocess == m.preprocess  # nothing recorded: timm's own config
