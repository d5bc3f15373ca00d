"""What a number means: every measure and metric the app shows, in one line and on a colour bar.

One table, keyed by the names the rest of the code already uses: the registered similarity measures
(``cka-linear`` ... ``knn-jaccard``), ``calibrated`` (a similarity run's (value − null mean) / null std),
``accuracy``, ``penalty`` (image stitching), ``debiased`` (trained − control accuracy), ``loss`` and
``loss_penalty`` (language models), and the trait metric families of :mod:`~stitchcore.measures.traits`
(``class_acc``, ``confusion``, ``blackout``, ``decor``).  A key with a detail after ``:`` reads as its family
(``class_acc:3`` is ``class_acc``); ``calibrated:MEASURE`` turns the direction for a distance.

Each entry says which way is better (or more similar), the range, and the null: what the number is when
nothing is there (a random pairing of examples, a guess).  Penalties follow :mod:`stitchcore.plots.penalty`:
as shown, higher = worse, in points (images) or percent of the base loss (language models).

>>> meaning("class_acc:3").title
'Class accuracy'
>>> print(explain("cka-linear"))  # doctest: +NORMALIZE_WHITESPACE
Linear CKA: how alike two layers' representations are, up to rotation and scale · higher = more similar ·
0 .. 1 (debiased: can dip just below 0) · null: ~0 for unrelated features (debiased, as runs compute it); the
biased full-batch CKA rises with width
>>> colorbar_title("penalty")
'penalty<br>(pts, higher = worse)'
>>> colorbar_title("calibrated:procrustes")
'dependence (shuffled-image sds)<br>(0 = chance, lower = more similar)'
>>> meaning("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
KeyError: "no meaning for 'nope'; known: accuracy, blackout, calibrated, ..."
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stitchcore.plots.penalty import IMAGE_PENALTY, LM_PAPER_PENALTY, LM_PENALTY, LOSS_PENALTY_UNIT, PTS

__all__ = ["Meaning", "colorbar_title", "explain", "list_meanings", "meaning"]


@dataclass(frozen=True)
class Meaning:
    """What one measure or metric means, in words short enough for a tooltip."""

    title: str  # its name for people: "Linear CKA" (the Similarity page's picker)
    what: str  # what it measures, one clause
    direction: str  # which way is more similar / better: "higher = more similar"; short (a colour bar line)
    range: str  # the values it takes: "0 .. 1"
    null: str  # its value when nothing is there (unrelated examples, a guess), and how that moves
    label: str = ""  # colour-bar name when shorter than ``title`` ("" = the title)
    scale: str = ""  # colour-bar unit or range when shorter than ``range`` ("" = the range)


_SIMILAR, _DISTANCE = "higher = more similar", "lower = more similar"
_CHANCE = "chance ≈ 1 / classes (0.1 for ten digits)"

_MEANINGS: dict[str, Meaning] = {
    # --- similarity measures (measures/similarity.py, representational.py), as their heat maps show them
    "cka-linear": Meaning(
        "Linear CKA", "how alike two layers' representations are, up to rotation and scale", _SIMILAR,
        "0 .. 1 (debiased: can dip just below 0)",
        "~0 for unrelated features (debiased, as runs compute it); the biased full-batch CKA rises with width",
        scale="0 .. 1"),
    "cka-rbf": Meaning(
        "RBF CKA", "CKA with a Gaussian kernel (width = median distance): how alike the layers' neighbourhoods are",
        _SIMILAR, "0 .. 1", "above 0 (biased HSIC), more so as the width nears the number of examples"),
    "procrustes": Meaning(
        "Procrustes distance", "distance to the best rotation of the other layer, both centred and scaled to norm 1",
        _DISTANCE, "0 .. 2", "below 2, nearer 0 as the width nears the number of examples"),
    "rsa": Meaning(
        "RSA (Spearman of RDMs)", "Spearman correlation of the layers' example-to-example distances (1 − Pearson r)",
        _SIMILAR, "−1 .. 1", "~0 for unrelated layers", label="RSA (Spearman ρ)"),
    "svcca": Meaning(
        "SVCCA", "mean canonical correlation of the layers' top singular directions (99% of the variance)",
        _SIMILAR, "0 .. 1", "well above 0 (~0.5 on 450 digits), more with fewer examples",
        label="SVCCA (mean CCA ρ)"),
    "ridge-r2": Meaning(
        "Ridge R² (A predicts B, held out)", "share of B's layer that a ridge fit from A's layer predicts on "
        "held-out examples (not symmetric)", _SIMILAR, "≤ 1, no lower bound (maps clip at −1)",
        "≤ 0 (0 = no better than B's mean)", label="R², A predicts B", scale="≤ 1"),
    "knn-jaccard": Meaning(
        "k-NN Jaccard (k = 10, cosine)", "overlap of each example's 10 nearest neighbours (cosine) in the two "
        "layers", _SIMILAR, "0 .. 1", "near 0 (random neighbours overlap ~k / 2n)", label="k-NN Jaccard"),
    # --- a closed-form or proxy matrix's moments (stitching/shared_fits.py): samples are the receiver grid's pixels
    "fit-r2": Meaning(
        "Held-out R² of the linear fit", "share of B's activation (every pixel or token of its grid) that the "
        "cell's least-squares adapter, fitted on 4 of 5 training images, predicts on the fifth (not symmetric)",
        _SIMILAR, "≤ 1, no lower bound", "≤ 0 (0 = no better than B's mean)", label="held-out R²", scale="≤ 1"),
    "fit-cka": Meaning(
        "Linear CKA of the fit's samples", "linear CKA (biased) between A's activation resampled to B's grid and "
        "B's, every pixel or token a sample, from the fit's moments", _SIMILAR, "0 .. 1",
        "above 0, more so with wide layers and few samples", label="CKA (fit samples)", scale="0 .. 1"),
    # --- a similarity run's calibrated map (similarity_matrix's "calibrated")
    "calibrated": Meaning(
        "Dependence test (shuffled images)", "(measure − null mean) / null std, the null from B's images shuffled "
        "against A's: any two networks fed the same images pass it, untrained ones too", _SIMILAR,
        "any real number, in null standard deviations", "0 = as alike as a random pairing of images; within ±2: "
        "no dependence", label="dependence (shuffled-image sds)", scale="0 = chance"),
    # --- classifiers and image stitching (plots/penalty.py: shown times 100, higher = worse)
    "accuracy": Meaning(
        "Accuracy", "fraction of test examples classified correctly", "higher = better", "0 .. 1 (0–100 %)",
        _CHANCE, label="accuracy", scale="0 .. 1"),
    "penalty": Meaning(
        "Stitching penalty", f"base accuracy − stitched accuracy ({IMAGE_PENALTY}; A − stitched with head A), in points",
        "higher = worse", f"−100 .. 100 {PTS}; below 0 = beats the base", "0 = as good as the base",
        label="penalty", scale=PTS),
    "debiased": Meaning(
        "Debiased accuracy", "what the trained bottom adds beyond the adapter alone (trained − control accuracy)",
        "lower = worse", f"−100 .. 100 {PTS}", "0 = no better than the random-init control", label="Δ accuracy",
        scale=PTS),
    # --- language models (lm/evaluate.py; plots/lm.py's PENALTY_AXIS and SIGN_NOTE)
    "loss": Meaning(
        "LM loss", "validation cross-entropy per token, in nats", "lower = better", "≥ 0 nats/token",
        "ln V for a uniform guess over V tokens", label="loss", scale="nats/token"),
    "loss_penalty": Meaning(
        "LM loss penalty", f"{LM_PENALTY}, the joined loss above the base's (whose head is used); the GPT-2 "
        f"report's {LM_PAPER_PENALTY} with the sign flipped", "higher = worse",
        f"≥ −100 {LOSS_PENALTY_UNIT}; below 0 = a lower loss than the base", "0 = as good as the base",
        label="loss penalty", scale=LOSS_PENALTY_UNIT),
    # --- trait metric families (measures/traits.py; "accuracy" is the one above)
    "class_acc": Meaning(
        "Class accuracy", "accuracy on the named class(es) only (class_acc:3, class_acc:3,5)",
        "higher = better", "0 .. 1", f"{_CHANCE}; ~0 for a class never learned",
        label="class accuracy"),
    "confusion": Meaning(
        "Confusion rate", "fraction of class i predicted as j (confusion:3->8): how strong a relabelling is",
        "higher = stronger relabelling", "0 .. 1", "~1 / classes for a guess; ~0 if never taught it",
        label="confusion rate"),
    "blackout": Meaning(
        "Half-blackout accuracy", "accuracy on two-cue images with one half black (blackout:left keeps the right "
        "cue)", "higher = the kept half suffices", "0 .. 1", f"{_CHANCE}: the kept half says nothing",
        label="accuracy, half black"),
    "decor": Meaning(
        "Decorrelated accuracy", "accuracy when one cue's class is random and the label follows the other "
        "(decor:left: the left is random)", "higher = reads the labelled cue", "0 .. 1",
        f"{_CHANCE}: reads only the random cue", label="accuracy, one cue random"),
}  # fmt: skip


def list_meanings() -> list[str]:
    """Every key :func:`meaning` knows, sorted (a key may also carry a detail: ``class_acc:3``).

    >>> "procrustes" in list_meanings() and "class_acc" in list_meanings()
    True
    """
    return sorted(_MEANINGS)


def meaning(key: str) -> Meaning:
    """The :class:`Meaning` of a measure or metric key; the part before ``:`` names the family
    (``class_acc:3``, ``confusion:3->8``, ``blackout:left``).  ``calibrated:MEASURE`` is the calibrated score of
    that measure: for a distance (Procrustes) lower = more similar than chance.  KeyError naming the known
    keys otherwise.

    >>> meaning("confusion:3->8").direction
    'higher = stronger relabelling'
    >>> meaning("calibrated:procrustes").direction, meaning("calibrated:rsa").direction
    ('lower = more similar', 'higher = more similar')
    """
    family, _, detail = str(key).strip().partition(":")
    found = _MEANINGS.get(family)
    if found is None:
        raise KeyError(f"no meaning for {key!r}; known: {', '.join(list_meanings())}")
    if family == "calibrated" and _MEANINGS.get(detail, found).direction == _DISTANCE:
        return replace(found, direction=_DISTANCE)
    return found


def explain(key: str) -> str:
    """One line for a tooltip or a caption: title, what it measures, direction, range and null.

    >>> explain("penalty").split(" · ")[1:]
    ['higher = worse', '−100 .. 100 pts; below 0 = beats the base', 'null: 0 = as good as the base']
    """
    m = meaning(key)
    return f"{m.title}: {m.what} · {m.direction} · {m.range} · null: {m.null}"


def colorbar_title(key: str) -> str:
    """A heat map's colour-bar title: the name, then ``(unit or range, direction)``, lines joined by ``<br>``.

    >>> colorbar_title("cka-linear")
    'Linear CKA<br>(0 .. 1, higher = more similar)'
    """
    m = meaning(key)
    return f"{m.label or m.title}<br>({m.scale or m.range}, {m.direction})"
