"""Experiment ``assemble``: new networks from parts, at disparate depths and across families (Traft & Cheney).

Every cell joins A's bottom, up to a sender cut, to B's top, from a receiver cut, through a
trained adapter made by one *recipe* (kind x BatchNorm placement x spatial rescaling):

    C(x) = suffix_B,r(S(prefix_A,s(x)))

Sender and receiver may sit at any depth (a low layer of A into a high layer of B skips B's
blocks; the other way repeats them) and in any layout: feature maps [B, C, H, W], Swin's
channels-last maps [B, H, W, C], ViT tokens [B, N, D] (with a class token, made by the adapter
or taken from B: ``cls_token``), vectors.  The adapter is trained on the task with A and B
frozen, AdamW lr 2e-3, weight decay 0.05, cosine to zero (the seed's settings), starting from
random weights; its BatchNorm statistics are then set to those of its training inputs (one
pass, no weight changes); each cell then records

* ``accuracy`` on the test split with its 95% interval over the test images (``accuracy_ci``: exact binomial,
  ``measures.intervals.mean_ci``), the ``penalty`` against B alone (B's accuracy minus the cell's: C answers with
  B's head) with its paired bootstrap interval (``penalty_ci``: B and the cell scored on the same images,
  resampled together), which test images it got right (``outcomes``, packed: a later paired interval against
  another cell), the adapter's ``adapter_params`` and ``adapter_flops``;
* the whole assembled network's ``flops`` (FlopCounterMode on one example: prefix + adapter +
  suffix) and ``params``;
* with ``finetune_baseline``, ``finetune_accuracy`` (and ``finetune_accuracy_ci``): the same network with every
  part trained (copies: A and B stay untouched), the seed's "drop the skipped blocks, fine-tune all".

Runs stored before the intervals (issue 39) have cells without ``accuracy_ci``, ``penalty``, ``penalty_ci`` and
``outcomes``; every reader takes them as absent (no error bar, a dash in a table).

A's and B's own accuracy, FLOPs and parameters are the reference points (``base``), and the
Pareto front of accuracy against FLOPs over every cell and A and B is part of the result
(:func:`pareto_front`).  A sender's activations are computed once and reused for every
receiver and recipe.  Cells stream into the ``cells.json`` artifact and a resume file, so a
cancelled or crashed run continues where it stopped; a pair no adapter of the recipe can join
is a cell with its ``skipped_reason``.  Two recipes that build the same adapter for a pair (say
``bilinear`` and ``strided`` between equal grids) are trained once (``same_as``).

One kind, one package, imports running downward:

* :mod:`.spec` -- :class:`AssembleSpec`, :func:`recipe_name` and the names the others share (the bottom);
* :mod:`.read` -- the stored cells read back (:func:`assembled_cells`, :func:`with_penalty`, :func:`cell_rows`,
  :func:`pareto_front`);
* :mod:`.units` -- what a worker runs (:func:`sender_unit`) and the plan and checks before a run;
* :mod:`.estimate` -- :func:`estimate_assemble`, how long a run will take;
* :mod:`.run` -- the driver :func:`run_assemble`, registered as ``assemble`` on import;
* :mod:`.fields` -- the kind's declared fields (:mod:`stitchcore.params`), from which the CLI's flags come.
"""

from __future__ import annotations

from stitchcore.experiments.assemble.estimate import estimate_assemble
from stitchcore.experiments.assemble.read import assembled_cells, cell_rows, pareto_front, with_penalty
from stitchcore.experiments.assemble.run import run_assemble
from stitchcore.experiments.assemble.spec import CELLS_ARTIFACT, DEFAULT_KINDS, AssembleSpec, recipe_name
from stitchcore.experiments.assemble.units import assemble_plan, check_assemble, default_cuts, sender_unit

from stitchcore.experiments.assemble import fields  # noqa: E402, F401, I001  (the kind's declared fields)

__all__ = ["CELLS_ARTIFACT", "DEFAULT_KINDS", "AssembleSpec", "assemble_plan", "assembled_cells", "cell_rows", "check_assemble", "default_cuts", "estimate_assemble", "pareto_front", "recipe_name", "run_assemble", "sender_unit", "with_penalty"]
