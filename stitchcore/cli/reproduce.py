"""A stored run as the command line that makes it again ("Copy as CLI"): its verb and the flags of every field
not at what that verb fills in (``_spec_args.spec_argv``); the language-model kinds through the ``merge`` verb's
own flags, checked by reading the line back."""

from __future__ import annotations

import shlex
from typing import Any

from stitchcore.cli._spec_args import spec_argv
from stitchcore.cli.lm import _VERB_OWN
from stitchcore.errors import StitchError

__all__ = ["VERBS", "command_argv", "command_line"]

VERBS = {"zoo": ("zoo", "train"), "stitch": ("stitch",), "matrix": ("matrix",), "similarity": ("similarity",),
         "sweep": ("sweep",), "assemble": ("assemble",), "merge": ("merge",), "lmstitch": ("merge",),
         "lmdepth": ("merge",), "transfer": ("transfer",)}  # fmt: skip


def _lm_training(spec: Any) -> list[str]:
    """The merge verb's declared flags (training and scoring, as the lmstitch kind declares them) for ``spec``."""
    from stitchcore.experiments.lm import LMStitchSpec, MergeSpec
    from stitchcore.experiments.lm.fields import LM_EVAL, LM_TRAIN

    declared = LM_EVAL if isinstance(spec, MergeSpec) else (*LM_EVAL, *LM_TRAIN)  # a merge is scored, not trained
    shared = {top: getattr(spec, top) for top in dict.fromkeys(f.name.partition(".")[0] for f in declared)}
    as_stitch = LMStitchSpec(a=spec.a, b=spec.b, **shared)
    argv = spec_argv("lmstitch", as_stitch, skip=_VERB_OWN)  # the merge verb's own flags say those
    if not isinstance(spec, MergeSpec):
        if spec.alignment != "last":  # across tokenizers (the merge verb's --alignment)
            argv += ["--alignment", spec.alignment]
        argv += ["--adapter", "mlp" if getattr(spec, "mlp_hidden", 0) else spec.adapter.kind]
        if getattr(spec, "mlp_hidden", 0):
            argv += ["--hidden", str(spec.mlp_hidden)]
    return argv


def _lm_argv(kind: str, spec: Any) -> list[str]:
    """The ``merge`` flags of a merge, lmstitch or lmdepth spec."""
    if kind == "merge":
        argv = ["--split", str(spec.start), "--mode", "merge", "--head", spec.head, "--embed", spec.embed]
        argv += ["--end", str(spec.end)] if spec.end is not None else []
        return [*argv, *_lm_training(spec)]
    if kind == "lmstitch":
        argv = ["--split", str(spec.cut_a), "--mode", "stitch", "--head", spec.head]
        argv += ["--cut-b", str(spec.cut_b)] if spec.cut_b is not None else []
        argv += ["--head-at", str(spec.head_at)] if spec.head_at is not None else []
        return [*argv, *_lm_training(spec)]
    both = {("merge", "stitch"): "both", ("a", "b"): "both"}
    argv = ["--mode", both.get(tuple(spec.modes), spec.modes[0]), "--head", both.get(tuple(spec.heads), spec.heads[0]),
            "--embed", spec.embed]  # fmt: skip
    return [*argv, *(["--heatmap"] if spec.heatmap else []), *_lm_training(spec)]


def _read_back(argv: list[str]) -> tuple[str, Any]:
    """The (kind, spec) the merge verb makes of ``argv`` (positions are numbers: no model is loaded)."""
    from stitchcore.cli.lm import _specs
    from stitchcore.cli.main import build_parser

    return _specs(build_parser().parse_args(argv), None)


def command_argv(kind: str, spec: Any) -> list[str]:
    """The verb and flags that make ``spec`` again (the same run id); StitchError where no command line can
    (a depth sweep of chosen splits: the merge verb has no flag for them).

    >>> import stitchcore.experiments
    >>> from stitchcore.params import build_spec
    >>> command_argv("zoo", build_spec("zoo", {"arch": "swin", "optimizer": "sgd"}))  # swin's own default: adamw
    ['zoo', 'train', '--arch', 'swin', '--optimizer', 'sgd', '--epochs', '20']
    """
    if kind not in VERBS:
        raise StitchError(f"no command line makes a {kind} run")
    if kind == "zoo":
        from stitchcore.models.archs import arch_recipe_defaults

        # what zoo train fills in for this architecture (swin: adamw, 40 epochs): a value other than that is said
        return [*VERBS[kind], *spec_argv("zoo", spec, filled=arch_recipe_defaults(spec.arch))]
    if kind not in ("merge", "lmstitch", "lmdepth"):
        return [*VERBS[kind], *spec_argv(kind, spec)]
    from stitchcore.store.records import run_id_for

    argv = ["merge", *_lm_argv(kind, spec)]
    try:
        made_kind, made = _read_back(argv)
    except (StitchError, SystemExit) as exc:
        raise StitchError(f"no merge command line makes this {kind} run ({exc})") from exc
    if made_kind != kind or run_id_for(kind, made.to_dict()) != run_id_for(kind, spec.to_dict()):
        different = sorted(k for k, v in spec.to_dict().items() if made.to_dict().get(k) != v)
        raise StitchError(f"no merge command line makes this {kind} run: its {', '.join(different)} have no flag")
    return argv


def command_line(kind: str, spec: Any, program: str = "python -m stitchcore", store: str | None = None) -> str:
    """:func:`command_argv` as one shell line (with ``--store`` if given).

    >>> import stitchcore.experiments
    >>> from stitchcore.params import build_spec
    >>> command_line("stitch", build_spec("stitch", {"a": "zoo:x", "b": "zoo:y", "cut_a": "fc1", "cut_b": "fc1",
    ...                                               "epochs": 3}))
    'python -m stitchcore stitch --a zoo:x --b zoo:y --cut-a fc1 --cut-b fc1 --epochs 3'
    """
    return f"{program} {shlex.join([*command_argv(kind, spec), *(['--store', store] if store is not None else [])])}"
