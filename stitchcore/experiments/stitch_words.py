"""What a stitch run's summary says in words, for every face that shows one (the Stitch card, the CLI, the sweep's
view): its intervals, its spread over adapter seeds, its noise-sender control, its validation split and its adapter.

>>> s = {"accuracy_ci": [0.9, 0.95], "base_ci": {"a": [0.97, 0.99], "b": [0.96, 0.99]}, "penalty_ci": [0.01, 0.07],
...      "n_test": 450, "n_val": 120, "history": [1, 2], "kept_epoch": 7}
>>> validation_words(s)
'120 training images held out as validation: the curve below is on them, the numbers above on the 450 test images · kept the adapter of epoch 7 (best validation accuracy)'
"""

from __future__ import annotations

from typing import Any

from stitchcore.measures.intervals import seed_note
from stitchcore.plots.penalty import format_pts, interval_words, penalty_pts

__all__ = ["NOISE_SENDER_WORDS", "adapter_words", "interval_note", "noise_sender_words", "seed_words", "summary_notes",
           "validation_words"]

# What the noise-sender control is, in one line (the Stitch card says it; the sweep's view says the same)
NOISE_SENDER_WORDS = ("a sender of class-clustered noise (A's activation shape and scale, nothing of the image but "
                      "its label) through the same adapter and training: a stitch that does no better is not "
                      "evidence about A's layers")


def noise_sender_words(summary: dict[str, Any]) -> str | None:
    """The noise-sender control of a stitch summary in one line: what it is, its accuracy, and whether the stitch
    beats it (the paired 95% interval of stitched − noise above 0); None for a run without it.

    >>> s = {"controls": {"noise_sender": {"accuracy": 0.9, "accuracy_ci": [0.85, 0.94], "margin": 0.07,
    ...                                    "margin_ci": [0.04, 0.1]}}}
    >>> noise_sender_words(s).split(". ", 1)[1]
    'It reached 90.0% [85.0%, 94.0%]; stitched − noise = +7.0 points [+4.0, +10.0], paired over the same test images: the stitch beats it.'
    """
    noise = (summary.get("controls") or {}).get("noise_sender")
    if not noise:
        return None
    head = f"Noise sender: {NOISE_SENDER_WORDS}."
    if "skipped" in noise:
        return f"{head} Skipped: {noise['skipped']}."
    lo, hi = noise["margin_ci"]
    verdict = "beats it" if lo > 0 else "does worse than it" if hi < 0 else "does not beat it (the interval reaches 0)"
    return (f"{head} It reached {noise['accuracy']:.1%} [{noise['accuracy_ci'][0]:.1%}, {noise['accuracy_ci'][1]:.1%}]"
            f"; stitched − noise = {100 * noise['margin']:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}], paired over "
            f"the same test images: the stitch {verdict}.")


def interval_note(s: dict[str, Any]) -> str | None:
    """The 95% intervals of the stitched model, A, B and the penalty over the test images (None: a run stored
    before intervals)."""
    if not s.get("accuracy_ci"):
        return None
    base_ci, base_role = s.get("base_ci", {}), s.get("penalty_base", "b").upper()
    return (f"95% intervals over the {s.get('n_test', '?')} test images (exact for accuracies, paired bootstrap for "
            f"the penalty): stitched {interval_words(s['accuracy_ci'], 'accuracy')} · A "
            f"{interval_words(base_ci.get('a'), 'accuracy')} · B {interval_words(base_ci.get('b'), 'accuracy')} · "
            f"penalty {interval_words(s.get('penalty_ci'), 'penalty')} (paired: {base_role} and the stitched model "
            "scored on the same images)")


def seed_words(s: dict[str, Any]) -> str | None:
    """The spread over adapter trainings (seeds): training noise on top of the test images' (None: one seed)."""
    sd = s.get("seeds")
    if not sd:
        return None
    note = seed_note(len(sd["seed"])) or "95% Student-t intervals of the mean over seeds"
    return (f"Across {len(sd['seed'])} seeds ({', '.join(map(str, sd['seed']))}; the numbers above are seed "
            f"{sd['seed'][0]}'s): stitched {sd['accuracy_mean']:.1%} ({interval_words(sd['accuracy_ci'], 'accuracy')}) "
            f"· penalty {format_pts(penalty_pts(sd['penalty_mean']))} ({interval_words(sd['penalty_ci'], 'penalty')})"
            f" · {note}")


def validation_words(s: dict[str, Any]) -> str | None:
    """What the validation split did: the curve's data and the epoch kept (None: no validation split)."""
    if not s.get("n_val"):
        return None
    if "history" in s and not s["history"]:  # 0 epochs: the adapter's start, no curve
        return ("0 training epochs: the adapter is its start (e.g. the least-squares fit), never trained, so there is "
                "no training curve")
    kept = f" · kept the adapter of epoch {s['kept_epoch']} (best validation accuracy)" if "kept_epoch" in s else ""
    return (f"{s['n_val']} training images held out as validation: the curve below is on them, the numbers above on "
            f"the {s.get('n_test', '?')} test images{kept}")


def adapter_words(s: dict[str, Any]) -> str:
    """The adapter: its size and cost, its fit's residual, the two cuts it joins and the images used."""
    resid = s.get("lstsq_residual")
    return (f"Adapter: {s['params']:,} parameters · {s['flops']:,} FLOPs per example"
            + (f" · lstsq residual {resid:.3f}" if resid is not None else "")
            + f" · A[{s['cut_a']['name']}] {tuple(s['cut_a']['shape'])} → B[{s['cut_b']['name']}]"
            f" {tuple(s['cut_b']['shape'])} · {s.get('n_train', '?')} train / {s.get('n_test', '?')} test images")


def summary_notes(s: dict[str, Any]) -> list[str]:
    """Every note of a done stitch below its numbers, in order (intervals, seeds, noise sender, validation,
    adapter)."""
    notes = (interval_note(s), seed_words(s), noise_sender_words(s), validation_words(s), adapter_words(s))
    return [n for n in notes if n]
