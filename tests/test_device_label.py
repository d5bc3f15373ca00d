"""The device label the app shows: a GPU's name and memory in use, read without starting CUDA in the server."""

import os
import stat
import sys

import pytest
import torch

from stitchcore.device import describe_device

FAKE = """#!{python}
import sys
assert "--id=1" in sys.argv and "--format=csv,noheader,nounits" in sys.argv, sys.argv
print("NVIDIA H100 80GB HBM3, 3092, 81559")
"""


@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    exe = tmp_path / "nvidia-smi"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return exe


def test_a_gpu_is_named_with_its_memory_in_use_as_nvidia_smi_reports_it(fake_nvidia_smi, monkeypatch):
    def no_cuda(*_args, **_kwargs):
        raise AssertionError("the label must not start CUDA in this process")

    monkeypatch.setattr(torch.cuda, "get_device_properties", no_cuda)
    assert describe_device(torch.device("cuda:1")) == "CUDA: NVIDIA H100 80GB HBM3 (3.0 of 80 GiB in use)"


def test_cpu_label_names_the_threads_a_job_uses():
    assert describe_device(torch.device("cpu"), threads=2) == "CPU (2 threads per job)"
