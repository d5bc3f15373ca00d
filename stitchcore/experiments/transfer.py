"""Experiment ``transfer``: carry a linear probe and a steering direction from A's cut through a fitted stitch into
B's cut, and measure them on B without refitting (issue 43).

At each cut pair (one given, or along depth: A's coarse cuts, each with B's cut at the nearest relative depth)
a linear adapter is fitted in closed form (per position, least squares, no BatchNorm) on the training images, and

* **probe**: a logistic probe of the classes fitted on A's pooled activations is carried into B's
  (:func:`~stitchcore.measures.transfer.carried_probe`) and read on B's test activations: ``transferred``
  accuracy, beside ``native`` (a probe fitted on B's own activations at that cut, the ceiling) and
  ``random_adapter`` (A's probe carried through a random-init adapter of the same shape, the floor);
* **steering**: each class's direction (its mean minus the rest's) on A, carried forward through the adapter,
  is added to B's activations at the cut (scaled to the length of B's own direction for that class); the shift
  of B's probability of that class on test images of other classes, beside B's own direction and the
  random adapter's.

Every number has its 95% interval over the test images; ``ratio`` = transferred / native accuracy (paired).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from stitchcore.cuts import Cut, coarse_cuts, get_cut, list_cuts, split
from stitchcore.data.images import ImageDataset
from stitchcore.errors import StitchError
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._spec import Spec, check_seed
from stitchcore.experiments._bounds import check_count
from stitchcore.experiments.dataset_check import load_pair, pair_dataset
from stitchcore.data.text import check_text
from stitchcore.experiments.estimate import Estimate, EstimateContext, calibrated, estimate_from, ms, timed, where
from stitchcore.experiments.transfer_text import MAX_PIECES, text_features, text_pairs, text_transfer
from stitchcore.experiments.timing import full_forward
from stitchcore.measures.intervals import mean_ci, paired_statistic_ci
from stitchcore.measures.probe_kl import pooled_cuts
from stitchcore.measures.transfer import add_direction, carried_probe, class_direction, fit_probe, pooled_map
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.sources import load_model
from stitchcore.stitching.activations import iter_cuts
from stitchcore.stitching.adapters import AdapterSpec, build_adapter
from stitchcore.stitching.fits import fit_adapter

__all__ = ["SIDES", "TransferSpec", "check_transfer", "run_transfer", "transfer_points"]

SIDES = ("transferred", "native", "random_adapter")  # each measured on B's test activations
ADAPTER = AdapterSpec(kind="linear", norm="none", init="lstsq")  # per position, closed form: a map of pooled features
BATCH = 128
PAIR_FIT_S = 0.4  # the adapter's solve and three probes' L-BFGS fits of one cut pair (digit CNNs, this CPU: ~0.4 s)


@dataclass(frozen=True)
class TransferSpec(Spec):
    """A probe and a steering direction carried from A's cut into B's through a fitted stitch."""

    a: str = ""  # ModelRef of A (whose probe and directions are carried)
    b: str = ""  # ModelRef of B (where they are read)
    cut_a: str | None = None  # A's cut; None (with cut_b None): along depth, A's coarse cuts
    cut_b: str | None = None  # B's cut; None with cut_a: B's cut at the same relative depth
    dataset: str | None = None  # None: B's data, else A's (as every image run)
    max_train: int = 2000  # training images the adapter and the probes are fitted on
    max_test: int = 1000  # test images everything is read on
    seed: int = 0  # the random adapter's draw

    def __post_init__(self) -> None:
        if not self.a or not self.b:
            raise StitchError("a transfer needs two model refs, a and b")
        if (self.cut_a is None) != (self.cut_b is None) and self.cut_a is None:
            raise StitchError("give cut_a with cut_b (or neither, for every depth)", fix={"cut_b": None})
        check_count("max_train", self.max_train, 20, 10**7, "e.g. 2000")
        check_count("max_test", self.max_test, 10, 10**7, "e.g. 1000")
        check_seed("seed", self.seed)

    def label(self) -> str:
        where_ = f"{self.cut_a} -> {self.cut_b or 'same depth'}" if self.cut_a else "along depth"
        return f"transfer {self.a} -> {self.b}, {where_}"


_FAMILY = {"map": "map", "map_nhwc": "map", "tokens": "tokens", "vector": "vector"}


def _pairs(spec: TransferSpec, a: LoadedModel, b: LoadedModel) -> list[tuple[Cut, Cut]]:
    """The cut pairs: the one given, or each of A's coarse cuts with B's cut of the nearest relative depth and
    of its layout (a probe reads pooled features: maps with maps, vectors with vectors, tokens with tokens)."""
    cuts_b = list_cuts(b)

    def nearest(ca: Cut) -> Cut | None:
        alike = [c for c in cuts_b if _FAMILY.get(c.layout) == _FAMILY.get(ca.layout)]
        return min(alike, key=lambda c: abs(c.depth - ca.depth)) if alike else None

    if spec.cut_a is not None:
        ca = get_cut(a, spec.cut_a)
        cb = get_cut(b, spec.cut_b) if spec.cut_b is not None else nearest(ca)
        if cb is None or _FAMILY.get(ca.layout) != _FAMILY.get(cb.layout):
            raise StitchError(f"a probe is carried between pooled features of one layout: A's {ca.name} is a "
                              f"{ca.layout}, B's {'cut' if cb is None else cb.name + ' a ' + cb.layout}; pick a cut "
                              "of B with A's layout")  # fmt: skip
        return [(ca, cb)]
    pairs = [(ca, nearest(ca)) for ca in coarse_cuts(list_cuts(a))]
    if not (kept := [(ca, cb) for ca, cb in pairs if cb is not None]):
        raise StitchError("no cut of B shares a layout with A's cuts (maps, vectors or tokens); pick two models "
                          "whose cuts a pooled probe can read alike")  # fmt: skip
    return kept


def _inputs(spec: TransferSpec, store: Any) -> tuple[LoadedModel, LoadedModel, ImageDataset, list[tuple[Cut, Cut]]]:
    a, b = load_pair(spec, store, input_kind="image", hint="use the Language models page for language models")
    ds = pair_dataset(spec, a, b)
    pairs = _pairs(spec, a, b)
    for ca, cb in pairs:
        build_adapter(ADAPTER, ca, cb)  # an impossible join is refused here, naming the cuts
    return a, b, ds, pairs


def _language_models(spec: TransferSpec, store: Any) -> tuple[LoadedModel, LoadedModel] | None:
    """A and B when both are language models (the text property's transfer), else None; one of each is refused."""
    a, b = load_model(spec.a, store=store), load_model(spec.b, store=store)
    kinds = {a.input_kind == "tokens", b.input_kind == "tokens"}
    if kinds == {True, False}:
        raise StitchError("a transfer joins two image models or two language models, not one of each")
    return (a, b) if kinds == {True} else None


def check_transfer(spec: TransferSpec, store: Any) -> None:
    """Models, data and cuts (and that an adapter joins each pair), before anything is stored."""
    if (lms := _language_models(spec, store)) is not None:
        if spec.dataset:
            check_text(spec.dataset)
        text_pairs(spec, *lms)  # positions in range, as names or numbers
        return
    _inputs(spec, store)


def _with_ci(values: torch.Tensor, seed: int) -> tuple[float, list[float]]:
    lo, hi = mean_ci(values.double(), seed=seed)
    return round(float(values.double().mean()), 6), [lo, hi]


def _fit(a: LoadedModel, b: LoadedModel, ca: Cut, cb: Cut, ds: ImageDataset, n: int, device: torch.device,
         check_cancel: Any) -> tuple[torch.nn.Module, float]:
    """The closed-form adapter A[ca] -> B[cb] over the first ``n`` training images, and its residual."""
    adapter = build_adapter(ADAPTER, ca, cb).to(device)
    pairs = ((xa[ca.name], xb[cb.name]) for xa, xb in zip(
        iter_cuts(a, [ca], ds, "train", device=device, batch_size=BATCH, limit=n, check_cancel=check_cancel),
        iter_cuts(b, [cb], ds, "train", device=device, batch_size=BATCH, limit=n), strict=True))  # fmt: skip
    return adapter, float(fit_adapter(adapter, pairs))


def _steering(b: LoadedModel, cb: Cut, ds: ImageDataset, n: int, device: torch.device,
              directions: dict[str, list[torch.Tensor]], check_cancel: Any) -> dict[str, torch.Tensor]:
    """Per test image, the mean over the other classes c of the rise in B's probability of c when c's direction
    (each side's) is added at ``cb``: {side: [n]}."""
    prefix, suffix = (m.to(device).eval() for m in split(b, cb))
    out: dict[str, list[torch.Tensor]] = {side: [] for side in directions}
    with torch.no_grad():
        for x, y in ds.model_batches("test", BATCH, b.preprocess, device, limit=n):
            check_cancel()
            h = prefix(x)
            base = torch.softmax(suffix(h).float(), 1)  # [B, K]
            others = torch.ones_like(base).scatter_(1, y.to(device)[:, None], 0.0)  # the classes it is not
            for side, dirs in directions.items():
                rise = torch.stack([torch.softmax(suffix(add_direction(h, d, cb.layout)).float(), 1)[:, c] - base[:, c]
                                    for c, d in enumerate(dirs)], dim=1)  # [B, K]
                out[side].append(((rise * others).sum(1) / others.sum(1)).cpu())
    return {side: torch.cat(v) for side, v in out.items()}


def _point(spec: TransferSpec, ctx: RunContext, a: LoadedModel, b: LoadedModel, ds: ImageDataset, ca: Cut, cb: Cut,
           acts: dict[str, torch.Tensor], labels: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One cut pair: the adapter, the three probes and the three steering directions, each with its interval."""
    k = ds.num_classes
    adapter, residual = _fit(a, b, ca, cb, ds, len(labels["train"]), ctx.device, ctx.check_cancel)
    m, t = pooled_map(adapter.cpu())
    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        m_r, t_r = pooled_map(build_adapter(AdapterSpec(kind="linear", norm="none", init="random"), ca, cb))
    ya, yt = labels["train"], labels["test"]
    probe_a = fit_probe(acts[f"a:train:{ca.name}"], ya, k)
    train_a, train_b = acts[f"a:train:{ca.name}"], acts[f"b:train:{cb.name}"]
    probes = {"transferred": carried_probe(probe_a, m, t, train_a), "native": fit_probe(train_b, ya, k),
              "random_adapter": carried_probe(probe_a, m_r, t_r, train_a)}  # fmt: skip
    test_b = acts[f"b:test:{cb.name}"]
    correct = {side: (p.predict(test_b) == yt).double() for side, p in probes.items()}
    point: dict[str, Any] = {"cut_a": ca.name, "cut_b": cb.name, "depth_a": round(ca.depth, 6),
                             "depth_b": round(cb.depth, 6), "chance": round(1 / k, 6),
                             "lstsq_residual": round(residual, 6)}  # fmt: skip
    for side, c in correct.items():
        point[side], point[f"{side}_ci"] = _with_ci(c, spec.seed)
    point["a_probe"], point["a_probe_ci"] = _with_ci((probe_a.predict(acts[f"a:test:{ca.name}"]) == yt).double(),
                                                     spec.seed)  # fmt: skip
    point["ratio"] = round(point["transferred"] / max(point["native"], 1e-9), 6)
    point["ratio_ci"] = list(paired_statistic_ci(lambda tr, na: tr / na.clamp_min(1e-9), correct["transferred"],
                                                 correct["native"], seed=spec.seed))  # fmt: skip
    gap = paired_statistic_ci(lambda tr, ra: tr - ra, correct["transferred"], correct["random_adapter"],
                              seed=spec.seed)  # fmt: skip
    point["above_random_ci"] = list(gap)
    native_dirs = [class_direction(train_b, ya, c) for c in range(k)]
    carried = [m @ class_direction(train_a, ya, c) for c in range(k)]
    randoms = [m_r @ class_direction(train_a, ya, c) for c in range(k)]

    def scaled(dirs: list[torch.Tensor]) -> list[torch.Tensor]:  # each as long as B's own direction of its class
        return [d * (nd.norm() / d.norm().clamp_min(1e-12)) for d, nd in zip(dirs, native_dirs, strict=True)]

    shifts = _steering(b, cb, ds, len(yt), ctx.device, {"transferred": scaled(carried), "native": native_dirs,
                                                        "random_adapter": scaled(randoms)}, ctx.check_cancel)
    point["steering"] = {}
    for side, v in shifts.items():
        point["steering"][side], point["steering"][f"{side}_ci"] = _with_ci(v, spec.seed)
    point["verdict"] = ("carried: the transferred probe beats the random adapter's" if gap[0] > 0 else
                        "not shown: the transferred probe is no better than the random adapter's")  # fmt: skip
    return point


def estimate_transfer(spec: TransferSpec, ectx: EstimateContext) -> Estimate:
    """Both models over the training and test images twice (pooled, then the fit), and B's top once per class and
    direction over the test images."""
    def units() -> dict:
        t0 = time.perf_counter()
        a, b = ectx.load(spec.a), ectx.load(spec.b)
        if a.input_kind == "tokens":  # text: per position pair, both models over the windows (timed on 8)
            pieces = ["def f(x):\n    return 'a' + x\n" * 4] * 8
            per = timed(lambda: text_features(a, b, pieces, ectx.device)) / 8
            return {"setup": time.perf_counter() - t0, "text": per, "pairs": len(text_pairs(spec, a, b))}
        ds = pair_dataset(spec, a, b)
        return {"setup": time.perf_counter() - t0, "a": full_forward(a, ds, ectx.device),
                "b": full_forward(b, ds, ectx.device), "pairs": len(_pairs(spec, a, b)), "k": ds.num_classes,
                "n_train": len(ds.labels("train")), "n_test": len(ds.labels("test"))}  # fmt: skip

    key = ("transfer", spec.a, spec.b, spec.cut_a, spec.cut_b, spec.dataset, ectx.model_key(spec.a),
           ectx.model_key(spec.b), where(ectx.device))  # fmt: skip
    u = calibrated(key, units)
    if "text" in u:
        pieces = min(spec.max_train, MAX_PIECES["train"]) + min(spec.max_test, MAX_PIECES["test"])
        seconds = u["setup"] + u["pairs"] * (2 * pieces * u["text"] + PAIR_FIT_S)
        return estimate_from(seconds, f"calibrated: A and B over one window = {ms(u['text'])}; {u['pairs']} positions")
    n_train, n_test = min(spec.max_train, u["n_train"]), min(spec.max_test, u["n_test"])
    both = u["a"] + u["b"]
    seconds = (u["setup"] + both * (n_train + n_test) + u["pairs"] * (both * n_train + 3 * u["k"] * u["b"] * n_test
                                                                       + PAIR_FIT_S))  # fmt: skip
    return estimate_from(seconds, f"calibrated: A and B = {ms(both * 1000)} per 1,000 images; {u['pairs']} cut pairs")


@register_experiment("transfer", TransferSpec.from_dict, check=check_transfer, estimate=estimate_transfer)
def run_transfer(spec: TransferSpec, ctx: RunContext) -> dict[str, Any]:
    """Every cut pair's probe and steering transfer (see the module docstring)."""
    t0 = time.perf_counter()
    ctx.progress(0.0, "loading models and data")
    if (lms := _language_models(spec, ctx.store)) is not None:  # a token property on text
        out = text_transfer(spec, ctx, *lms)
        if len(out["points"]) == 1:
            out |= out["points"][0]
        return {**out, "seconds": round(time.perf_counter() - t0, 3)}
    a, b, ds, pairs = _inputs(spec, ctx.store)
    n = {"train": min(spec.max_train, len(ds.labels("train"))), "test": min(spec.max_test, len(ds.labels("test")))}
    labels = {s: ds.labels(s)[: n[s]].long() for s in n}
    acts: dict[str, torch.Tensor] = {}
    for role, m, cuts in (("a", a, list({c.name: c for c, _ in pairs}.values())),
                          ("b", b, list({c.name: c for _, c in pairs}.values()))):
        for s in n:
            ctx.progress(0.05, f"{role.upper()}'s pooled activations ({s})")
            got = pooled_cuts(m, cuts, ds, s, n=n[s], device=ctx.device, batch_size=BATCH, check_cancel=ctx.check_cancel)
            acts |= {f"{role}:{s}:{name}": v for name, v in got.items()}
    points = []
    for k, (ca, cb) in enumerate(pairs):
        ctx.progress(0.1 + 0.85 * k / len(pairs), f"{ca.name} -> {cb.name}: adapter, probes, steering")
        points.append(_point(spec, ctx, a, b, ds, ca, cb, acts, labels))
        p = points[-1]
        ctx.log(k, {"transferred": p["transferred"], "native": p["native"], "random_adapter": p["random_adapter"]})
    out: dict[str, Any] = {"points": points, "dataset": ds.name, "n_train": n["train"], "n_test": n["test"],
                           "classes": ds.num_classes, "chance": round(1 / ds.num_classes, 6),
                           "seconds": round(time.perf_counter() - t0, 3)}  # fmt: skip
    if len(points) == 1:  # one cut pair: its numbers at the top, as the CLI's JSON promises
        out |= {key: v for key, v in points[0].items()}
    return out


def transfer_points(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The reader of a transfer run's summary: its points, deepest last (each: cuts, depths, the three accuracies
    and their intervals, ``ratio``, ``steering``, ``verdict``)."""
    return sorted(summary.get("points") or [], key=lambda p: p["depth_a"])

