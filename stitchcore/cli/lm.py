"""CLI verbs for language models: ``merge`` (merge / LM stitch, one split or every depth), and
``stitch`` with LM refs (dispatched here by :func:`lm_aware_stitch`).

    python -m stitchcore merge --a zoo:gpt-pydoc-s0-adamw --b zoo:gpt-pydoc-s1-adamw --split 2 --head b --json
    python -m stitchcore merge --a A --b B --mode stitch --split 2 --steps 200 --json
    python -m stitchcore merge --a A --b B                       # every split, merge + stitch, heads a and b
    python -m stitchcore merge --a A --b B --mode stitch --head b --heatmap
    python -m stitchcore stitch --a A --b B --cut-a h.1 --cut-b h.1 --json   # LM refs: an lmstitch run
    python -m stitchcore lmstitch --a CHAR_REF --b BPE_REF --cut-a 2 --cut-b 2 --json  # every lmstitch field a flag;
                                                                  # across tokenizers: bits per byte and controls
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stitchcore.cli._args import given, safe, whole
from stitchcore.cli._common import Command, ProgressBar, backend_parser, emit, outcome, run, took
from stitchcore.cli._spec_args import add_spec_flags, spec_values, with_defaults
from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.stitching.adapters import AdapterSpec
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs", "is_lm_ref", "lm_aware_stitch"]

MLP_HIDDEN = 128  # --adapter mlp: the hidden width of its GELU branch unless --hidden says
# the lmstitch fields this verb says in its own words (--split for cut_a, --head both, --adapter mlp, --hidden)
_VERB_OWN = ("cut_a", "cut_b", "head", "head_at", "kind", "mlp_hidden")


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``merge`` to the CLI's sub-parsers (``common``: --store, --json, --device, --quiet)."""
    from stitchcore.experiments.lm import LM_ADAPTER

    mg = verbs.add_parser("merge", parents=[common, backend_parser()],
                          help="LM merge (block substitution) or stitch, one split or all (--backend: over depth)")
    add_spec_flags(mg, "lmstitch", required=("a", "b"), skip=_VERB_OWN)  # training and scoring: declared
    mg.add_argument("--mode", choices=("merge", "stitch", "both"), default=None,
                    help="merge: B's blocks in place of A's; stitch: adapter between A and B (default: merge with "
                         "--split, both over depth)")
    mg.add_argument("--head", choices=("a", "b", "both"), default=None,
                    help="a: keep A's head (wte, wpe, ln_f); b: B's (default: a for merge, b for stitch with "
                         "--split; both over depth)")
    mg.add_argument("--split", type=given, default=None, help="residual position i (or a cut name, e.g. h.1); "
                                                  "merge: B's blocks from i; stitch: A's stream at i. Leave out "
                                                  "for every depth")
    mg.add_argument("--end", type=whole, default=None, help="merge: one past the last substituted block "
                                                          "(half-open; default: the last block)")
    mg.add_argument("--embed", choices=("tied", "a", "b"), default=None,
                    help="merge: whose wte/wpe read the input; tied = the head's model's (GPT heads are tied to wte). "
                         "Default: a with --split, tied over depth (a: the reading of sweeps stored before the choice)")
    mg.add_argument("--cut-b", type=given, default=None, help="stitch: B's position j (default: the same as --split)")
    mg.add_argument("--head-at", type=given, default=None, help="stitch with --head a: where B hands back to A's blocks "
                                                    "(default: after B's last block)")
    mg.add_argument("--heatmap", action="store_true", help="over depth: also stitch every (i, j) pair (head b)")
    mg.add_argument("--adapter", type=given, default=LM_ADAPTER.kind, help="linear | lowrank | mlp (linear + GELU MLP branch)")
    mg.add_argument("--hidden", type=whole, default=None,
                    help=f"hidden width of the mlp adapter's branch (default {MLP_HIDDEN})")
    mg.add_argument("--rerun", action="store_true", help="run again even if the store has it")
    ls = verbs.add_parser("lmstitch", parents=[common], help="one LM stitch A[cut-a] -> B[cut-b], also between two "
                          "tokenizers (bits per byte, beside a shuffled alignment and a random-init A)")
    add_spec_flags(ls, "lmstitch", required=("a", "b", "cut_a"))
    ls.add_argument("--rerun", action="store_true", help="run again even if the store has it")
    mg.add_argument("--dry-run", action="store_true", help="with --split: print the joined model's parts and exit")


def _adapter(args: argparse.Namespace) -> AdapterSpec:
    """The adapter of --adapter/--init/--rank (``mlp`` is a linear adapter plus an MLP branch)."""
    from stitchcore.experiments.lm import LM_ADAPTER
    from stitchcore.stitching.adapters import AdapterSpec

    kind = "linear" if args.adapter == "mlp" else args.adapter
    return AdapterSpec(kind=kind, norm=LM_ADAPTER.norm, resample="none", init=args.init, rank=args.rank)


def _position(text: str | None) -> int | str | None:
    """A residual position as an int, a cut name as given.

    >>> _position("2"), _position("h.1"), _position(None)
    (2, 'h.1', None)
    >>> _position("h.²")  # "²".isdigit() is True, but int() refuses it: ASCII only
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: no residual cut 'h.²': write a position in ASCII digits (e.g. 2) or a cut name such as h.1
    """
    if text is None:
        return None
    if not text.isascii():
        raise StitchError(f"no residual cut '{safe(text)}': write a position in ASCII digits (e.g. 2) or a cut name "
                          "such as h.1")  # fmt: skip
    return int(text) if text.strip().isdigit() else text


def _unused_flags(args: argparse.Namespace, split: int | str | None) -> None:
    """Refuse a flag the run would ignore: ``--end`` without ``--split``, ``--cut-b`` on a merge ... (it would
    run, quietly, something other than what was asked)."""
    stitch = args.mode == "stitch"
    ignored = ([("--end", "with --split and --mode merge"), ("--cut-b", "with --split and --mode stitch"),
                ("--head-at", "with --split, --mode stitch and --head a")] if split is None else
               [("--heatmap", "over depth: leave out --split")] + ([("--end", "with --mode merge"),
                ("--embed", "with --mode merge or over depth")] if stitch else
               [("--cut-b", "with --mode stitch"), ("--head-at", "with --mode stitch and --head a")]))  # fmt: skip
    if split is not None and stitch and args.head != "a":
        ignored.append(("--head-at", "with --head a (where B hands back to A's head)"))
    for flag, where in ignored:
        if getattr(args, flag[2:].replace("-", "_"), None) not in (None, False):
            raise StitchError(f"{flag} means nothing here: it is used {where}; leave it out")


def _resolve(text: int | str | None, ref: str, store: Store) -> int | None:
    """An int position, or a cut name (``h.1``, ``drop``) resolved against the model's depth."""
    if text is None or isinstance(text, int):
        return text
    from stitchcore.lm.parts import n_layers, parse_position
    from stitchcore.models.sources import load_model

    return parse_position(text, n_layers(load_model(ref, store=store)))


def _specs(args: argparse.Namespace, store: Store) -> tuple[str, Any]:
    """The experiment kind (``lmdepth``, ``merge`` or ``lmstitch``) and its spec, from the flags."""
    from stitchcore.experiments.lm import DepthSpec, LMStitchSpec, MergeSpec

    args = with_defaults(args, "lmstitch", skip=_VERB_OWN)  # flags left out: today's defaults

    evals = {"text": args.text, "eval_windows": args.eval_windows, "sample_tokens": args.sample_tokens,
             "seed": args.seed}
    d = DepthSpec(a="-", b="-")
    hidden = getattr(args, "hidden", None)
    if hidden is not None and args.adapter != "mlp":
        raise StitchError(f"--hidden is the width of the mlp adapter's branch: use it with --adapter mlp, or leave "
                          f"it out (got --adapter {args.adapter})")  # fmt: skip
    hidden = MLP_HIDDEN if hidden is None else hidden
    if args.adapter == "mlp" and hidden < 1:  # 0 would quietly be the linear adapter
        raise StitchError(f"--hidden must be at least 1 for the mlp adapter (got {hidden}); for no MLP branch "
                          "use --adapter linear")  # fmt: skip
    train = {"adapter": _adapter(args), "objective": args.objective, "steps": args.steps, "batch_size": args.batch_size,
             "lr": args.lr, "weight_decay": args.weight_decay, "mlp_hidden": hidden if args.adapter == "mlp" else 0,
             **{k: getattr(args, k, getattr(d, k)) for k in ("until", "start", "check_every", "patience", "tol")}}
    split = _position(args.split)
    embed = getattr(args, "embed", None)
    train["alignment"] = getattr(args, "alignment", None) or "last"  # across tokenizers; unused otherwise
    _unused_flags(args, split)
    if split is None:
        modes = ("merge", "stitch") if args.mode in (None, "both") else (args.mode,)
        heads = ("a", "b") if args.head in (None, "both") else (args.head,)
        return "lmdepth", DepthSpec(a=args.a, b=args.b, modes=modes, heads=heads, heatmap=args.heatmap,
                                    embed=embed or "tied", **train, **evals)
    if args.mode == "both" or args.head == "both":
        raise StitchError("with --split give one --mode (merge or stitch) and one --head (a or b)")
    i = _resolve(split, args.a, store)
    if args.mode in (None, "merge"):
        head = args.head or "a"
        if train["alignment"] != "last":
            raise StitchError("--alignment is for stitches between two tokenizers; a merge reads one vocabulary")
        return "merge", MergeSpec(a=args.a, b=args.b, start=i, end=args.end, head=head,
                                  embed=head if embed == "tied" else embed or "a", **evals)
    j = _resolve(_position(args.cut_b), args.b, store)
    head = args.head or "b"
    head_at = _resolve(_position(args.head_at), args.b, store) if head == "a" else None
    return "lmstitch", LMStitchSpec(a=args.a, b=args.b, cut_a=i, cut_b=j, head=head, head_at=head_at, **train,
                                    **evals)


def _ci(lo_hi: Any, sign: str = "") -> str:
    """`` [lo, hi]``: a stored 95% interval, as the stitch verb prints one; "" for a run stored without it.

    >>> _ci([2.01, 2.1]), _ci([-0.05, 0.01], "+"), _ci(None)
    (' [2.0100, 2.1000]', ' [-0.0500, +0.0100]', '')
    """
    return f" [{lo_hi[0]:{sign}.4f}, {lo_hi[1]:{sign}.4f}]" if lo_hi else ""


def _half(value: float, lo_hi: Any) -> str:
    """A depth table's cell: the value and the half-width of its 95% interval (``-0.1234±0.0120``).

    >>> _half(-0.1234, [-0.14, -0.116]), _half(0.0, None)
    ('-0.1234±0.0120', '+0.0000')
    """
    return f"{value:+.4f}" + (f"±{(lo_hi[1] - lo_hi[0]) / 2:.4f}" if lo_hi else "")


def _text(kind: str, s: dict[str, Any], cached: bool, seconds: float) -> str:
    """The terminal text of a run: a loss-penalty table over depth, or one layout and its losses; each number
    with its 95% interval where the run stored one (over the validation windows: [lo, hi], or ± half its width
    in the depth table); a stitch's or a depth sweep's last line says how its adapters were trained."""
    from stitchcore.experiments.lm.words import training_words

    when = took(cached, seconds)
    a, b = s["base"]["a"], s["base"]["b"]
    base = f"A loss {a['loss']:.4f}{_ci(a.get('loss_ci'))}  B loss {b['loss']:.4f}{_ci(b.get('loss_ci'))}"
    if kind == "lmdepth":
        from stitchcore.experiments.lm import labelled_points

        curves: dict[str, dict[int, str]] = {}
        for p in labelled_points(s["points"]):
            curves.setdefault(p["label"], {})[p["split"]] = _half(p["loss_penalty"], p.get("loss_penalty_ci"))
        width = max([9, *(len(t) for vals in curves.values() for t in vals.values())])
        lines = [f"{'curve':26s} " + " ".join(f"{'split ' + str(k):>{width}s}" for k in s["splits"])]
        for label, vals in curves.items():
            lines.append(f"{label:26s} " + " ".join(f"{vals.get(k, 'nan'):>{width}s}" for k in s["splits"]))
        for what, why in s.get("skipped", {}).items():
            lines.append(f"{what}: skipped, {why}")
        spread = "; ± half the 95% interval over the windows" if any("±" in t for v in curves.values()
                                                                      for t in v.values()) else ""
        lines.append(f"{base}  loss_penalty = (L_base - L)/L_base, negative = worse{spread} ({when})")
        trained = training_words(s) if s.get("mode") == "depth" else ""
        return "\n".join([*lines, trained] if trained else lines)
    layout = " ".join(s["layout"])
    text = (f"{layout}\nloss {s['loss']:.4f}{_ci(s.get('loss_ci'))}  {base}  loss_penalty {s['loss_penalty']:+.4f}"
            f"{_ci(s.get('loss_penalty_ci'), '+')} (base {s['penalty_base'].upper()})  ({when})")
    return f"{text}\n{training_words(s)}" if kind == "lmstitch" else text


def _cross_text(s: dict[str, Any], cached: bool, seconds: float) -> str:
    """A cross-tokenizer stitch: bits per byte of the stitch, B alone, A alone and each control, and the verdict."""
    from stitchcore.experiments.lm.cross import CONTROL_WORDS, cross_rows

    lines = [" ".join(s["layout"]), f"A: {s['tokenizers']['a']}  B: {s['tokenizers']['b']}  alignment {s['alignment']}"]
    for r in cross_rows(s):
        label = f"control: {r['label']}" if r["role"] in CONTROL_WORDS else r["label"]
        lines.append(f"{label:32s} {r['bits_per_byte']:.4f} bits/byte{_ci(r['ci'])}")
    lines += [f"control: {CONTROL_WORDS[t]}: skipped, {c['skipped']}" for t, c in s["controls"].items()
              if "skipped" in c]
    lines.append(f"{s['verdict']}; {s['eval_windows']} held-out windows, {s['eval_bytes']:,} bytes "
                 f"({took(cached, seconds)})")
    return "\n".join(lines)


def _cross_depth_text(s: dict[str, Any], cached: bool, seconds: float) -> str:
    """A depth sweep across tokenizers: bits per byte of the stitch and each control at every split, B alone,
    and the heat map of bits per byte above B."""
    from stitchcore.experiments.lm.cross import CONTROL_WORDS

    tags = [t for t in CONTROL_WORDS if any(t in p["controls"] and "bits_per_byte" in p["controls"][t]
                                            for p in s["points"])]  # fmt: skip
    lines = [f"A: {s['tokenizers']['a']}  B: {s['tokenizers']['b']}  alignment {s['alignment']}  "
             f"B alone {s['b_bits_per_byte']:.4f}{_ci(s.get('b_bits_per_byte_ci'))} bits/byte",
             f"{'split':>5s} {'stitched':>26s} " + " ".join(f"{CONTROL_WORDS[t]:>22s}" for t in tags)]
    for p in s["points"]:
        lines.append(f"{p['split']:>5d} {p['bits_per_byte']:>8.4f}{_ci(p['bits_per_byte_ci']):>18s} "
                     + " ".join(f"{p['controls'][t]['bits_per_byte']:>22.4f}" for t in tags))
    if s.get("heatmap"):
        heat = s["heatmap"]
        lines.append("bits per byte above B alone, every (i, j): rows A's cut, columns B's " + " ".join(heat["cols"]))
        lines += [f"{r:>8s} " + " ".join(f"{v:+.3f}" for v in row) for r, row in zip(heat["rows"], heat["values"],
                                                                                      strict=True)]
    lines += [f"{k}: skipped, {v}" for k, v in s["skipped"].items()]
    lines.append(f"{s['eval_windows']} held-out windows, {s['eval_bytes']:,} bytes ({took(cached, seconds)})")
    return "\n".join(lines)


def _cmd_lmstitch(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """One LM stitch from the declared flags (today's defaults for the rest); across tokenizers its JSON gives
    bits_per_byte, bits_per_byte_ci, b_bits_per_byte and controls."""
    from stitchcore.params import build_spec

    spec = build_spec("lmstitch", spec_values(args, "lmstitch"))
    out = run("lmstitch", spec, args, store, bar)
    s = out.record.summary
    text = _cross_text(s, out.cached, out.seconds) if s.get("mode") == "cross" else _text("lmstitch", s, out.cached,
                                                                                         out.seconds)
    emit(args, outcome(out, kind="lmstitch"), text)


def _cmd_merge(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
    """Run one merge / LM stitch (``--split``) or the sweep over depth, and print the result."""
    kind, spec = _specs(args, store)
    if getattr(args, "dry_run", False):
        return _dry_run(args, kind, spec, store)
    out = run(kind, spec, args, store, bar)
    s = out.record.summary
    text = (_cross_text(s, out.cached, out.seconds) if s.get("mode") == "cross" else
            _cross_depth_text(s, out.cached, out.seconds) if s.get("mode") == "cross_depth" else
            _text(kind, s, out.cached, out.seconds))  # fmt: skip
    emit(args, outcome(out, kind=kind), text)


def _dry_run(args: argparse.Namespace, kind: str, spec: Any, store: Store) -> None:
    """Print the part list (``merge_layout`` / ``stitch_layout``) without scoring anything."""
    from stitchcore.lm.parts import merge_layout, n_layers, stitch_layout
    from stitchcore.models.sources import load_model

    if kind == "lmdepth":
        raise StitchError("--dry-run needs --split (one merge or stitch)")
    n_a, n_b = (n_layers(load_model(r, store=store)) for r in (spec.a, spec.b))
    if kind == "merge":
        end = min(n_a, n_b) if spec.end is None else spec.end
        layout = merge_layout(n_a, n_b, spec.start, end, spec.head, spec.embed)
    else:
        j = spec.cut_a if spec.cut_b is None else spec.cut_b
        layout = stitch_layout(n_a, n_b, spec.cut_a, j, spec.head, spec.head_at)
    emit(args, {"kind": kind, "layout": layout, "spec": spec.to_dict()}, " ".join(layout))


def is_lm_ref(ref: str, store: Store) -> bool:
    """Whether ``ref`` names a language model, decided without loading weights where possible."""
    from stitchcore.models.refs import parse_ref

    r = parse_ref(ref)
    if r.scheme == "zoo":
        from stitchcore.models.sources.zoo import find_zoo_run

        try:
            return find_zoo_run(store, r.name).summary.get("input_kind") == "tokens"
        except StitchError:
            return False
    if r.scheme == "hf":
        return r.param("task", "causal-lm") == "causal-lm" and "ForImageClassification" not in _hf_archs(r.name)
    return False


def _hf_archs(name: str) -> str:
    """The ``architectures`` of a local HF checkpoint's config.json, joined ("" if unknown)."""
    import json
    from pathlib import Path

    cfg = Path(name).expanduser() / "config.json"
    try:
        return " ".join(json.loads(cfg.read_text()).get("architectures") or [])
    except (OSError, ValueError):
        return ""  # hub ids: transformers decides at load time


def lm_aware_stitch(image_stitch: Command) -> Command:
    """Wrap the image ``stitch`` command: LM refs run an ``lmstitch`` (cuts are names like h.1 or positions)."""

    def command(args: argparse.Namespace, store: Store, bar: ProgressBar) -> None:
        if not (is_lm_ref(args.a, store) or is_lm_ref(args.b, store)):
            return image_stitch(args, store, bar)
        args = with_defaults(args, "stitch")  # the stitch flags left out, at the stitch's defaults
        if args.head_cut is not None and args.head != "a":  # as the image stitch: head_cut needs head='a'
            raise StitchError("--head-cut needs --head a (where B's blocks hand back to A's head)")
        ns = argparse.Namespace(**vars(args))
        ns.split, ns.cut_b, ns.mode, ns.end, ns.embed, ns.heatmap = args.cut_a, args.cut_b, "stitch", None, None, False
        ns.text, ns.eval_windows, ns.sample_tokens = args.dataset, 128, 160
        ns.adapter = args.kind  # the stitch verb's --adapter (its field's link key is "kind")
        ns.steps = args.epochs * 20 if args.epochs else 0  # an LM "epoch" here is 20 adapter steps
        ns.head_at = args.head_cut
        return _cmd_merge(ns, store, bar)

    return command


COMMANDS: dict[tuple[str, str | None], Command] = {("merge", None): _cmd_merge, ("lmstitch", None): _cmd_lmstitch}
