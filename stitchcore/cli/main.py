"""``python -m stitchcore``: the same experiments and store as the app, from a shell.

``--json`` prints exactly one JSON object on stdout; progress goes to stderr;
bad input exits 2 with a one-line ``error: ...`` naming the fix.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

from stitchcore.cli import lm as cli_lm
from stitchcore.cli import sweep as cli_sweep
from stitchcore.errors import StitchError

__all__ = ["main", "build_parser"]


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most 10 times a second."""

    def __init__(self, enabled: bool = True, width: int = 30) -> None:
        self.enabled = enabled
        self.width = width
        self._last = 0.0
        self._shown = False

    def __call__(self, fraction: float, message: str, metrics: dict[str, float]) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.1 and fraction < 1.0):
            return
        self._last = now
        filled = int(self.width * fraction)
        extra = "  ".join(f"{k}={v:.4g}" for k, v in metrics.items())
        line = f"\r[{'#' * filled}{'.' * (self.width - filled)}] {fraction:6.1%} {message[:60]:60s} {extra}"
        sys.stderr.write(line[:160])
        sys.stderr.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _pair(text: str) -> tuple[int, int]:
    try:
        x, y = text.split(":")
        return int(x), int(y)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X:Y (two class indices), got {text!r}") from None


def _json_obj(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object, e.g. '{\"width\": 32}'")
    return value


def _spec_default(name: str) -> Any:
    """The StitchSpec default for a field, so the CLI never restates it."""
    from stitchcore.experiments.stitch import StitchSpec

    return StitchSpec.__dataclass_fields__[name].default


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", help="results store directory (default: $STITCHLAB_STORE, else cache/)")
    common.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    common.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    common.add_argument("--quiet", action="store_true", help="no progress bar on stderr")

    p = argparse.ArgumentParser(prog="python -m stitchcore", description="Model stitching from the shell.")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    zoo = verbs.add_parser("zoo", help="train and list built-in models").add_subparsers(dest="zoo_verb", required=True)
    zt = zoo.add_parser("train", parents=[common], help="train a zoo recipe (cached: never trained twice)")
    zt.add_argument("--arch", default="cnn", help="mlp | cnn | resnet (see stitchcore.archs)")
    zt.add_argument("--dataset", default="digits", help="digits | mnist | fashion-mnist | cifar10 | cifar100 | imagefolder:PATH")
    zt.add_argument("--seed", type=int, default=0)
    zt.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    zt.add_argument("--epochs", type=int, default=None, help="default 20")
    zt.add_argument("--lr", type=float, default=None, help="default 0.05 (sgd) / 2e-3 (adamw)")
    zt.add_argument("--batch-size", type=int, default=None)
    zt.add_argument("--weight-decay", type=float, default=None)
    zt.add_argument("--image-size", type=int, default=None, help="resize inputs (e.g. 16 or 32 for digits)")
    zt.add_argument("--arch-kwargs", type=_json_obj, default=None, help='JSON, e.g. \'{"blocks": [1,1,1,1]}\'')
    zt.add_argument("--relabel", type=_pair, default=None, metavar="X:Y", help="train with class X labelled Y")
    zt.add_argument("--drop-class", type=int, default=None, metavar="X", help="never show class X in training")
    zt.add_argument("--l1", type=float, default=0.0)
    zt.add_argument("--l2", type=float, default=0.0)
    zt.add_argument("--prune-every", type=int, default=0, metavar="EPOCHS")
    zt.add_argument("--prune-fraction", type=float, default=0.0)
    zt.add_argument("--rerun", action="store_true", help="train again even if the store has it")
    zoo.add_parser("list", parents=[common], help="list trained zoo models")

    cuts = verbs.add_parser("cuts", parents=[common], help="list the cut points of a model")
    cuts.add_argument("ref", help="a ModelRef, e.g. zoo:cnn-digits-s0 or timm:resnet18?pretrained=false")

    st = verbs.add_parser("stitch", parents=[common], help="stitch A's bottom to B's top and train the adapter")
    st.add_argument("--a", required=True, help="ModelRef of the bottom model A")
    st.add_argument("--b", required=True, help="ModelRef of the top model B")
    st.add_argument("--cut-a", required=True, help="sender cut name in A")
    st.add_argument("--cut-b", required=True, help="receiver cut name in B")
    st.add_argument("--adapter", default="linear", help="identity|linear|linear_relu|conv3x3_relu|bottleneck|lowrank")
    st.add_argument("--norm", default="both", help="none|bn_before|bn_after|both")
    st.add_argument("--resample", default="bilinear", help="none|bilinear|nearest|strided")
    st.add_argument("--init", default="random", help="random|identity|lstsq|procrustes")
    st.add_argument("--rank", type=int, default=None, help="rank of a lowrank adapter")
    st.add_argument("--objective", default="task", help="task|match|kd or a sum like task+0.5*kd")
    st.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    st.add_argument("--lr", type=float, default=_spec_default("lr"))
    st.add_argument("--weight-decay", type=float, default=_spec_default("weight_decay"))
    st.add_argument("--epochs", type=int, default=_spec_default("epochs"))
    st.add_argument("--batch-size", type=int, default=_spec_default("batch_size"))
    st.add_argument("--seed", type=int, default=_spec_default("seed"))
    st.add_argument("--dataset", default=None, help="default: the dataset B was trained on")
    st.add_argument("--head", choices=("b", "a"), default="b", help="a: keep A's head after B's middle (needs --head-cut)")
    st.add_argument("--head-cut", default=None, help="with --head a: the cut where A's head takes over")
    st.add_argument("--max-train", type=int, default=None)
    st.add_argument("--max-test", type=int, default=None)
    st.add_argument("--rerun", action="store_true", help="run again even if the store has it")

    pair = argparse.ArgumentParser(add_help=False)  # every cut of A against every cut of B
    pair.add_argument("--a", required=True, help="ModelRef of model A (rows: sender cuts)")
    pair.add_argument("--b", required=True, help="ModelRef of model B (columns: receiver cuts)")
    pair.add_argument("--senders", default=None, help="comma-separated cut names of A (default: all)")
    pair.add_argument("--receivers", default=None, help="comma-separated cut names of B (default: all)")
    pair.add_argument("--dataset", default=None, help="default: the dataset B was trained on")
    pair.add_argument("--rerun", action="store_true", help="run again even if the store has it")

    mx = verbs.add_parser("matrix", parents=[common, pair], help="stitching matrix: every sender cut x receiver cut")
    mx.add_argument("--mode", choices=("closed-form", "trained"), default="closed-form")
    mx.add_argument("--epochs", type=int, default=None, help="trained mode (default 3)")
    mx.add_argument("--controls", action="store_true", help="also random sender / receiver / both (zoo refs)")
    mx.add_argument("--max-train", type=int, default=None)
    mx.add_argument("--max-test", type=int, default=None)
    mx.add_argument("--seed", type=int, default=0)
    mx.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="trained mode: bf16 autocast (fast on GPUs and AMX CPUs)")

    sm = verbs.add_parser("similarity", parents=[common, pair], help="CKA / Procrustes of every cut pair")
    sm.add_argument("--measure", default="cka-linear", help="cka-linear | cka-rbf | procrustes")
    sm.add_argument("--max-samples", type=int, default=None)
    sm.add_argument("--batch-size", type=int, default=256)

    cli_lm.add_verbs(verbs, common)  # merge: language models (stitchcore/cli_lm.py)
    cli_sweep.add_verbs(verbs, common)  # sweep: traits along depth (stitchcore/cli_sweep.py)

    runs = verbs.add_parser("runs", help="browse the results store").add_subparsers(dest="runs_verb", required=True)
    rl = runs.add_parser("list", parents=[common], help="list runs, newest first")
    rl.add_argument("--kind", default=None)
    rl.add_argument("--status", default=None)
    rl.add_argument("--limit", type=int, default=50)
    rs = runs.add_parser("show", parents=[common], help="show one run with its curves and artifacts")
    rs.add_argument("run_id")
    return p


def _emit(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    if args.json:
        print(json.dumps(obj, sort_keys=True, default=str))
    else:
        print(text)


def _cmd_zoo_train(args, store, bar) -> None:
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.zoo import ZooRecipe

    kwargs: dict[str, Any] = dict(arch=args.arch, dataset=args.dataset, seed=args.seed, optimizer=args.optimizer)
    optional = {
        "epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size, "weight_decay": args.weight_decay,
        "image_size": args.image_size, "arch_kwargs": args.arch_kwargs, "relabel": args.relabel,
        "drop_class": args.drop_class,
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    kwargs.update(l1=args.l1, l2=args.l2, prune_every=args.prune_every, prune_fraction=args.prune_fraction)
    out = run_experiment("zoo", ZooRecipe(**kwargs), store, rerun=args.rerun, progress=bar, device=args.device)
    bar.close()
    s = out.record.summary
    obj = {"run_id": out.record.id, "cached": out.cached, "elapsed": round(out.seconds, 3), **s}
    _emit(args, obj, f"{s['ref']}  accuracy {s['accuracy']:.4f}  ({'cached' if out.cached else f'{out.seconds:.1f} s'})")


def _cmd_zoo_list(args, store, bar) -> None:
    from stitchcore.models.sources.zoo import list_zoo_models

    models = [
        {"ref": r.summary["ref"], "recipe": r.spec, "accuracy": r.summary.get("accuracy"), "run_id": r.id}
        for r in list_zoo_models(store)
    ]
    lines = [f"{m['ref']:40s} accuracy {m['accuracy']:.4f}" for m in models] or ["(no zoo models trained yet)"]
    _emit(args, {"models": models}, "\n".join(lines))


def _cmd_cuts(args, store, bar) -> None:
    from stitchcore.cuts import list_cuts
    from stitchcore.models.sources import load_model

    m = load_model(args.ref, store=store)
    cuts = [
        {"name": c.name, "shape": list(c.shape), "layout": c.layout, "depth": round(c.depth, 4)}
        for c in list_cuts(m.model, m.example_input())
    ]
    lines = [f"{c['name']:24s} {c['layout']:9s} {str(tuple(c['shape'])):20s} depth {c['depth']:.2f}" for c in cuts]
    _emit(args, {"model": m.ref, "cuts": cuts}, "\n".join(lines))


def _cmd_stitch(args, store, bar) -> None:
    from stitchcore.stitching.adapters import AdapterSpec
    from stitchcore.experiments import run_experiment
    from stitchcore.models.refs import parse_ref
    from stitchcore.experiments.stitch import StitchSpec

    adapter = AdapterSpec(kind=args.adapter, norm=args.norm, resample=args.resample, init=args.init, rank=args.rank)
    spec = StitchSpec(
        a=str(parse_ref(args.a)), b=str(parse_ref(args.b)), cut_a=args.cut_a, cut_b=args.cut_b, adapter=adapter,
        objective=args.objective, optimizer=args.optimizer, lr=args.lr, weight_decay=args.weight_decay,
        epochs=args.epochs, batch_size=args.batch_size, seed=args.seed, dataset=args.dataset,
        head=args.head, head_cut=args.head_cut, max_train=args.max_train, max_test=args.max_test,
    )
    out = run_experiment("stitch", spec, store, rerun=args.rerun, progress=bar, device=args.device)
    bar.close()
    s = out.record.summary
    obj = {"run_id": out.record.id, "cached": out.cached, "elapsed": round(out.seconds, 3), **s}
    text = (
        f"stitched {s['accuracy']:.4f}  A {s['base']['a']:.4f}  B {s['base']['b']:.4f}  penalty {s['penalty']:+.4f}"
        f"  params {s['params']}  flops {s['flops']}  ({'cached' if out.cached else f'{out.seconds:.1f} s'})"
    )
    _emit(args, obj, text)


def _grid_text(summary: dict[str, Any], footer: str) -> str:
    """A senders x receivers table of ``summary["values"]`` for the terminal ("-" = skipped cell)."""
    width = max(len(n) for n in summary["senders"] + summary["receivers"])
    lines = [" " * width + " " + " ".join(f"{r[:7]:>7s}" for r in summary["receivers"])]
    for name, row in zip(summary["senders"], summary["values"], strict=True):
        lines.append(f"{name:>{width}s} " + " ".join("      -" if v is None else f"{v:7.3f}" for v in row))
    return "\n".join([*lines, footer])


def _names(text: str | None) -> tuple[str, ...] | None:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else None


def _cmd_matrix(args, store, bar) -> None:
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix import MatrixSpec

    kwargs: dict[str, Any] = dict(
        a=args.a, b=args.b, senders=_names(args.senders), receivers=_names(args.receivers), mode=args.mode,
        controls=args.controls, dataset=args.dataset, max_train=args.max_train, max_test=args.max_test,
        seed=args.seed, precision=args.precision,
    )
    if args.epochs is not None:
        kwargs["epochs"] = args.epochs
    out = run_experiment("matrix", MatrixSpec(**kwargs), store, rerun=args.rerun, progress=bar, device=args.device)
    bar.close()
    s = out.record.summary
    obj = {"run_id": out.record.id, "cached": out.cached, "elapsed": round(out.seconds, 3), **s}
    footer = (f"{s['metric']} of the stitched model; rows = A's cuts, columns = B's cuts"
              f" ({'cached' if out.cached else f'{out.seconds:.1f} s'})")
    _emit(args, obj, _grid_text(s, footer))


def _cmd_similarity(args, store, bar) -> None:
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec

    spec = SimilaritySpec(
        a=args.a, b=args.b, senders=_names(args.senders), receivers=_names(args.receivers), measure=args.measure,
        dataset=args.dataset, max_samples=args.max_samples, batch_size=args.batch_size,
    )
    out = run_experiment("similarity", spec, store, rerun=args.rerun, progress=bar, device=args.device)
    bar.close()
    s = out.record.summary
    obj = {"run_id": out.record.id, "cached": out.cached, "elapsed": round(out.seconds, 3), **s}
    _emit(args, obj, _grid_text(s, f"{s['measure']} on {s['n']} images; rows = A's cuts, columns = B's cuts"))


def _record_row(r) -> dict[str, Any]:
    metric = r.summary.get("accuracy") if r.summary else None
    return {"id": r.id, "kind": r.kind, "status": r.status, "label": r.label, "created": r.created,
            "metric": metric, "error": r.error}


def _cmd_runs_list(args, store, bar) -> None:
    rows = [_record_row(r) for r in store.list_runs(kind=args.kind, status=args.status, limit=args.limit)]
    lines = [f"{r['id']}  {r['kind']:7s} {r['status']:11s} {r['label']}" for r in rows] or ["(no runs)"]
    _emit(args, {"runs": rows}, "\n".join(lines))


def _cmd_runs_show(args, store, bar) -> None:
    r = store.lookup(args.run_id)
    if r is None:
        raise StitchError(f"no run {args.run_id!r} in {store.root}; list runs with: python -m stitchcore runs list")
    obj = {
        "run": {**_record_row(r), "spec": r.spec, "summary": r.summary, "started": r.started, "finished": r.finished},
        "series": {k: [list(p) for p in v] for k, v in store.series(r.id).items()},
        "artifacts": [{k: str(v) for k, v in a.items()} for a in store.artifacts(r.id)],
    }
    _emit(args, obj, json.dumps(obj["run"], indent=2, default=str))


COMMANDS = {
    ("zoo", "train"): _cmd_zoo_train,
    ("zoo", "list"): _cmd_zoo_list,
    ("cuts", None): _cmd_cuts,
    ("stitch", None): _cmd_stitch,
    ("matrix", None): _cmd_matrix,
    ("similarity", None): _cmd_similarity,
    ("runs", "list"): _cmd_runs_list,
    ("runs", "show"): _cmd_runs_show,
}
COMMANDS.update(cli_sweep.COMMANDS)
COMMANDS.update({**cli_lm.COMMANDS, ("stitch", None): cli_lm.lm_aware_stitch(_cmd_stitch)})  # LM refs -> lmstitch


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (0 ok, 2 bad input, 1 bug)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    args = build_parser().parse_args(argv)
    sub = getattr(args, "zoo_verb", None) or getattr(args, "runs_verb", None)
    bar = ProgressBar(enabled=not args.quiet)
    try:
        from stitchcore.store.results import Store

        store = Store(args.store)
        store.mark_interrupted()  # runs left by dead processes; live ones are left alone
        COMMANDS[(args.verb, sub)](args, store, bar)
    except StitchError as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        bar.close()
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0
