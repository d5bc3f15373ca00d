"""Device check: every run kind end to end through the CLI on one device, then the ResNet-50 figures; one JSON.

Needs no network: digits, CPython's pydoc text, random-init timm/torchvision models and a synthetic image folder.
Each step is a CLI verb with ``--device DEVICE --json`` in its own process over one temporary store; a step that
fails is recorded (rc, last error line) and the next runs.  ``--quick`` leaves out the ResNet-50 steps and trains
the smallest settings.  ``--only zoo,stitch`` runs the named steps (and what they need) and nothing else.

    python bench/gpu_check.py --device cuda            # a few minutes on one GPU
    python bench/gpu_check.py --device cpu --quick     # anywhere (the suite runs a part of it)

Writes ``OUT/gpu_check.json`` (``--out``, default a new temporary folder) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("zoo", "stitch", "matrix", "similarity", "sweep", "assemble", "lm", "resnet50")


class Check:
    """The steps' shared state: device, store, the records so far and where they are written."""

    def __init__(self, device: str, out: Path, quick: bool) -> None:
        self.device, self.out, self.quick = device, out, quick
        self.store = tempfile.mkdtemp(prefix="stitchlab-gpu-check-")
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # keep the user's
        self.env = dict(os.environ, PYTHONPATH=path, STITCHLAB_STORE=self.store, PYTHONUNBUFFERED="1")
        self.records: list[dict] = []
        out.mkdir(parents=True, exist_ok=True)

    def save(self) -> None:
        (self.out / "gpu_check.json").write_text(json.dumps(self.records, indent=1))

    def cli(self, name: str, *args: str, keys: tuple[str, ...] = (), timeout: int = 600) -> dict | None:
        """One CLI verb with --device and --json: its rc, seconds and the named keys of its JSON."""
        cmd = [sys.executable, "-m", "stitchcore", *args, "--device", self.device, "--json", "--quiet"]
        t0 = time.perf_counter()
        try:
            done = subprocess.run(cmd, env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
            rc, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = 124, "", f"timed out after {timeout} s"
        rec: dict = {"step": name, "rc": rc, "seconds": round(time.perf_counter() - t0, 2)}
        data = None
        if rc == 0:
            try:
                data = json.loads(out)
                rec.update({k: data[k] for k in keys if k in data})
            except json.JSONDecodeError:
                rec["note"] = "stdout was not one JSON object"
        else:
            rec["error"] = (err.strip().splitlines() or ["(no stderr)"])[-1][:300]
        self.records.append(rec)
        self.save()
        return data


def environment(device: str) -> dict:
    import torch

    rec: dict = {"step": "environment", "python": platform.python_version(), "device": device,
                 "torch": torch.__version__, "cuda_available": torch.cuda.is_available()}  # fmt: skip
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        rec.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1))
    for mod in ("torchvision", "timm", "transformers", "ray"):
        try:
            rec[mod] = __import__(mod).__version__
        except ImportError as exc:  # a missing package is a finding
            rec[mod] = f"missing ({exc})"
    return rec


def image_folder(root: Path, classes: int = 4, per_class: int = 24, size: int = 256) -> str:
    """A synthetic ImageFolder (train/val) whose classes differ in colour and stripes."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, n in (("train", per_class), ("val", per_class // 3)):
        for c in range(classes):
            folder = root / split / f"c{c}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                img = rng.normal(0, 40, (size, size, 3)) + np.array([(c * 37) % 256, (c * 91) % 256, (c * 53) % 256])
                img[:: 2 + c % 5] += 30
                Image.fromarray(np.clip(img, 0, 255).astype("uint8")).save(folder / f"{i}.png")
    return f"imagefolder:{root}"


def run(check: Check, only: set[str]) -> None:
    acc = ("accuracy", "penalty", "device", "ref")
    epochs = "2" if check.quick else "20"
    a = check.cli("zoo cnn s0", "zoo", "train", "--seed", "0", "--epochs", epochs, keys=acc)
    b = check.cli("zoo cnn s1", "zoo", "train", "--seed", "1", "--epochs", epochs, keys=acc)
    if not (a and b):
        return
    a, b = a["ref"], b["ref"]
    if "stitch" in only:
        check.cli("stitch", "stitch", "--a", a, "--b", b, "--cut-a", "block2", "--cut-b", "block2", "--epochs", "2",
                  keys=acc)  # fmt: skip
    if "matrix" in only:
        check.cli("matrix closed-form", "matrix", "--a", a, "--b", b, "--mode", "closed-form", "--controls")
        check.cli("matrix trained bf16", "matrix", "--a", a, "--b", b, "--mode", "trained", "--epochs", "1",
                  "--precision", "bf16")  # fmt: skip
    if "similarity" in only:
        check.cli("similarity", "similarity", "--a", a, "--b", b)
    if "sweep" in only:
        check.cli("sweep distributed", "sweep", "--preset", "distributed")
    if "assemble" in only:
        swin = check.cli("zoo swin", "zoo", "train", "--arch", "swin", "--epochs", "2" if check.quick else "40",
                         keys=acc)  # fmt: skip
        if swin:
            check.cli("assemble", "assemble", "--a", a, "--b", swin["ref"], "--senders", "block1", "--receivers",
                      "layers.0,layers.1", "--adapters", "linear,bottleneck", "--epochs", "2")  # fmt: skip
    if "lm" in only:
        gpts = [check.cli(f"zoo gpt s{s}", "zoo", "train", "--arch", "gpt", "--dataset", "pydoc", "--seed", str(s),
                          "--optimizer", "adamw", "--epochs", "1" if check.quick else "2", keys=acc) for s in (0, 1)]
        if all(gpts):
            check.cli("merge over depth", "merge", "--a", gpts[0]["ref"], "--b", gpts[1]["ref"], "--mode", "both",
                      "--head", "b")  # fmt: skip
    if "resnet50" in only and not check.quick:
        data = image_folder(Path(tempfile.mkdtemp(prefix="gpu-check-images-")))
        big_a, big_b = "timm:resnet50?pretrained=false&num_classes=4", "torchvision:resnet50?weights=none&num_classes=4"
        check.cli("resnet50 stitch layer2", "stitch", "--a", big_a, "--b", big_b, "--cut-a", "layer2", "--cut-b",
                  "layer2", "--dataset", data, "--epochs", "2", keys=acc)  # fmt: skip
        stages = "layer1,layer2,layer3,layer4"
        check.cli("resnet50 matrix 4x4", "matrix", "--a", big_a, "--b", big_b, "--senders", stages, "--receivers",
                  stages, "--dataset", data, "--mode", "closed-form")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, cpu or mps")
    parser.add_argument("--quick", action="store_true", help="smallest settings, no ResNet-50 steps")
    parser.add_argument("--only", default=",".join(STEPS), help=f"steps to run, of: {','.join(STEPS)}")
    parser.add_argument("--out", type=Path, default=None, help="folder for gpu_check.json (default: a temp one)")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - set(STEPS)
    if unknown:
        parser.error(f"unknown step {sorted(unknown)[0]!r}; steps are {', '.join(STEPS)}")
    check = Check(args.device, args.out or Path(tempfile.mkdtemp(prefix="gpu-check-")), args.quick)
    check.records.append(environment(args.device))
    run(check, only)
    steps = [r for r in check.records if "rc" in r]
    ok = sum(r["rc"] == 0 for r in steps)
    check.records.append({"step": "summary", "ok": ok, "steps": len(steps), "device": args.device})
    check.save()
    print(json.dumps(check.records, indent=1))
    return 0 if ok == len(steps) else 1


if __name__ == "__main__":
    sys.exit(main())
