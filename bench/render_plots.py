"""Render every ``stitchcore.plots`` builder on sample data, for looking at the figures.

    python bench/render_plots.py [--out DIR] [--no-png]

Writes one standalone HTML file per figure (plotly.js inlined, opens offline) into ``DIR``
(default ``out/plots``, git-ignored) and, when ``kaleido`` is importable and finds a Chrome
(``BROWSER_PATH``), a PNG beside each; otherwise just the HTML.  Prints one JSON object:
the files written and why PNGs were or were not made.  The samples include the realistic digits case (5 cuts of the zoo CNN) and a
Swin-sized list of ~60 cuts; the data are synthetic but shaped like the results store's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import plotly.graph_objects as go

from stitchcore.plots import runs as plots
from stitchcore.plots import heatmap as plots_heatmap

DIGIT_CUTS = [
    {"name": "block1", "shape": [16, 4, 4], "layout": "map", "depth": 0.2},
    {"name": "block2", "shape": [32, 2, 2], "layout": "map", "depth": 0.4},
    {"name": "flatten", "shape": [128], "layout": "vector", "depth": 0.6},
    {"name": "fc1", "shape": [64], "layout": "vector", "depth": 0.8},
    {"name": "fc2", "shape": [32], "layout": "vector", "depth": 1.0},
]


def swin_cuts() -> list[dict]:
    """~60 cuts shaped like a Swin-T at 224 px: patch embed, 4 stages of blocks, norm, head."""
    cuts = [("patch_embed", [56, 56, 96], "map_nhwc")]
    for stage, (depth, hw, dim) in enumerate([(2, 56, 96), (2, 28, 192), (6, 14, 384), (2, 7, 768)]):
        if stage:
            cuts.append((f"layers.{stage}.downsample", [hw, hw, dim], "map_nhwc"))
        for b in range(depth):
            cuts.append((f"layers.{stage}.blocks.{b}", [hw, hw, dim], "map_nhwc"))
            cuts.append((f"layers.{stage}.blocks.{b}.attn", [hw * hw, dim], "tokens"))
            cuts.append((f"layers.{stage}.blocks.{b}.mlp", [hw * hw, dim], "tokens"))
    cuts += [
        ("norm", [7, 7, 768], "map_nhwc"),
        ("head.global_pool", [768], "vector"),
        ("head.fc", [1000], "vector"),
    ]
    while len(cuts) < 60:  # pad with stage-3 extras so the list is Swin-sized
        cuts.insert(-3, (f"layers.3.extra.{len(cuts)}", [49, 768], "tokens"))
    n = len(cuts)
    return [
        {"name": c, "shape": s, "layout": lay, "depth": (i + 1) / n} for i, (c, s, lay) in enumerate(cuts)
    ]


def sample_series(seed: int = 0, steps_per_epoch: int = 22, epochs: int = 10) -> dict:
    rng = random.Random(seed)
    total = steps_per_epoch * epochs
    loss = [(s, 2.3 * math.exp(-s / 40) + 0.05 + 0.03 * rng.random()) for s in range(5, total + 1, 5)]
    top = 0.98 - 0.03 * seed
    acc = [(0, 0.11)] + [
        (e * steps_per_epoch, top - 0.4 * math.exp(-e / (1 + seed))) for e in range(1, epochs + 1)
    ]
    return {"loss": loss, "test_accuracy": acc}


def digits_summary() -> dict:
    b = [0.97, 1.0, 0.94, 0.95, 0.98, 0.96, 1.0, 0.97, 0.91, 0.93]
    s = [0.95, 0.98, 0.9, 0.93, 0.97, 0.94, 0.99, 0.96, 0.86, None]
    a = [0.98, 0.99, 0.95, 0.94, 0.97, 0.97, 0.99, 0.98, 0.9, 0.92]
    return {
        "accuracy": 0.9311,
        "base": {"a": 0.9583, "b": 0.9611},
        "penalty": 0.03,
        "start_accuracy": 0.82,
        "per_class": s,
        "per_class_base": {"a": a, "b": b},
        "classes": [str(i) for i in range(10)],
        "params": 544,
        "flops": 8704,
        "lstsq_residual": 0.21,
        "cut_a": DIGIT_CUTS[0],
        "cut_b": DIGIT_CUTS[1] | {"name": "block2"},
        "history": [{"epoch": e, "train_loss": 1 / e, "test_accuracy": 0.9} for e in range(1, 4)],
        "seconds": 3.2,
    }


def figures() -> dict[str, go.Figure]:
    """Name -> figure for every builder, typical and edge inputs."""
    rng = random.Random(1)
    names = [c["name"] for c in DIGIT_CUTS]
    sim = [[round(0.95 - 0.12 * abs(i - j) + 0.02 * rng.random(), 4) for j in range(5)] for i in range(5)]
    sim[4][0] = None
    deb = [[round(0.4 * math.cos((i - j) / 2) - 0.1, 4) for j in range(5)] for i in range(5)]
    swin = swin_cuts()
    big = [[0.9 - 0.01 * abs(i - j) for j in range(len(swin))] for i in range(len(swin))]
    sweep = [
        {"label": lab, "depth": c["depth"], "penalty": pen * c["depth"] ** 2, "cut": c["name"]}
        for lab, pen in [("seed 0 → seed 1", 0.04), ("random A → seed 1", 0.8)]
        for c in DIGIT_CUTS
    ]
    runs = [(f"seed {s}", sample_series(s)) for s in range(3)]
    return {
        "training_curves": plots.training_curves(sample_series(), title="Adapter training"),
        "training_curves_empty": plots.training_curves({}, title="Adapter training"),
        "training_curves_single": plots.training_curves({"loss": [(5, 2.2)]}),
        "training_curves_acc_only": plots.training_curves({"test_accuracy": [(0, 0.3), (22, 0.9)]}),
        "compare_loss": plots.compare_curves(runs),
        "compare_accuracy": plots.compare_curves(runs, "test_accuracy"),
        "accuracy_bars": plots.accuracy_bars(digits_summary()),
        "accuracy_bars_negative": plots.accuracy_bars(
            digits_summary() | {"accuracy": 0.97, "penalty": -0.0089, "start_accuracy": None}
        ),
        "per_class_bars": plots.per_class_bars(digits_summary()),
        "cut_diagram_digits": plots.cut_diagram(
            DIGIT_CUTS, marked={"block1": "sender", "block2": "receiver"}, title="zoo:cnn-digits-s0"
        ),
        "cut_diagram_swin": plots.cut_diagram(
            swin, marked={"layers.2.blocks.3": "sender", "head.fc": "receiver"}, title="timm:swin_tiny"
        ),
        "heatmap": plots_heatmap.heatmap(sim, names, names, title="Stitching accuracy", value_label="accuracy"),
        "heatmap_diverging": plots_heatmap.heatmap(deb, names, names, title="Debiased accuracy", diverging=True),
        "heatmap_swin": plots_heatmap.heatmap(
            big, [c["name"] for c in swin], [c["name"] for c in swin], title="Swin"
        ),
        "penalty_vs_depth": plots.penalty_vs_depth(sweep),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "plots"))
    ap.add_argument("--no-png", action="store_true", help="HTML only, even when kaleido is installed")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    png, why = not args.no_png, "written"
    if args.no_png:
        why = "--no-png"
    elif importlib.util.find_spec("kaleido") is None:
        png, why = False, "kaleido not installed: HTML only"
    written: list[str] = []
    for name, fig in figures().items():
        path = out / f"{name}.html"
        fig.write_html(path, include_plotlyjs=True, full_html=True)
        written.append(str(path))
        if png:
            try:
                fig.write_image(out / f"{name}.png", width=900, height=fig.layout.height or plots.HEIGHT)
                written.append(str(out / f"{name}.png"))
            except Exception as e:  # noqa: BLE001 - no Chrome, or a kaleido/plotly mismatch: keep the HTML
                detail = (str(e).strip().splitlines() or [""])[0][:200]
                png, why = False, f"PNG export failed, HTML only: {type(e).__name__}: {detail}"
    print(json.dumps({"out": str(out), "files": written, "png": png, "png_note": why}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
