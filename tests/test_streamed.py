"""stitching.streamed: how much a streamed batch and an adapter's slice hold, against the memory budget."""

from __future__ import annotations

from stitchcore.cuts import Cut
from stitchcore.stitching.adapters import AdapterSpec, build_adapter
from stitchcore.stitching.streamed import fit_streamed, images_per_batch, images_per_slice, score_streamed

MB = 2**20


def _cut(name: str, shape: tuple[int, ...], depth: float) -> Cut:
    return Cut(name=name, shape=shape, layout="map", depth=depth)


def test_a_wide_late_sender_into_a_fine_grid_takes_one_image_at_a_time():
    """ResNet-50's layer4 (2048 x 7 x 7) resampled to layer1's 56 x 56 grid: 6.4M values an image before the
    float64 copies, so under a 1 GB budget it is fitted one image at a time; layer1 into layer1 takes several."""
    late, early = _cut("layer4", (2048, 7, 7), 1.0), _cut("layer1", (256, 56, 56), 0.25)
    spec = AdapterSpec(init="lstsq")
    assert images_per_slice(build_adapter(spec, late, early), late, early, 1024 * MB) == 1
    same = images_per_slice(build_adapter(spec, early, early), early, early, 1024 * MB)
    assert 2 <= same <= 8
    assert images_per_slice(build_adapter(spec, early, early), early, early, 1024 * MB, work=100 * MB) == 1
    small = _cut("block1", (8, 4, 4), 0.3)
    assert images_per_slice(build_adapter(spec, small, small), small, small, 1024 * MB) > 10_000


def test_a_streamed_batch_holds_a_third_of_the_budget_and_at_least_one_image():
    assert images_per_batch(12 * MB, 1024 * MB) == 28  # 1024 / 3 / 12
    assert images_per_batch(12 * MB, 1 * MB) == 1  # never zero
    assert images_per_batch(1, 1024 * MB) == 256  # never more than a collect_cuts batch


def test_no_cells_need_no_pass():
    assert fit_streamed([], None, None, None, 10, method="lstsq", device=None, budget=MB) == []
    assert score_streamed([], [], None, None, 10, device=None, budget=MB) == []
