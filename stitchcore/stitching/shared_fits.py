"""Closed-form fits of many adapters from shared moments, and the training-free proxy they give for free.

A matrix fits every sender cut into every receiver cut.  Fitted one by one
(:func:`~stitchcore.stitching.fits.fit_adapter`), each cell resamples its sender,
sums ``XᵀX`` and ``XᵀY`` and factors its own ``C_in x C_in`` system.  :class:`SharedFits`
groups the adapters by the samples their rows are (a *bucket*: one receiver grid, a
token sequence, or the images of vector receivers).  Per batch it resamples each
sender once per bucket (an input *group*: the same sender cut prepared by the same
plan), stacks every group's rows and every receiver's targets side by side in
float64, and adds ONE product ``XᵀY`` of all of them, each group's own ``XᵀX`` and
the sums.  At the end it factors each group's ridge-regularised covariance once and
solves all its targets at once.  The numbers are those of ``fit_adapter`` (float64
moments, the same ridge), written into each adapter by
:func:`~stitchcore.stitching.fits.write_fit`.

With ``hold_every=k`` every k-th image (by its index in the split) is held out of a
second set of moments, so one pass also gives, per adapter (:meth:`SharedFits.proxies`):

- ``r2``: the held-out R² of the ridge fit made on the other images,
  ``1 − E_held|y − Wx − b|² / tr cov_held(y)``;
- ``cka``: linear CKA over the fit's samples (pixels of the receiver grid, tokens,
  or images for a vector receiver), ``‖cov_xy‖²_F / (‖cov_xx‖_F ‖cov_yy‖_F)``.

The closed-form fit itself still uses every image: both parts' sums are taken after the same
shift, so they add.  Where the held-out sums would take more than 1/:data:`PROXY_SHARE` of the
memory budget, :func:`shared_fits` builds the fits without them (unless the proxy is all a caller wants).

>>> from stitchcore.cuts import Cut
>>> from stitchcore.stitching.adapters import AdapterSpec, build_adapter
>>> s, r = Cut("s", (4, 6, 6), "map", 0.5), Cut("r", (3, 3, 3), "map", 0.5)
>>> spec = AdapterSpec(init="lstsq")
>>> x = torch.randn(40, 4, 6, 6)
>>> y = torch.nn.functional.avg_pool2d(x[:, :3], 2)  # what r holds: linear in s
>>> fits = SharedFits([build_adapter(spec, s, r)], "lstsq", hold_every=5)
>>> fits.update({"s": x}, {"r": y}, first=0)
>>> residual = fits.finish()[0]
>>> proxy = fits.proxies()[0]
>>> residual < 1e-3, proxy["r2"] > 0.99, 0 < proxy["cka"] <= 1
(True, True, True)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from stitchcore.device import module_device
from stitchcore.errors import AdapterError
from stitchcore.stitching.adapters import Adapter
from stitchcore.stitching.fits import (
    Moments,
    fit_lin,
    lin_rows,
    moments_from_sums,
    ridge_solve,
    squared_error,
    write_fit,
)
from stitchcore.stitching.layers import to_rows

__all__ = ["PROXY_SHARE", "SharedFits", "cka_of", "shared_fits"]

logger = logging.getLogger(__name__)
PROXY_SHARE = 4  # the proxy's held-out sums may take up to a quarter of the memory budget (else: fits alone)


def cka_of(cov_xx: torch.Tensor, cov_xy: torch.Tensor, cov_yy_norm: float) -> float | None:
    """Linear CKA ``‖cov_xy‖²_F / (‖cov_xx‖_F ‖cov_yy‖_F)`` from moments; None where a side is constant."""
    denom = float(torch.linalg.matrix_norm(cov_xx)) * cov_yy_norm
    return float((cov_xy * cov_xy).sum()) / denom if denom > 0 else None


@dataclass
class _Side:
    """One input group (a sender as one plan prepares it) or one target (a receiver cut) of a bucket."""

    key: tuple
    cols: slice  # its columns in the bucket's stacked rows
    width: int
    shift: torch.Tensor | None = None  # [width] float64: the first batch's mean, subtracted before every product
    own: dict[str, torch.Tensor] = field(default_factory=dict)  # part -> its Gram [width, width] (shifted)
    sums: dict[str, torch.Tensor] = field(default_factory=dict)  # part -> column sums [width] (shifted)
    squares: dict[str, torch.Tensor] = field(default_factory=dict)  # part -> column sums of squares (targets)


@dataclass
class _Member:
    """One adapter: its input group and its target in a bucket, and its receiver's class-token sums."""

    index: int  # position in the adapters SharedFits was given
    adapter: Adapter
    group: _Side
    target: _Side
    cls_sum: torch.Tensor | None = None  # [D] float64: the receiver's class tokens, summed
    cls_n: int = 0


@dataclass
class _Bucket:
    """Every fit whose rows are the same samples (one receiver grid, tokens sequence or vector): their
    inputs and targets stacked side by side, ``XᵀY`` of all of them in one product."""

    groups: dict[tuple, _Side] = field(default_factory=dict)
    targets: dict[tuple, _Side] = field(default_factory=dict)
    members: list[_Member] = field(default_factory=list)
    leads: dict[tuple, Adapter] = field(default_factory=dict)  # group key -> an adapter that prepares its rows
    cross: dict[str, torch.Tensor] = field(default_factory=dict)  # part -> XᵀY [Σ inputs, Σ targets] (shifted)
    n: dict[str, int] = field(default_factory=dict)  # part -> samples


def _input_key(adapter: Adapter, lin: torch.nn.Module) -> tuple:
    """What decides the rows a fit's linear map sees: the sender, the plan's input side, the map's window."""
    p = adapter.plan
    return (adapter.sender.name, tuple(adapter.sender.shape), adapter.sender.layout, p.form, p.c_in, p.grid, p.resize,
            p.stride, p.sender_cls, p.steps, type(lin).__name__, lin.in_features)  # fmt: skip


def _bucket_key(adapter: Adapter) -> tuple:
    """The samples a fit's rows are: the receiver grid (map), the token sequence (seq) or the images (vec)."""
    p = adapter.plan
    return (p.form, p.grid if p.form == "map" else None, adapter.receiver.shape[0] if p.form == "seq" else None)


def _parts(hold_every: int) -> tuple[str, ...]:
    return ("fit", "held") if hold_every else ("fit",)


class SharedFits:
    """Closed-form fits of ``adapters`` (each joins a sender cut to a receiver cut) from shared moments.

    Feed every batch of images with :meth:`update` (each sender and receiver cut's activations of the
    same images), then :meth:`finish` writes every fit into its adapter and returns the residuals in
    order, as ``fit_adapter`` would one by one.  ``budget`` (bytes) caps the stacked float64 rows one
    slice of images holds; ``hold_every`` > 0 keeps the held-out moments :meth:`proxies` needs (every
    ``hold_every``-th image of the split, by index).
    """

    def __init__(self, adapters: Sequence[Adapter], method: str = "lstsq", ridge: float = 1e-4,
                 budget: int | None = None, hold_every: int = 0) -> None:  # fmt: skip
        if hold_every < 0 or hold_every == 1:
            raise AdapterError(f"hold_every is 0 (no held-out images) or >= 2, got {hold_every}")
        self.method, self.ridge, self.budget, self.hold_every = method, ridge, budget, hold_every
        self.adapters = list(adapters)
        self._buckets: dict[tuple, _Bucket] = {}
        for i, adapter in enumerate(self.adapters):
            lin = fit_lin(adapter, method)
            bucket = self._buckets.setdefault(_bucket_key(adapter), _Bucket())
            gkey, tkey = _input_key(adapter, lin), (adapter.receiver.name, adapter.plan.receiver_cls)
            group = _side(bucket.groups, gkey, lin.in_features)
            bucket.leads.setdefault(gkey, adapter)
            target = _side(bucket.targets, tkey, adapter.plan.c_out)
            bucket.members.append(_Member(i, adapter, group, target))

    @property
    def n_groups(self) -> int:
        """How many input Grams XᵀX this fit sums (one per sender and grid), against one per adapter one by one."""
        return sum(len(b.groups) for b in self._buckets.values())

    def sum_bytes(self, hold_every: int | None = None) -> int:
        """Bytes of the float64 sums these fits keep (with ``hold_every``'s held-out part: twice, and the
        targets' Grams); default this object's own ``hold_every``."""
        hold = self.hold_every if hold_every is None else hold_every
        total = 0
        for b in self._buckets.values():
            ins, outs = [g.width for g in b.groups.values()], [t.width for t in b.targets.values()]
            total += sum(ins) * sum(outs) + sum(w * w for w in ins) + (sum(w * w for w in outs) if hold else 0)
        return 8 * total * len(_parts(hold))

    @property
    def n_buckets(self) -> int:
        """How many stacked products XᵀY a batch takes (one per receiver grid), against one per adapter."""
        return len(self._buckets)

    def _slice_size(self, bucket: _Bucket, n_images: int) -> int:
        """Images per slice: the bucket's stacked float64 rows (and their float32 sources) within budget / 8."""
        if self.budget is None:
            return n_images
        width = sum(g.width for g in bucket.groups.values()) + sum(t.width for t in bucket.targets.values())
        lead = bucket.members[0].adapter
        with torch.no_grad():
            rows = lin_rows(lead, torch.zeros(1, *lead.sender.shape, device=module_device(lead)), self.method)
        per_image = len(rows) * width * (8 + 4) * 2
        return max(1, self.budget // 8 // per_image)

    @torch.no_grad()
    def update(self, sender_acts: Mapping[str, torch.Tensor], receiver_acts: Mapping[str, torch.Tensor],
               first: int = 0) -> None:  # fmt: skip
        """Add one batch of images: ``sender_acts[cut]`` [B, *sender.shape] and ``receiver_acts[cut]``
        [B, *receiver.shape] of the same B images, the first of them image ``first`` of its split."""
        n = len(next(iter(sender_acts.values())))
        if any(len(t) != n for t in (*sender_acts.values(), *receiver_acts.values())):
            raise AdapterError("sender and receiver batches differ in length; pair them up")
        held = torch.arange(first, first + n) % self.hold_every == self.hold_every - 1 if self.hold_every else None
        order = None  # the fit part's images, then the held-out ones: each part a run of rows in every slice
        if held is not None and bool(held.any()):
            order = torch.cat([(~held).nonzero().flatten(), held.nonzero().flatten()])
        n_fit = n - (int(held.sum()) if held is not None else 0)
        for bucket in self._buckets.values():
            size = self._slice_size(bucket, n)
            for j in range(0, n, size):
                fit_images = max(0, min(n_fit - j, size))  # of this slice's images, those in the fit part
                images = slice(j, j + size) if order is None else order[j : j + size]  # only a slice is copied
                self._add(bucket, sender_acts, receiver_acts, images, fit_images)

    def _add(self, bucket: _Bucket, sender_acts: Mapping[str, torch.Tensor],
             receiver_acts: Mapping[str, torch.Tensor], images: slice | torch.Tensor, fit_images: int) -> None:  # fmt: skip
        """Stack the rows of ``images`` (a slice of the batch, or image indices) of every input group and target of
        ``bucket`` (float64, shifted) and add their products to each part's sums (the first ``fit_images`` images
        to "fit", the rest to "held")."""
        def take(t: torch.Tensor) -> torch.Tensor:
            return t[images] if isinstance(images, slice) else t.index_select(0, images.to(t.device))

        xs = {key: lin_rows(bucket.leads[key], take(sender_acts[bucket.leads[key].sender.name]), self.method)
              for key in bucket.groups}  # fmt: skip
        ys, taken = {}, {}  # target key -> rows; receiver cut -> its slice of images (taken once)
        for member in bucket.members:
            name = member.adapter.receiver.name
            y = taken[name] = taken[name] if name in taken else take(receiver_acts[name])
            if member.target.key not in ys:
                ys[member.target.key] = to_rows(member.adapter.targets(y))
            if member.adapter.cls_offset is not None:  # the receiver's class token [B, D]
                tokens = y[:, 0]
                cls = tokens.detach().cpu().double().sum(0)
                member.cls_sum = cls if member.cls_sum is None else member.cls_sum + cls
                member.cls_n += len(tokens)
        rows = {len(t) for t in (*xs.values(), *ys.values())}
        if len(rows) != 1:
            raise AdapterError(f"fits of one grid see different numbers of samples ({sorted(rows)}); a bug: report it")
        n_rows = rows.pop()
        n_images = len(next(iter(taken.values())))
        per_image = n_rows // max(1, n_images)
        x = _stacked(bucket.groups, xs)  # [n, Σ inputs] float64, each group shifted by its first mean
        y = _stacked(bucket.targets, ys)  # [n, Σ targets]
        for part, part_rows in (("fit", slice(0, fit_images * per_image)), ("held", slice(fit_images * per_image, None))):
            xp, yp = x[part_rows], y[part_rows]
            if len(xp) == 0:
                continue
            _add_to(bucket.cross, part, xp.T @ yp)
            bucket.n[part] = bucket.n.get(part, 0) + len(xp)
            for side in bucket.groups.values():
                block = xp[:, side.cols]
                _add_to(side.own, part, block.T @ block)
                _add_to(side.sums, part, block.sum(0))
            for side in bucket.targets.values():
                block = yp[:, side.cols]
                _add_to(side.sums, part, block.sum(0))
                _add_to(side.squares, part, (block * block).sum(0))
                if self.hold_every:  # the proxy's CKA needs the targets' Gram
                    _add_to(side.own, part, block.T @ block)

    def _moments(self, bucket: _Bucket, member: _Member, parts: tuple[str, ...]) -> Moments:
        """The moments of one member's fit over the images of ``parts``."""
        g, t = member.group, member.target
        n = sum(bucket.n.get(p, 0) for p in parts)
        if n == 0:
            raise AdapterError("no samples to fit on; pass at least one non-empty (sender, receiver) batch")
        total = lambda sums: sum(sums[p].cpu() for p in parts if p in sums)  # noqa: E731
        cross = total(bucket.cross)[g.cols, t.cols]
        if not all(torch.isfinite(v).all() for v in (cross, total(g.own), total(g.sums), total(t.squares))):
            raise AdapterError("non-finite activations (NaN/inf) to fit on; check the models and inputs")
        return moments_from_sums(n, total(g.sums), total(t.sums), total(g.own), cross, float(total(t.squares).sum()),
                                 g.shift, t.shift)  # fmt: skip

    def _by_group(self) -> list[tuple[_Bucket, list[_Member]]]:
        out = []
        for bucket in self._buckets.values():
            for group in bucket.groups.values():
                out.append((bucket, [m for m in bucket.members if m.group is group]))
        return out

    def finish(self) -> list[float]:
        """Solve every fit (one factor per input group) and write it into its adapter; residuals in adapter order."""
        out: list[float] = [math.nan] * len(self.adapters)
        parts = _parts(self.hold_every)
        for bucket, members in self._by_group():
            moments = [self._moments(bucket, m, parts) for m in members]
            w_all, start = None, 0
            if self.method == "lstsq":  # one factor of the group's covariance for all its targets
                w_all = ridge_solve(moments[0].cov_xx, torch.cat([m.cov_xy for m in moments], dim=1), self.ridge)
            for member, m in zip(members, moments):
                w = w_all[start : start + m.cov_xy.shape[1]] if w_all is not None else None
                start += m.cov_xy.shape[1]
                cls_mean = member.cls_sum / member.cls_n if member.cls_sum is not None else None
                out[member.index] = write_fit(member.adapter, self.method, m, w, cls_mean)
        logger.info("shared fits: %d adapters from %d factor(s), %d stacked product(s) a batch",
                    len(self.adapters), self.n_groups, self.n_buckets)  # fmt: skip
        return out

    def records(self) -> list[dict[str, float | None]]:
        """:meth:`finish`, then per adapter its ``residual`` and (with ``hold_every``) its :meth:`proxies`."""
        residuals = self.finish()
        proxies = self.proxies() if self.hold_every and self.adapters else [{}] * len(self.adapters)
        return [{"residual": res, **proxy} for res, proxy in zip(residuals, proxies)]

    def proxies(self) -> list[dict[str, float | None]]:
        """Per adapter, in order: ``r2`` (held-out R² of the ridge fit on the other images) and ``cka``
        (linear CKA over all the samples).  Needs ``hold_every`` and at least one held-out image."""
        if not self.hold_every:
            raise AdapterError("proxies need held-out images: build SharedFits with hold_every >= 2")
        out: list[dict[str, float | None]] = [{} for _ in self.adapters]
        for bucket, members in self._by_group():
            if not bucket.n.get("held") or not bucket.n.get("fit"):
                raise AdapterError("too few images for a held-out part: feed at least hold_every images")
            fits = [self._moments(bucket, m, ("fit",)) for m in members]
            w_all = ridge_solve(fits[0].cov_xx, torch.cat([m.cov_xy for m in fits], dim=1), self.ridge)
            start = 0
            for member, fit in zip(members, fits):
                w = w_all[start : start + fit.cov_xy.shape[1]]
                start += fit.cov_xy.shape[1]
                b = fit.mean_y - w @ fit.mean_x
                held = self._moments(bucket, member, ("held",))
                r2 = 1 - squared_error(held, w, b) / held.var_y if held.var_y > 0 else None
                both = self._moments(bucket, member, ("fit", "held"))
                out[member.index] = {"r2": r2, "cka": cka_of(both.cov_xx, both.cov_xy, _gram_norm(bucket, member.target))}
        return out


def shared_fits(adapters: Sequence[Adapter], method: str, *, budget: int, hold_every: int,
                keep_proxy: bool = False) -> SharedFits:  # fmt: skip
    """:class:`SharedFits` with the proxy's held-out moments (``hold_every``) where their sums take at most
    1/:data:`PROXY_SHARE` of ``budget``, else without them; ``keep_proxy``: with them whatever they take (a
    proxy matrix, which has nothing else)."""
    fits = SharedFits(adapters, method, budget=budget, hold_every=hold_every)
    if hold_every and not keep_proxy and fits.sum_bytes() > budget // PROXY_SHARE:
        logger.info("shared fits: the proxy's held-out moments (%.0f MB) exceed 1/%d of the budget; fitting "
                    "without them", fits.sum_bytes() / 2**20, PROXY_SHARE)  # fmt: skip
        fits = SharedFits(adapters, method, budget=budget)
    return fits


def _side(sides: dict[tuple, _Side], key: tuple, width: int) -> _Side:
    if key not in sides:
        start = sum(s.width for s in sides.values())
        sides[key] = _Side(key, slice(start, start + width), width)
    return sides[key]


def _stacked(sides: dict[tuple, _Side], rows: dict[tuple, torch.Tensor]) -> torch.Tensor:
    """Every side's rows side by side in one float64 [n, Σ widths], each shifted by its first batch's mean."""
    first = next(iter(rows.values()))
    device = torch.device("cpu") if first.device.type == "mps" else first.device  # MPS has no float64
    out = torch.empty(len(first), sum(s.width for s in sides.values()), dtype=torch.float64, device=device)
    for key, side in sides.items():
        block = out[:, side.cols]
        block.copy_(rows[key])
        if side.shift is None:
            side.shift = block.mean(0).cpu() if len(block) else torch.zeros(side.width, dtype=torch.float64)
        block -= side.shift.to(block.device)
    return out


def _add_to(sums: dict[str, torch.Tensor], part: str, value: torch.Tensor) -> None:
    """Add ``value`` to the running sum of ``part`` (kept where it was computed, read on the CPU)."""
    if part in sums:
        sums[part] += value
    else:
        sums[part] = value.clone()


def _gram_norm(bucket: _Bucket, target: _Side) -> float:
    """‖cov_yy‖_F of a target over every image."""
    n = sum(bucket.n.values())
    gram = sum(v.cpu() for v in target.own.values())
    mean = sum(v.cpu() for v in target.sums.values()) / n
    return float(torch.linalg.matrix_norm(gram / n - torch.outer(mean, mean)))
