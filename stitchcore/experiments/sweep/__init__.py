"""Experiment ``sweep``: move the cut along depth and see where a trait lives (Oxford report).

A and B share an architecture (their widths may differ: the adapter maps A's channels to
B's, as Bansal et al. plug a wider model's bottom into a thinner top).  At every position
(a block-level cut ``c``) the stitched model is C_c(x) = suffix_B,c(S(prefix_A,c(x))): A's layers up to and
including ``c``, a trained adapter, B's layers after ``c``.  At each position the
adapter is trained (task loss on ``train_data``'s train split, A and B frozen; the
same building blocks as the ``stitch`` experiment) and then measured on the test
split of ``dataset``:

* the chosen trait metrics (:mod:`stitchcore.measures.traits`), and per-class accuracy, each with its 95%
  interval over the test examples it reads (``metrics_ci``, ``per_class_ci``: exact binomial for 0/1 outcomes
  such as a class's accuracy, else a bootstrap seeded with the spec's seed; runs stored before them have none);
* the simplicity measures of C_c (:mod:`stitchcore.measures.simplicity`);
* the random-init control: the same stitch between untrained twins of A and B
  (``zoo:NAME?init=random&seed=S``, one pair per control seed), to show what the
  adapter alone can learn;
* the noise-sender control (``noise_control``; "Functional Alignment Can Mislead", ICML 2025): the same
  adapter (init, epochs, data order) trained from a sender of class-clustered noise with A's activation
  shape and scale (:func:`stitchcore.stitching.noise_sender.clustered_noise`) into B's layers after the cut.
  It knows each image's label and nothing else, so a stitch that does no better is not evidence about A's
  layers; ``summary["noise_sender"]`` holds its curves with paired intervals (:func:`noise_sender_along`).

A alone and B alone give the reference lines.  Each finished position is appended
to the ``positions.json`` artifact (with the references) and logged as metric
points, so a page shows the curves growing while the job runs (:func:`partial_positions`
reads them back in the shape of the summary).

``train_data`` lets the adapter be trained on data that lacks the trait's evidence
(e.g. ``digits|drop3`` for a class-3 trait): whatever C then does with class 3
comes from A's and B's layers, not from the adapter.

One kind, one package, imports running downward:

* :mod:`.spec` -- :class:`SweepSpec` (the bottom);
* :mod:`.read` -- a sweep read back: :func:`curves`, :func:`penalty_along` and its paired
  :func:`penalty_ci_along`, :func:`noise_sender_along` (in words :func:`noise_sender_words`),
  :func:`partial_positions`;
* :mod:`.plan` -- what a sweep runs on: the swept cuts, the models and the data, and :func:`check_sweep`;
* :mod:`.units` -- what a worker runs: :func:`position_unit` (one position's stitch, its noise sender and its
  controls) and the scoring of A and B alone;
* :mod:`.estimate` -- :func:`estimate_sweep`, how long a run will take;
* :mod:`.run` -- the driver :func:`run_sweep`, registered as ``sweep`` on import; only it writes the store;
* :mod:`.fields` -- the kind's fields declared once (:mod:`stitchcore.params`): its CLI flags, links and lesson
  controls are generated from them.
"""

from __future__ import annotations

from stitchcore.experiments.sweep.estimate import estimate_sweep
from stitchcore.experiments.sweep.plan import check_sweep
from stitchcore.experiments.sweep.read import (
    POSITIONS_ARTIFACT,
    SIMPLICITY_KEYS,
    curves,
    noise_sender_along,
    noise_sender_words,
    partial_positions,
    penalty_along,
    penalty_ci_along,
)
from stitchcore.experiments.sweep.run import run_sweep
from stitchcore.experiments.sweep.spec import SweepSpec
from stitchcore.experiments.sweep.units import position_unit
from stitchcore.experiments.sweep import fields  # noqa: E402, F401  (the kind's declared fields)

__all__ = ["POSITIONS_ARTIFACT", "SIMPLICITY_KEYS", "SweepSpec", "check_sweep", "curves", "estimate_sweep",
           "noise_sender_along", "noise_sender_words", "partial_positions", "penalty_along", "penalty_ci_along",
           "position_unit", "run_sweep"]
