"""The project's device check runs on CPU: every step it records has rc 0 and the JSON it writes is what it
printed (a GPU session runs the same script with --device cuda)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(300)
def test_the_device_check_runs_zoo_and_stitch_on_cpu(tmp_path):
    done = subprocess.run([sys.executable, "bench/gpu_check.py", "--device", "cpu", "--quick", "--only", "zoo,stitch",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=280)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    records = json.loads((tmp_path / "gpu_check.json").read_text())
    assert records == json.loads(done.stdout)
    steps = {r["step"]: r for r in records}
    assert steps["environment"]["device"] == "cpu"
    assert [r["rc"] for r in records if "rc" in r] == [0, 0, 0] and steps["stitch"]["device"] == "cpu"
    assert steps["summary"] == {"step": "summary", "ok": 3, "steps": 3, "device": "cpu"}


def test_an_unknown_step_is_refused_naming_the_steps():
    done = subprocess.run([sys.executable, "bench/gpu_check.py", "--only", "stich"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "unknown step 'stich'; steps are zoo, stitch" in done.stderr
