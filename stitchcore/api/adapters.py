"""A trained stitch adapter as a Hugging Face Hub artifact (issue 41, item 6): ``save_adapter(result, DIR)`` writes
its weights (``model.safetensors``), its config (the spec, A's and B's refs and cuts, the run id, the metrics with
their intervals) and a model card (``README.md``) through ``huggingface_hub``'s ``PyTorchModelHubMixin``;
``load_adapter(DIR)`` reads it back and ``.accuracy()`` gives its run's stitched accuracy again on the run's test
images.  ``push_to_hub`` is the mixin's real call: offline it is refused, saying what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.store.results import Store

__all__ = ["StitchAdapter", "load_adapter", "save_adapter"]

CARD = """
---
{{ card_data }}
---

# A StitchLab stitch adapter: {{ a }} [{{ cut_a }}] -> {{ b }} [{{ cut_b }}]

A {{ adapter_kind }} adapter that joins model A's layers up to `{{ cut_a }}` to model B's layers after `{{ cut_b }}`
(A and B frozen, only the adapter trained), made by [StitchLab](https://github.com/) run `{{ run_id }}`.

| | |
|---|---|
| A | `{{ a }}`, cut `{{ cut_a }}` (activation {{ shape_a }}) |
| B | `{{ b }}`, cut `{{ cut_b }}` (activation {{ shape_b }}) |
| Data | {{ dataset }} |
| Stitched accuracy | {{ accuracy }} |
| Penalty (B − stitched) | {{ penalty }} |

Recipe (the run's spec; the same spec is the same run id in StitchLab's app, CLI and Python API):

```json
{{ spec_json }}
```

Load it with `stitchcore.load_adapter(DIR)`; `.accuracy()` scores A → adapter → B again on the run's test images.
"""


class StitchAdapter(nn.Module, PyTorchModelHubMixin, library_name="stitchlab", tags=["model-stitching", "stitchlab"],
                    model_card_template=CARD):  # fmt: skip
    """The adapter of one stitch run ([B, *cut_a.shape] -> [B, *cut_b.shape]) with what made it (``config``)."""

    def __init__(self, run_id: str, spec: dict[str, Any], cut_a: dict[str, Any], cut_b: dict[str, Any],
                 metrics: dict[str, Any]) -> None:  # fmt: skip
        from stitchcore.cuts import Cut
        from stitchcore.stitching.adapters import AdapterSpec, build_adapter

        super().__init__()
        self.run_id, self.spec, self.metrics = run_id, spec, metrics
        self.cut_a, self.cut_b = Cut.from_dict(cut_a), Cut.from_dict(cut_b)
        self.adapter = build_adapter(AdapterSpec(**spec["adapter"]), self.cut_a, self.cut_b)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # [B, *cut_a.shape] -> [B, *cut_b.shape]
        return self.adapter(h)

    def generate_model_card(self, *args: Any, **kwargs: Any) -> Any:
        """The card: the recipe, A and B with their cuts, the data, the metrics with their intervals, the run id."""
        from huggingface_hub import ModelCard, ModelCardData

        def pct(key: str, scale: float = 100.0, unit: str = "%") -> str:
            value, ci = self.metrics.get(key), self.metrics.get(f"{key}_ci")
            if value is None:
                return "not stored"
            spread = f" (95% interval {scale * ci[0]:.1f} to {scale * ci[1]:.1f})" if ci else ""
            return f"{scale * value:.1f}{unit}{spread}"

        data = ModelCardData(library_name="stitchlab", tags=["model-stitching", "stitchlab"])
        return ModelCard.from_template(
            data, template_str=CARD, run_id=self.run_id, a=self.spec["a"], b=self.spec["b"], cut_a=self.cut_a.name,
            cut_b=self.cut_b.name, shape_a=list(self.cut_a.shape), shape_b=list(self.cut_b.shape),
            adapter_kind=self.spec["adapter"]["kind"], dataset=self.spec.get("dataset") or "B's own data set",
            accuracy=pct("accuracy"), penalty=pct("penalty", unit=" points"),
            spec_json=json.dumps(self.spec, indent=2))  # fmt: skip

    def push_to_hub(self, repo_id: str, **kwargs: Any) -> Any:  # type: ignore[override]
        """The mixin's upload to the Hub (its model card included); offline, a StitchError saying what to do."""
        from stitchcore.models.sources import offline_flag

        if offline_flag():
            raise StitchError(f"cannot push {repo_id} to the Hugging Face Hub: this machine is offline "
                              "(HF_HUB_OFFLINE or no network); the saved folder can be uploaded later from a machine "
                              "online with `huggingface-cli upload REPO DIR`")  # fmt: skip
        try:
            return super().push_to_hub(repo_id, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the hub's network and auth errors, said in one line
            raise StitchError(f"cannot push {repo_id} to the Hugging Face Hub ({str(exc).splitlines()[0]}): log in "
                              "with `huggingface-cli login` (or set HF_TOKEN) on a machine online") from None

    def accuracy(self, store: Store | str | Path | None = None, device: str = "cpu") -> float:
        """A's prefix -> this adapter -> B's top on the run's test images (A and B loaded from ``store``)."""
        from stitchcore.experiments.stitch import StitchSpec, stitched_accuracy
        from stitchcore.store.opened import open_store

        return stitched_accuracy(StitchSpec.from_dict(self.spec), open_store(store), self.adapter.state_dict(), device)


def save_adapter(result: Any, folder: str | Path) -> Path:
    """Save the adapter of a finished stitch run (``result``: an ``api.Result``; ``Result.save_adapter`` calls this)
    with its config and model card."""
    from safetensors.torch import load

    from stitchcore.experiments.stitch import ADAPTER_WEIGHTS, stitch_cuts

    if result.kind != "stitch" or result.status != "done":
        raise StitchError(f"run {result.run_id} is a {result.status} {result.kind} run: only a finished stitch run has "
                          "an adapter to save")  # fmt: skip
    spec = result.spec
    cut_a, cut_b = stitch_cuts(spec, result.store)
    keep = ("accuracy", "accuracy_ci", "penalty", "penalty_ci", "base", "params", "flops")
    adapter = StitchAdapter(result.run_id, spec.all_fields(), cut_a.to_dict(), cut_b.to_dict(),
                            {k: result.summary[k] for k in keep if k in result.summary})  # fmt: skip
    state = load(result.store.artifact_path(result.run_id, ADAPTER_WEIGHTS).read_bytes())
    adapter.adapter.load_state_dict(state)
    folder = Path(folder)
    adapter.save_pretrained(folder)
    return folder


def load_adapter(folder: str | Path) -> StitchAdapter:
    """A saved adapter (``save_adapter``'s folder, or a Hub repo id when online), in eval mode; ``.accuracy()``
    scores it again; StitchError for a folder that holds none."""
    path = Path(folder)
    if path.exists() and not (path / "config.json").is_file():
        raise StitchError(f"{folder} holds no saved adapter (no config.json): save one with Result.save_adapter(DIR)")
    try:
        return StitchAdapter.from_pretrained(str(folder)).eval()
    except StitchError:
        raise
    except Exception as exc:  # noqa: BLE001 - the hub's and torch's errors, said in one line
        raise StitchError(f"cannot load an adapter from {folder}: {str(exc).splitlines()[0]}") from None
