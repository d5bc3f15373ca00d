"""Plotly figures of an ``assemble`` run, in the house style of :mod:`stitchcore.plots`.

Each builder takes the run's cells (``stitchcore.experiments.assemble.assembled_cells``, also a
running run's partial list) and returns a figure:

* :func:`accuracy_vs_flops`: every assembled network as a point (accuracy against the FLOPs of one
  forward pass, log axis), coloured by adapter kind, shaped by rescaling, with its 95% interval over the
  test images as an error bar (runs since issue 39; the hover gives the adapter's parameters); the Pareto
  front as a step line (only when it joins two points or more); A and B as stars.  Points carry their cell
  index (``customdata``) so a page can open a clicked one on the Stitch page.  When no assembled
  network is on the front, :func:`front_words` says so (in the figure and under it on the page).
* :func:`recipe_heatmap`: one recipe's accuracy over (sender, receiver), skipped pairs marked.
* :func:`recipe_comparison`: mean and best accuracy of each recipe over the pairs every recipe joined (the
  hover says each recipe's adapter parameters: the recipes compared are not of one size).

>>> cells = [{"sender": "s", "receiver": "r", "recipe": "linear/both/bilinear", "adapter": "linear",
...           "resample": "bilinear", "accuracy": 0.8, "flops": 1000, "skipped_reason": None, "same_as": None}]
>>> base = {"a": {"ref": "zoo:a", "accuracy": 0.9, "flops": 2000}, "b": {"ref": "zoo:b", "accuracy": 0.95, "flops": 3000}}
>>> [t.name for t in accuracy_vs_flops(cells, base, [0, 1, 2]).data]  # cheap and worse, A, B: all on the front
['linear · bilinear', 'Pareto front', 'A: zoo:a', 'B: zoo:b']
>>> front_words(1, base, [1])  # a front of A alone: A beats the one network
'No assembled network is on the Pareto front: A alone beats every one (as accurate or more, for no more FLOPs).'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from stitchcore.plots import heatmap as plots_heatmap
from stitchcore.plots._style import (
    ROLE_COLORS,
    RUN_COLORS,
    WAITING,
    add_note,
    error_bars,
    house_style,
    interval,
)

__all__ = ["HERNANDEZ", "SYMBOLS", "accuracy_vs_flops", "front_words", "recipe_comparison", "recipe_heatmap",
           "recipe_label"]

SYMBOLS = {"bilinear": "circle", "strided": "diamond", "nearest": "square", "none": "triangle-up",
           "no_downsample": "triangle-down"}  # fmt: skip
# A linear adapter that strides is a kernel = stride patch conv: Hernandez et al.'s stitch, not one of Traft &
# Cheney's four kinds (linear, linear+ReLU, conv3x3+ReLU, bottleneck); said wherever it sits beside them.
HERNANDEZ = "Hernandez et al.'s patch stitch"


def recipe_label(recipe: str, *, short: bool = False) -> str:
    """A recipe name (``kind/norm/resample``) for people: a strided linear one says whose stitch it is
    (``short``: by name only, for axis ticks).

    >>> recipe_label("linear/both/strided"), recipe_label("bottleneck/both/strided")
    ("linear/both/strided (Hernandez et al.'s patch stitch)", 'bottleneck/both/strided')
    """
    kind, _, resample = recipe.split("/") if recipe.count("/") == 2 else (recipe, "", "")
    if kind != "linear" or resample != "strided":
        return recipe
    return f"{recipe} (Hernandez)" if short else f"{recipe} ({HERNANDEZ})"


def _kind_label(kind: str, resample: str) -> str:
    name = f"{kind} · {resample}"
    return f"{name} (Hernandez et al.)" if kind == "linear" and resample == "strided" else name


def _error_bars(points: Sequence[Mapping[str, Any]], color: str) -> dict[str, Any] | None:
    """Plotly ``error_y`` of ``points``' 95% intervals over the test images (``accuracy_ci``); None when none has
    one (a run stored before them: drawn as it was).

    >>> _error_bars([{"accuracy": 0.8, "accuracy_ci": [0.75, 0.9]}, {"accuracy": 0.5}], "#333")["array"]
    [0.1, None]
    """
    return error_bars([p.get("accuracy") for p in points], [interval(p.get("accuracy_ci")) for p in points],
                      color=color, thickness=1, width=3)  # fmt: skip


def _params_words(n: int | None) -> str:
    """An adapter's parameter count for a hover line: '' when unknown."""
    return "" if n is None else f"<br>adapter: {n:,} parameters"


def _scored(cells: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the cells that trained an adapter of their own (not skipped, not a copy)."""
    return [i for i, c in enumerate(cells) if c.get("accuracy") is not None and not c.get("same_as")]


def front_words(n_cells: int, base: Mapping[str, Mapping[str, Any]] | None, front: Sequence[int]) -> str | None:
    """A sentence when no assembled network is on the Pareto front (``front``: indexes into ``n_cells`` cells
    + [A, B]), naming who holds it; None when one is, or when there are no cells or no front yet."""
    if not n_cells or not front or any(i < n_cells for i in front):
        return None
    names = [label for i, label in ((n_cells, "A"), (n_cells + 1, "B")) if i in front and (base or {}).get(label.lower())]
    if not names:
        return None
    beaten = f"{names[0]} alone beats every one" if len(names) == 1 else "each is beaten by A or B alone"
    return f"No assembled network is on the Pareto front: {beaten} (as accurate or more, for no more FLOPs)."


def accuracy_vs_flops(cells: Sequence[Mapping[str, Any]], base: Mapping[str, Mapping[str, Any]] | None,
                      front: Sequence[int], *, title: str | None = "Assembled networks: accuracy vs FLOPs",
                      ) -> go.Figure:  # fmt: skip
    """Accuracy against FLOPs per example; ``front``: indexes into ``cells`` + [A, B] (``len(cells)`` is A).
    The front is drawn (and in the legend) only when it joins two points or more."""
    fig = go.Figure()
    kinds = list(dict.fromkeys(cells[i]["adapter"] for i in _scored(cells)))
    groups: dict[tuple[str, str], list[int]] = {}
    for i in _scored(cells):
        groups.setdefault((cells[i]["adapter"], cells[i]["resample"]), []).append(i)
    for (kind, resample), idx in groups.items():
        color = RUN_COLORS[kinds.index(kind) % len(RUN_COLORS)]
        fig.add_trace(go.Scatter(
            x=[cells[i]["flops"] for i in idx], y=[cells[i]["accuracy"] for i in idx], mode="markers",
            name=_kind_label(kind, resample), customdata=idx, error_y=_error_bars([cells[i] for i in idx], color),
            marker={"color": color, "size": 10, "symbol": SYMBOLS.get(resample, "circle"),
                    "line": {"width": 1, "color": "white"}},
            text=[f"A[{cells[i]['sender']}] → B[{cells[i]['receiver']}]<br>{recipe_label(cells[i]['recipe'])}"
                  + (f"<br>{cells[i]['macs'] / 1e6:.3g}M MACs" if cells[i].get("macs") is not None else "")
                  + _params_words(cells[i].get("adapter_params"))
                  + (f"<br>95% CI [{ci[0]:.3f}, {ci[1]:.3f}]" if (ci := cells[i].get("accuracy_ci")) else "")
                  for i in idx],
            hovertemplate="%{text}<br>accuracy %{y:.3f}<br>%{x:.3s} FLOPs (2 per MAC)"
                          "<extra>click: open on Stitch</extra>",
        ))  # fmt: skip
    roles = [("a", "A"), ("b", "B")]
    points = [*cells, *((base or {}).get(r) or {} for r, _ in roles)]
    on_front = sorted((i for i in front if i < len(points) and points[i].get("flops") is not None),
                      key=lambda i: points[i]["flops"])  # fmt: skip
    if len(on_front) > 1:  # one point is no line: a legend entry for it would name nothing drawn
        fig.add_trace(go.Scatter(x=[points[i]["flops"] for i in on_front], y=[points[i]["accuracy"] for i in on_front],
                                 mode="lines", line={"shape": "hv", "color": "#444", "width": 1.5, "dash": "dot"},
                                 name="Pareto front", hoverinfo="skip"))  # fmt: skip
    for role, label in roles:
        ref = (base or {}).get(role)
        if ref and ref.get("flops") is not None:
            fig.add_trace(go.Scatter(x=[ref["flops"]], y=[ref["accuracy"]], mode="markers+text", text=[label],
                                     textposition="top center", name=f"{label}: {ref.get('ref', '')}",
                                     error_y=_error_bars([ref], "#333"),
                                     marker={"symbol": "star", "size": 16, "color": ROLE_COLORS[role],
                                             "line": {"width": 1, "color": "#333"}},
                                     hovertemplate=f"{label} alone: accuracy %{{y:.3f}}<br>%{{x:.3s}} FLOPs"
                                                   "<extra></extra>"))  # fmt: skip
    fig.update_xaxes(type="log", title_text="FLOPs per example (whole network; log scale)")
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.02])
    if not _scored(cells):
        add_note(fig, WAITING)
    elif words := front_words(len(cells), base, front):
        fig.add_annotation(text=words.replace(": ", ":<br>", 1), xref="paper", yref="paper", x=0.01, y=0.02,
                           xanchor="left", yanchor="bottom", showarrow=False, align="left",
                           font={"size": 12, "color": "#444"}, bgcolor="rgba(255,255,255,0.8)")  # fmt: skip
    return house_style(fig, title)


def recipe_heatmap(cells: Sequence[Mapping[str, Any]], recipe: str, senders: Sequence[str],
                   receivers: Sequence[str], *, pending: bool = False,
                   colorbar_title: str | None = None) -> go.Figure:  # fmt: skip
    """Accuracy of ``recipe`` over senders (rows) x receivers (columns); skipped pairs grey with their reason.
    ``colorbar_title``: the colour bar's words (``stitchcore.measures.meaning.colorbar_title("accuracy")``)."""
    at = {(c["sender"], c["receiver"]): c for c in cells if c["recipe"] == recipe}
    values = [[(at.get((s, r)) or {}).get("accuracy") for r in receivers] for s in senders]
    skipped = {(s, r): c["skipped_reason"] for (s, r), c in at.items() if c.get("skipped_reason")}
    return plots_heatmap.heatmap(values, list(senders), list(receivers), title=recipe_label(recipe), zmin=0.0, zmax=1.0,
                                 value_label="accuracy", skipped=skipped, colorbar_title=colorbar_title,
                                 pending="not trained yet" if pending else None)  # fmt: skip


def recipe_comparison(cells: Sequence[Mapping[str, Any]], recipes: Sequence[str], *,
                      title: str | None = "Recipes compared") -> go.Figure:  # fmt: skip
    """Mean and best accuracy per recipe over the (sender, receiver) pairs that every recipe joined
    (so a recipe is not flattered by skipping the hard pairs); the pair count in the hover."""
    by_pair: dict[tuple[str, str], dict[str, float]] = {}
    sizes: dict[str, list[int]] = {}
    for c in cells:
        if c.get("accuracy") is not None:
            by_pair.setdefault((c["sender"], c["receiver"]), {})[c["recipe"]] = c["accuracy"]
    common = [p for p, acc in by_pair.items() if all(r in acc for r in recipes)]
    for c in cells:  # the adapters' sizes over the compared pairs (a copy reports its twin's)
        if (c["sender"], c["receiver"]) in common and c.get("adapter_params") is not None:
            sizes.setdefault(c["recipe"], []).append(c["adapter_params"])
    words = [f"<br>adapter: {round(sum(sizes[r]) / len(sizes[r])):,} parameters (mean over pairs)" if sizes.get(r)
             else "" for r in recipes]  # fmt: skip
    fig = go.Figure()
    if common:
        means = [sum(by_pair[p][r] for p in common) / len(common) for r in recipes]
        best = [max(by_pair[p][r] for p in common) for r in recipes]
        for name, values, color in (("mean", means, RUN_COLORS[0]), ("best", best, RUN_COLORS[1])):
            fig.add_trace(go.Bar(x=[recipe_label(r, short=True) for r in recipes], y=values, name=f"{name} over {len(common)} pairs",
                                 marker_color=color, text=[f"{v:.2f}" for v in values], textposition="outside",
                                 customdata=words,
                                 hovertemplate="%{x}: " + name + " accuracy %{y:.3f}%{customdata}<extra></extra>"))  # fmt: skip
    else:
        add_note(fig, WAITING if not by_pair else "no pair was joined by every recipe")
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.1])
    return house_style(fig, title)
