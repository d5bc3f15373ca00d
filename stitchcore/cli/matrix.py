"""CLI verbs over every cut pair of two models: ``matrix`` (stitching) and ``similarity`` (CKA, RSA ...).

    python -m stitchcore matrix --a zoo:cnn-digits-s0 --b zoo:cnn-digits-s1
    python -m stitchcore matrix --a zoo:cnn-digits-s0 --b zoo:cnn-digits-s1 --preset hernandez --controls
    python -m stitchcore similarity --a zoo:cnn-digits-s0 --b zoo:cnn-digits-s1 --measure rsa

Both print a senders x receivers grid (:func:`grid_text`).  ``matrix``'s flags are the matrix kind's declared
fields (:mod:`stitchcore.experiments.matrix.fields`; its adapter and training named as ``stitch`` names them:
``--adapter --norm --resample --init --objective``), every flag left out at today's default; ``--preset NAME``
starts from a named recipe (``hernandez``: the paper's strided 1x1-conv stitch, random init, task-trained), and
any flag given overrides it.  ``--senders/--receivers`` take comma-separated cut names or their aliases
(``layer2`` for ``layer2.1``); aliases are resolved to the canonical names before the spec is built (one run id
per stitch) and noted on stderr.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stitchcore.cli._args import names
from stitchcore.cli._common import Command, ProgressBar, backend_parser, emit, outcome, run, took
from stitchcore.cli._spec_args import add_spec_flags, spec_values
from stitchcore.cli.stitch import resolve_cuts
from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs", "grid_text", "matrix_fields", "similarity_text"]


_RERUN = "run again even if the store has it"
_PAIR_HELPS = {"a": "ModelRef of model A (rows: sender cuts)", "b": "ModelRef of model B (columns: receiver cuts)",
               "senders": "comma-separated cut names (or aliases) of A (default: all)",
               "receivers": "comma-separated cut names (or aliases) of B (default: all)",
               "dataset": "default: the dataset B was trained on"}  # fmt: skip


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``matrix`` and ``similarity`` to the CLI's sub-parsers; ``matrix``'s flags are its declared fields."""
    mx = verbs.add_parser("matrix", parents=[common, backend_parser()],
                          help="stitching matrix: every sender cut x receiver cut")
    add_spec_flags(mx, "matrix", required=("a", "b"), helps=_PAIR_HELPS)
    mx.add_argument("--rerun", action="store_true", help=_RERUN)
    mx.add_argument("--preset", default=None, metavar="NAME", choices=_PRESETS,
                    help=f"a named recipe ({', '.join(_PRESETS)}); flags given override it")
    mx.add_argument("--recommend", default=None, metavar="BY", choices=_RANKINGS,
                    help="also list the cut pairs to train first, ranked without training by the agreement of linear"
                         " probes at the two cuts (probe_kl, the default ranking), the fits' held-out R² (r2), their"
                         " CKA (cka), the closed-form accuracy (accuracy) or relative depth (depth, the baseline)")

    sm = verbs.add_parser("similarity", parents=[common], help="CKA, Procrustes, RSA, SVCCA ... of every cut pair")
    add_spec_flags(sm, "similarity", required=("a", "b"), helps={
        **_PAIR_HELPS, "random_null_seeds": "the null: A against K random-init networks of B's architecture (seeds "
        "seed .. seed+K-1, at least 5); each cell is printed in their standard deviations (default: 5; 0: none)"})
    sm.add_argument("--rerun", action="store_true", help=_RERUN)


_PRESETS = ("hernandez", "closed-form")  # stitchcore.experiments.matrix.MATRIX_PRESETS (a test holds them equal)
_RANKINGS = ("probe_kl", "r2", "cka", "accuracy", "depth")  # matrix.recommend.RANKINGS (a test holds them equal)


def grid_text(summary: dict[str, Any], footer: str) -> str:
    """A senders x receivers table of ``summary["values"]`` for the terminal ("-" = skipped cell).

    >>> print(grid_text({"senders": ["block1", "fc1"], "receivers": ["block1", "fc1"],
    ...                  "values": [[0.91, None], [0.5, 0.875]]}, "accuracy"))
            block1     fc1
    block1   0.910       -
       fc1   0.500   0.875
    accuracy
    """
    width = max(len(n) for n in summary["senders"] + summary["receivers"])
    lines = [" " * width + " " + " ".join(f"{r[:7]:>7s}" for r in summary["receivers"])]
    for name, row in zip(summary["senders"], summary["values"], strict=True):
        lines.append(f"{name:>{width}s} " + " ".join("      -" if v is None else f"{v:7.3f}" for v in row))
    return "\n".join([*lines, footer])


def _cut_lists(args: argparse.Namespace, store: Store) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None,
                                                                 dict[str, str]]:
    """``--senders`` / ``--receivers`` (text, or the names a generated flag read) as canonical cut names, and
    {alias: canonical} for the JSON; a flag given with no name (``--senders ""``) is refused, not read as every
    cut."""
    given = {}
    for flag, value in (("--senders", args.senders), ("--receivers", args.receivers)):
        cuts = names(value) or () if isinstance(value, str) else value
        if cuts is not None and not cuts:
            raise StitchError(f"{flag} names no cut: give comma-separated cut names (e.g. block1,fc1; see "
                              f"`python -m stitchcore cuts REF`), or leave {flag} out for every cut")  # fmt: skip
        given[flag] = cuts
    senders, alias_a = resolve_cuts(args.a, given["--senders"], store)
    receivers, alias_b = resolve_cuts(args.b, given["--receivers"], store)
    return senders, receivers, {**alias_a, **alias_b}


def matrix_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The MatrixSpec fields the flags name: the preset's (if any), then each flag given (an adapter flag over
    the preset's adapter); :func:`stitchcore.params.build_spec` gives every other today's default.

    >>> ns = argparse.Namespace(preset="hernandez", init="lstsq", epochs=5)
    >>> f = matrix_fields(ns)
    >>> f["mode"], f["adapter"]["resample"], f["adapter"]["init"], f["epochs"]
    ('trained', 'strided', 'lstsq', 5)
    """
    from stitchcore.experiments.matrix import MATRIX_PRESETS, preset_fields

    fields: dict[str, Any] = {}
    if args.preset:
        preset_fields(args.preset)  # an unknown name is refused, naming the presets
        fields = {k: dict(v) if isinstance(v, dict) else v for k, v in MATRIX_PRESETS[args.preset].items()}
    for name, value in spec_values(args, "matrix").items():
        fields[name] = {**fields.get(name, {}), **value} if isinstance(value, dict) else value
    return fields


def _cmd_matrix(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Stitch every sender cut into every receiver cut; print the grid of the stitched metric."""
    from stitchcore.params import build_spec

    senders, receivers, aliases = _cut_lists(args, store)
    spec = build_spec("matrix", {**matrix_fields(args), "senders": senders, "receivers": receivers})
    out = run("matrix", spec, args, store, bar)
    s = out.record.summary
    footer = (f"{s['metric']} of the stitched model; rows = A's cuts, columns = B's cuts"
              f" ({took(out.cached, out.seconds)})")
    if s.get("nodes"):
        footer += f"\ncomputed on {len(s['nodes'])} Ray node(s): " + ", ".join(
            f"{n['host']} {n['cells']} cells" for n in s["nodes"].values())
    for control in spec.controls_at_chance:
        footer += f"\ncontrol {control.replace('_', ' ')}: at chance in every cell by construction (not task-trained)"
    if s.get("failed"):
        first = next(iter(s["failed"].items()))
        footer += (f"\n{len(s['failed'])} cell(s) failed, e.g. {first[0]}: {first[1]}"
                   " (--rerun computes only those again)")
    text = grid_text(s, footer) if spec.scores else ""
    for what, words in (("r2", "held-out R² of each cell's linear fit"), ("cka", "linear CKA of each fit's samples")):
        if (s.get("proxy") or {}).get(what) and (not spec.scores or args.recommend):
            text += ("\n\n" if text else "") + grid_text({**s, "values": s["proxy"][what]}, words)
    if not spec.scores:
        text += f"\n({took(out.cached, out.seconds)}; nothing scored: a proxy matrix)"
    if args.recommend or not spec.scores:
        text += "\n\n" + _recommend_text(s, args.recommend)
    noise = (s.get("controls") or {}).get("noise_sender")
    if noise is not None:  # the baseline a cell must beat to say anything about A (not only its labels' clusters)
        text += "\n\n" + grid_text({**s, "values": noise}, "control: noise sender (class-clustered noise into B)")
    if s.get("across_seeds"):
        grids = s["across_seeds"]
        text += "\n\n" + grid_text({**s, "values": grids["accuracy"]}, f"mean accuracy across {grids['n']} adapter seeds")
    emit(args, outcome(out, **({"aliases": aliases} if aliases else {})), text)


def _recommend_text(summary: dict[str, Any], by: str | None) -> str:
    """The top cut pairs to train first, ranked ``by`` a score that needs no training (None: the first the summary
    has, :data:`RANKINGS` order)."""
    from stitchcore.experiments.matrix.recommend import RANKING_WORDS, RANKINGS, TOP, ranking_choices, recommend

    by = by or (ranking_choices(summary) or ["r2"])[0]
    lines = [f"train these first (ranked by {RANKING_WORDS[by]}, no training):"]
    for k, cell in enumerate(recommend(summary, by=by, top=TOP), start=1):
        scores = "  ".join(f"{m} {cell[m]:.3f}" for m in RANKINGS if cell.get(m) is not None)
        lines.append(f"  {k}. {cell['sender']} -> {cell['receiver']}  {scores}")
    return "\n".join(lines)


def _cmd_similarity(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Measure representational similarity of every cut pair; print the grid."""
    from stitchcore.params import build_spec

    senders, receivers, aliases = _cut_lists(args, store)
    fields = spec_values(args, "similarity")
    if fields.get("random_null_seeds") == 0:  # --random-null-seeds 0: no untrained twins (as before)
        fields.update(random_null=False, random_null_seeds=1)
    spec = build_spec("similarity", {**fields, "senders": senders, "receivers": receivers})
    out = run("similarity", spec, args, store, bar)
    emit(args, outcome(out, **({"aliases": aliases} if aliases else {})), similarity_text(out.record.summary))


def similarity_text(s: dict[str, Any]) -> str:
    """A similarity run for the terminal: the values' grid, then (where the run has it) the grid in random-init-B
    standard deviations, then the random-B null and the dependence test in words.

    >>> print(similarity_text({"senders": ["fc1"], "receivers": ["fc1", "fc2"], "measure": "cka-linear", "n": 450,
    ...     "values": [[0.78, 0.72]], "random_null": {"seeds": 5, "values": [[0.55, 0.41]],
    ...     "calibrated": [[6.1, 2.0]], "threshold": 3.04}}))
            fc1     fc2
    fc1   0.780   0.720
    cka-linear on 450 images; rows = A's cuts, columns = B's cuts
            fc1     fc2
    fc1   6.100   2.000
    the same, in sds above the mean of 5 random-init Bs (beyond their 95% range above 3.04)
    Against 5 random-init Bs (B's architecture, no training): trained B is beyond their 95% range in 1 of 2 cells (the most at fc1 × fc1, 6.1 sds); in the other 1 it is as similar as an untrained B.
    """
    from stitchcore.experiments.similarity import dependence_words, random_null_map, random_null_words

    parts = [grid_text(s, f"{s['measure']} on {s['n']} images; rows = A's cuts, columns = B's cuts")]
    calibrated = random_null_map(s)
    if calibrated is not None:
        parts.append(grid_text({**s, "values": calibrated["grid"]},
                               f"the same, in sds above the mean of {calibrated['seeds']} random-init Bs (beyond "
                               f"their 95% range above {calibrated['threshold']:.2f})"))  # fmt: skip
    parts += [w for w in (random_null_words(s), dependence_words(s)) if w]
    return "\n".join(parts)


COMMANDS: dict[tuple[str, str | None], Command] = {
    ("matrix", None): _cmd_matrix,
    ("similarity", None): _cmd_similarity,
}
