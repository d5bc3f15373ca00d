"""Findings of the Oxford report's trait presets, re-measured after issue 25 (JSON on stdout).

    STITCHLAB_JOB_THREADS=1 python bench/findings_traits.py [--seeds 0 2 4] [--store DIR]

Each preset runs with the report's protocol (a task-trained stitch; ``trait_presets.TASK_EPOCHS`` epochs, a
setting chosen on the validation split ``digits|val300s0``, never on the test images) at every seed, on the
digits test split.  Per finding: the report's claim, the project's numbers (mean and min..max over the seeds)
and a verdict.  Also: the random-init control pairs are two different networks (weights fingerprints), and
the special-layer stitches are never bit-identical to A or B (logit gaps).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _seeds import per_position, stat  # bench/ is the script's folder

from stitchcore.experiments.trait_presets import run_preset
from stitchcore.models.info import weights_fingerprint
from stitchcore.models.sources import load_model
from stitchcore.store.results import Store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 2, 4])
    ap.add_argument("--store", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    store = Store(args.store or tempfile.mkdtemp(prefix="findings_traits_"))
    t0 = time.time()
    raw: dict[str, list] = {"inheritance": [], "special": [], "sanity": [], "distributed": [], "simplicity": [],
                            "twins": []}  # fmt: skip
    for seed in args.seeds:
        (s,) = [o.record.summary for o in run_preset("inheritance", store, seed=seed)[1]]
        raw["inheritance"].append(s)
        sweeps = [o.record.summary for o in run_preset("special-layer", store, seed=seed)[1]]
        raw["special"].append(sweeps[:3])
        raw["sanity"].append(sweeps[3])
        (s,) = [o.record.summary for o in run_preset("distributed", store, seed=seed)[1]]
        raw["distributed"].append(s)
        (s,) = [o.record.summary for o in run_preset("simplicity", store, seed=seed)[1]]
        raw["simplicity"].append(s)
        pairs = raw["inheritance"][-1]["control_refs"]
        raw["twins"].append([[weights_fingerprint(load_model(r, store=store).model) for r in p] for p in pairs])
        print(f"seed {seed} done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)

    inh = raw["inheritance"]
    conf = "confusion:3->8"
    findings = {}
    findings["inheritance"] = {
        "claim": "stitched models inherit traits: '3 predicted as 8' low at early cuts (B's layers), high late (A's)",
        "positions": inh[0]["positions"],
        "stitched": per_position([s["stitched"][conf] for s in inh]),
        "control_max": per_position([s["control"][conf]["max"] for s in inh]),
        "A": stat([s["reference"]["a"]["metrics"][conf] for s in inh]),
        "B": stat([s["reference"]["b"]["metrics"][conf] for s in inh]),
    }
    sp = raw["special"]
    special = {}
    for k in range(3):
        rows = [seed_rows[k] for seed_rows in sp]
        special[f"fc{k + 1}"] = {
            "positions": rows[0]["positions"],
            "stitched": per_position([s["stitched"][conf] for s in rows]),
            "control_max": per_position([s["control"][conf]["max"] for s in rows]),
            "logit_gap_a_min": min(r["logit_gap"]["a"] for s in rows for r in s["rows"]),
            "logit_gap_b_min": min(r["logit_gap"]["b"] for s in rows for r in s["rows"]),
            "before_minus_after": stat([statistics.fmean(s["stitched"][conf][: k + 1])
                                        - statistics.fmean(s["stitched"][conf][k + 1 :]) for s in rows]),
        }  # fmt: skip
    san = raw["sanity"]
    findings["special-layer"] = {
        "claim": "a trait located in one layer appears exactly when that layer is in the stitched model",
        "per_layer": special,
        "sanity_by_construction": {"positions": san[0]["positions"],
                                   "stitched": per_position([s["stitched"][conf] for s in san]),
                                   "logit_gap_a": [[r["logit_gap"]["a"] for r in s["rows"]] for s in san],
                                   "logit_gap_b": [[r["logit_gap"]["b"] for r in s["rows"]] for s in san]},
    }  # fmt: skip
    dis = raw["distributed"]
    findings["distributed"] = {
        "claim": "a distributed trait grows with the number of layers taken from its model (accuracy on 3s falls)",
        "positions": dis[0]["positions"],
        "stitched_class_acc_3": per_position([s["stitched"]["class_acc:3"] for s in dis]),
        "control_min": per_position([s["control"]["class_acc:3"]["min"] for s in dis]),
        "A": stat([s["reference"]["a"]["metrics"]["class_acc:3"] for s in dis]),
        "B": stat([s["reference"]["b"]["metrics"]["class_acc:3"] for s in dis]),
    }
    sim = raw["simplicity"]
    keys = ("grad_norm", "sharpness", "gzip_bits", "grad_norm_batch", "sharpness_abs", "gzip_bits_all")
    findings["simplicity"] = {
        "claim": "simplicity can be traced layer by layer: stitched models' measures move from B's to A's",
        "setting": "Fig. 6: one plain CNN fine-tuned with L1 + pruning (A) and with L2 (B); trained stitch, "
                   "adapter counted",
        "positions": sim[0]["positions"],
        "stitched": {k: per_position([s["simplicity"][k] for s in sim]) for k in keys},
        "A": {k: stat([s["reference"]["a"]["simplicity"][k] for s in sim]) for k in keys},
        "B": {k: stat([s["reference"]["b"]["simplicity"][k] for s in sim]) for k in keys},
        "stitched_test_loss": per_position([[r["simplicity"]["loss"] for r in s["rows"]] for s in sim]),
        "A_loss": stat([s["reference"]["a"]["simplicity"]["loss"] for s in sim]),
        "B_loss": stat([s["reference"]["b"]["simplicity"]["loss"] for s in sim]),
        "stitch_loss_last_epochs": [[r["train_loss"][-3:] for r in s["rows"]] for s in sim],
        "accuracy": per_position([s["stitched"]["accuracy"] for s in sim]),
    }  # fmt: skip
    findings["random-init control"] = {
        "claim": "two untrained networks of one architecture are different networks",
        "fingerprints": raw["twins"],
        "all_pairs_differ": all(a != b for seed in raw["twins"] for a, b in seed),
    }
    print(json.dumps({"seeds": args.seeds, "seconds": round(time.time() - t0), "findings": findings}, indent=1))


if __name__ == "__main__":
    main()
