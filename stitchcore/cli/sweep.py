"""CLI verb ``sweep``: move the cut along depth; trait metrics and simplicity per position.

    python -m stitchcore sweep --a zoo:cnn-digits-s1 --b zoo:cnn-digits-s0 --metrics accuracy,class_acc:3 --json
    python -m stitchcore sweep --preset inheritance          # train the preset's models, then its sweeps
    python -m stitchcore sweep --preset connectivity --model-seeds 3   # ... from 3 model seeds: mean and interval
    python -m stitchcore sweep --preset coarse-labels --dataset mnist5k # a Bansal preset on 28x28 MNIST
    python -m stitchcore sweep --list-presets
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stitchcore.cli._args import given, whole
from stitchcore.cli._common import (
    CTRL_C,
    Command,
    ProgressBar,
    backend_parser,
    check_device,
    check_log_to,
    emit,
    log_to_tracker,
    outcome,
    run,
    run_options,
    set_threads,
    took,
)
from stitchcore.cli._spec_args import add_spec_flags, spec_values
from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.experiments.trait_presets import Preset
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "across_table", "add_verbs", "table"]


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``sweep`` to the CLI's sub-parsers (``common``: --store, --json, --device, --quiet): the preset flags,
    then a flag for each of the sweep kind's declared fields (``--eps`` and ``--draws`` still name the sharpness
    step and draws)."""
    sw = verbs.add_parser("sweep", parents=[common, backend_parser()], help="cut at every depth: trait metrics + simplicity")
    sw.add_argument("--preset", type=given, help="run a ready-made experiment (see --list-presets) instead of --a/--b")
    sw.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    sw.add_argument("--model-seeds", type=whole, default=None, metavar="N",
                    help="--preset: train its models and adapters from N seeds (seed 0 is the preset itself) and "
                         "give each cut's mean and 95%% interval across them")  # fmt: skip
    add_spec_flags(sw, "sweep", required=(), aliases={"sharpness_eps": ("--eps",), "sharpness_draws": ("--draws",)},
                   helps={"dataset": "evaluation data (default: B's dataset); with --preset, a Bansal preset's scale: "
                                     "digits (default) or mnist5k (28x28 MNIST, three conv blocks)"})  # fmt: skip
    sw.add_argument("--rerun", action="store_true", help="run the sweep(s) again even if the store has them")


def table(s: dict[str, Any]) -> str:
    """One sweep as a terminal table: a row per position, a column per metric (+ the random-init control's best
    and the noise sender's value of the last metric; + the penalty B − stitched, higher = worse, with accuracy,
    and its paired 95% interval last; + simplicity), A and B last."""
    from stitchcore.experiments.sweep import penalty_along, penalty_ci_along

    keys = list(s["metrics"])
    penalty, spans = penalty_along(s), penalty_ci_along(s)
    spans = spans if any(spans) else []
    noise = s.get("noise_sender")
    cols = [*keys, "control:" + keys[-1]] if s.get("control") else list(keys)
    if noise:
        cols.append("noise:" + keys[-1])
    if penalty:
        cols.append("penalty")
    if s.get("simplicity"):
        cols += ["grad_norm", "sharpness", "gzip_bits"]
    widths = [max(len(c), 8) + 2 for c in cols]
    lines = [f"{'position':10s}" + "".join(f"{c:>{w}s}" for c, w in zip(cols, widths, strict=True))
             + ("   penalty 95%" if spans else "")]

    def fmt(values: list[Any]) -> str:
        return "".join(f"{'-':>{w}s}" if v is None else (f"{v:>{w}.0f}" if abs(v) >= 1000 else f"{v:>{w}.3f}")
                       for v, w in zip(values, widths, strict=True))  # fmt: skip

    for i, pos in enumerate(s["positions"]):
        vals = [s["stitched"][k][i] for k in keys]
        if s.get("control"):
            vals.append(s["control"][keys[-1]]["max"][i])
        if noise:
            vals.append(noise["metrics"][keys[-1]][i])
        if penalty:
            vals.append(penalty[i])
        if s.get("simplicity"):
            vals += [s["simplicity"][k][i] for k in ("grad_norm", "sharpness", "gzip_bits")]
        ci = spans[i] if i < len(spans) else None
        lines.append(f"{pos:10s}" + fmt(vals) + (f"   [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""))
    for role in ("a", "b"):
        ref = s["reference"][role]
        vals = ([ref["metrics"][k] for k in keys] + ([None] if s.get("control") else []) + ([None] if noise else [])
                + ([None] if penalty else []))
        if s.get("simplicity"):
            vals += [ref["simplicity"][k] for k in ("grad_norm", "sharpness", "gzip_bits")]
        lines.append(f"{role.upper() + ' alone':10s}" + fmt(vals))
    return "\n".join(lines)


def _cmd_sweep(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """List the presets, run one preset, or run one sweep of --a/--b; print the table(s)."""
    from stitchcore.experiments.trait_presets import list_presets

    if args.list_presets:
        rows = [{"name": p.name, "title": p.title, "claim": p.claim, "look_for": p.look_for,
                 "models": len(p.recipes), "sweeps": len(p.sweeps)} for p in list_presets()]  # fmt: skip
        emit(args, {"presets": rows}, "\n".join(f"{r['name']:17s} {r['title']}: {r['claim']}" for r in rows))
        return
    if args.preset:
        if args.a or args.b:
            raise StitchError("use either --preset NAME or --a/--b, not both")
        _run_presets(args, store, bar)
        return
    if not (args.a and args.b):
        raise StitchError("sweep needs --a REF and --b REF (same architecture), or --preset NAME")
    if args.model_seeds is not None:  # it would be ignored: one sweep of --a/--b has no models to train
        raise StitchError("--model-seeds trains a preset's models from several seeds: use it with --preset NAME")
    for flag, value in (("--positions", args.positions), ("--metrics", args.metrics)):
        if value is not None and not value:  # "" would quietly be every cut / accuracy
            raise StitchError(f"{flag} names nothing: give comma-separated names (see --help), or leave {flag} out "
                              "for the default")  # fmt: skip
    from stitchcore.params import build_spec

    spec = build_spec("sweep", spec_values(args, "sweep"))  # every flag left out at today's default
    out = run("sweep", spec, args, store, bar)
    emit(args, outcome(out), table(out.record.summary) + f"\n({took(out.cached, out.seconds)}; run {out.record.id})")


def _run_presets(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Run the preset at each of ``--model-seeds`` seeds; print seed 0's models and tables, then (several
    seeds) each sweep's cuts across the seeds."""
    from stitchcore.experiments.preset_seeds import across_model_seeds, model_seeds, seeded_preset

    seeds = model_seeds(1 if args.model_seeds is None else args.model_seeds)
    for flag in ("train_data", "positions", "max_train", "max_test"):
        if getattr(args, flag) is not None:  # a preset's sweeps are its own: the flag would be ignored
            raise StitchError(f"--{flag.replace('_', '-')} is for a sweep of --a/--b; a preset's sweeps fix their own")
    seeded = [seeded_preset(args.preset, k, dataset=args.dataset) for k in range(len(seeds))]
    from stitchcore.experiments.trait_presets import missing_weights, weights_words

    if missing := missing_weights(seeded[0]):  # its pretrained towers are not on this machine: nothing runs
        raise StitchError(f"preset {args.preset!r} {weights_words(missing)}")
    runs = [_run_preset(args, store, bar, preset) for preset in seeded]
    bar.close()
    if len(seeds) == 1:
        emit(args, *runs[0])
        return
    across = across_model_seeds(args.preset, store, len(seeds), dataset=args.dataset)
    obj = {**runs[0][0], "model_seeds": seeds, "per_seed": [obj for obj, _ in runs], "across_seeds": across}
    head = (f"across {len(seeds)} model seeds ({', '.join(map(str, seeds))}; each seed's models and adapters its "
            "own): mean [95% t-interval]")  # fmt: skip
    text = [runs[0][1], "", head]
    first = seeded[0]
    for k, sweep in enumerate(across):
        text += ["", f"[{k}] {sweep['title']}{_baseline_words(first, k)}", across_table(sweep)]
    emit(args, obj, "\n".join(text))


def across_table(sweep: dict[str, Any]) -> str:
    """One sweep across model seeds (:func:`~stitchcore.experiments.preset_seeds.across_rows`): a row per cut,
    ``mean [lo, hi]`` per metric and for the penalty."""
    from stitchcore.experiments.preset_seeds import across_rows

    rows = across_rows(sweep)
    cols = [c for c in (rows[0] if rows else {}) if c != "cut"]
    lines = [f"{'position':10s}" + "".join(f"{name:>24s}" for name in cols)]
    lines += [f"{row['cut']:10s}" + "".join(f"{row[c]:>24s}" for c in cols) for row in rows]
    return "\n".join(lines)


def _run_preset(args: argparse.Namespace, store: Store, bar: ProgressBar, preset: Preset) -> tuple[dict, str]:
    """Train the preset's models (cached), run its sweeps; (JSON object, text) of every model and table."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.sweep import penalty_along, penalty_ci_along

    check_device(args)
    set_threads(args)
    check_log_to(args)
    models, sweeps = [], []
    for recipe in preset.recipes:
        out = run_experiment("zoo", recipe, store, progress=bar, device=args.device, wait=not args.no_wait,
                             cancel=CTRL_C)  # fmt: skip
        log_to_tracker(args, store, out.record)
        models.append({"ref": out.record.summary["ref"], "run_id": out.record.id, "cached": out.cached,
                       "accuracy": out.record.summary["accuracy"], "recipe": recipe.label()})  # fmt: skip
    for title, spec in zip(preset.sweep_titles, preset.sweeps, strict=True):
        out = run_experiment("sweep", spec, store, rerun=args.rerun, progress=bar, device=args.device, cancel=CTRL_C,
                             wait=not args.no_wait, options=run_options(args))
        log_to_tracker(args, store, out.record)
        sweeps.append({"title": title, "run_id": out.record.id, "cached": out.cached, **out.record.summary,
                       "penalty": penalty_along(out.record.summary),
                       "penalty_ci": penalty_ci_along(out.record.summary)})  # fmt: skip
    obj = {"preset": preset.name, "dataset": preset.dataset, "claim": preset.claim, "look_for": preset.look_for,
           "models": models,
           "sweeps": sweeps, "baselines": {str(k): list(refs) for k, refs in preset.baselines.items()}}  # fmt: skip
    text = [f"{preset.title}{'' if preset.dataset == 'digits' else f' (on {preset.dataset})'}: {preset.claim}",
            f"look for: {preset.look_for}"]
    text += [f"  {m['ref']:32s} {m['accuracy']:.3f}  {m['recipe']}" for m in models]
    for k, s in enumerate(sweeps):
        text += ["", f"[{k}] {s['title']}  (A {s['a']} -> B {s['b']}){_baseline_words(preset, k)}", table(s)]
    return obj, "\n".join(text)


def _baseline_words(preset: Preset, k: int) -> str:
    """What sweep ``k`` of a preset is read against, or what it is a reference of ("" for neither).

    >>> from stitchcore.experiments.trait_presets import get_preset
    >>> _baseline_words(get_preset("coarse-labels"), 0), _baseline_words(get_preset("coarse-labels"), 2)
    ('; read against [2], [1]', '; reference of [0]')
    """
    if k in preset.baselines:
        return "; read against " + ", ".join(f"[{j}]" for j in preset.baselines[k])
    claims = [c for c, refs in preset.baselines.items() if k in refs]
    return "; reference of " + ", ".join(f"[{c}]" for c in claims) if claims else ""


COMMANDS: dict[tuple[str, str | None], Command] = {("sweep", None): _cmd_sweep}
