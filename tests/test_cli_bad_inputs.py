"""Every bad input the CLI takes is refused the same way (issue 12): exit 2, one line ``error: ...`` on
stderr that names the fix, no traceback, nothing on stdout, and no new row in the store.

One table, run in-process through ``stitchcore.cli.main.main`` (a few also as real processes).
Nothing here trains: every case is refused before a run starts, so the file takes seconds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from stitchcore.store.results import Store
from tests.conftest import copy_store
from tests.conftest import run_cli as run_store_cli

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"
STITCH = ["stitch", "--a", A, "--b", B, "--cut-a", "block2", "--cut-b", "block2"]
MATRIX = ["matrix", "--a", A, "--b", B]
SIMILARITY = ["similarity", "--a", A, "--b", B]
SWEEP = ["sweep", "--a", A, "--b", B]
ZOO = ["zoo", "train"]
NO_MPS = not (getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available())
NOT_HERE = "CUDA is not available|CUDA device"  # cuda:7: no CUDA, or fewer than 8 devices

# (id, argv, what the one line must say: a regex naming the fix).  {one}, {empty}, {missing}: image folders
# written by the `folders` fixture (one class; no class folders; no folder at all).
# fmt: off
CASES: list = [
    # -- model refs
    ("ref-unknown-scheme", ["cuts", "zooo:cnn-digits-s0"], r"did you mean zoo:\?"),
    ("ref-no-scheme", ["cuts", "resnet18"], r"write e\.g\. 'timm:resnet18'"),
    ("ref-empty", ["cuts", ""], r"empty model ref; a model ref looks like"),
    ("ref-no-name", ["cuts", "zoo:"], r"has no name after 'zoo:'; e\.g\. zoo:cnn-digits-s0"),
    ("ref-trailing-?", ["cuts", "zoo:cnn-digits-s0?"], r"drop the '\?'"),
    ("ref-zoo-typo", ["cuts", "zoo:cnn-digit-s0"], r"close to it: zoo:cnn-digits-s0"),
    ("ref-zoo-untrained", ["cuts", "zoo:cnn-digits-s9"], r"train it first: python -m stitchcore zoo train .*--seed 9"),
    ("ref-zoo-seed-abc", ["cuts", "zoo:cnn-digits-s0?init=random&seed=abc"], r"bad seed 'abc'.*write seed=N"),
    ("ref-zoo-seed-30-nines", ["cuts", "zoo:cnn-digits-s0?init=random&seed=" + "9" * 30],
     r"bad seed '9{21}'\.\.\. in zoo:cnn-digits-s0; write seed=N, N a whole number 0 \.\. 2147483647"),
    ("ref-zoo-seed-5000-digits", ["cuts", "zoo:cnn-digits-s0?init=random&seed=" + "9" * 5000], r"bad seed '9{21}'\.\.\."),
    ("ref-zoo-epoch-superscript", ["cuts", "zoo:cnn-digits-s0?epoch=²"], r"bad epoch '²' in zoo:cnn-digits-s0"),
    ("ref-zoo-epoch-5000-digits", ["cuts", "zoo:cnn-digits-s0?epoch=" + "9" * 5000], r"bad epoch '9{21}'\.\.\."),
    ("ref-zoo-seed-2**31", ["cuts", "zoo:cnn-digits-s0?init=random&seed=2147483648"], r"bad seed '2147483648'"),
    ("ref-zoo-bad-init", ["cuts", "zoo:cnn-digits-s0?init=bogus"], r"unknown init 'bogus'.*use \?init=random"),
    ("ref-zoo-bad-option", ["cuts", "zoo:cnn-digits-s0?foo=1"], r"unknown option 'foo'.*take only \?init=random"),
    ("ref-zoo-seed-without-init", ["cuts", "zoo:cnn-digits-s0?seed=3"], r"add init=random"),
    ("ref-zoo-@file", ["cuts", "zoo:cnn-digits-s0@file=/x.pt"], r"for a checkpoint write 'file:/x.pt'"),
    ("ref-bad-option-syntax", ["cuts", "timm:resnet18?pretrained"], r"options are key=value pairs"),
    ("ref-bad-boolean", ["cuts", "timm:resnet18?pretrained=maybe"], r"must be true or false"),
    ("ref-timm-unknown", ["cuts", "timm:not_a_model?pretrained=false"], r"timm has no model 'not_a_model'"),
    ("ref-tv-unknown", ["cuts", "torchvision:not_a_model?weights=none"], r"torchvision has no classification model"),
    ("ref-hf-missing-dir", ["cuts", "hf:/nonexistent/dir"], r"give a directory written by save_pretrained"),
    ("ref-file-missing", ["cuts", "file:/nonexistent/model.pt?arch=zoo:cnn"], r"no checkpoint file at /nonexistent"),
    ("ref-file-not-checkpoint", ["cuts", "file:/etc/hostname"], r"use a \.pt, \.pth or \.safetensors"),
    ("ref-stitch-bad-a", ["stitch", "--a", "tim:x", "--b", B, "--cut-a", "fc1", "--cut-b", "fc1"],
     r"did you mean timm:\?"),
    # -- cuts
    ("cut-a-typo", [*STITCH[:5], "--cut-a", "blok2", "--cut-b", "block2"], r"no cut 'blok2'.*close: block2"),
    ("cut-b-typo", [*STITCH[:7], "--cut-b", "fc9"], r"no cut 'fc9'.*close: fc2"),
    ("cut-matrix-senders", [*MATRIX, "--senders", "blok1"], r"no cut 'blok1'.*close: block1"),
    ("zoo-prune-fraction-without-every", [*ZOO, "--prune-every", "0", "--prune-fraction", "0.5"],
     r"pruning needs both prune_every .*got 0 and 0\.5"),
    ("data-text-corpus-for-images", [*STITCH, "--dataset", "pydoc"], r"pydoc is a text corpus .*not images"),
    ("ray-address-nothing-listens", [*MATRIX, "--senders", "fc1", "--receivers", "fc2", "--backend", "ray",
                                     "--address", "127.0.0.1:1"], r"cannot connect to the Ray cluster at 127\.0\.0\.1:1"),
    ("zoo-image-size-beyond-memory", [*ZOO, "--image-size", "8192"],
     r"training cnn \(8,589,941,866 parameters\) at 8192x8192 needs about .* TB of memory and this machine has"),
    ("zoo-image-size-beyond-bound", [*ZOO, "--image-size", "100000"], r"--image-size\) must be at most 8192"),
    ("zoo-epochs-beyond-bound", [*ZOO, "--epochs", "999999999999"], r"epochs must be at most 10000"),
    ("zoo-batch-beyond-bound", [*ZOO, "--batch-size", "99999999"], r"--batch-size\) must be at most 65536"),
    ("zoo-lr-beyond-bound", [*ZOO, "--lr", "1e30"], r"lr must be at most 10"),
    ("zoo-l1-beyond-bound", [*ZOO, "--l1", "1e300"], r"l1 must be at most 100"),
    ("zoo-arch-kwargs-beyond-memory", [*ZOO, "--arch-kwargs", '{"channels": [100000, 100000]}'],
     r"needs about .* TB of memory .*lower --image-size or the widths in --arch-kwargs"),
    ("cut-matrix-senders-empty", [*MATRIX, "--senders", ""], r"--senders names no cut.*leave --senders out"),
    ("cut-similarity-receivers-commas", [*SIMILARITY, "--receivers", " , "], r"--receivers names no cut"),
    ("matrix-seeds-closed-form", [*MATRIX, "--seeds", "2"], r"closed-form fit is the same from every seed"),
    ("matrix-seeds-zero", [*MATRIX, "--mode", "trained", "--seeds", "0"], r"seeds is 1 to 10"),
    ("sweep-model-seeds-too-many", ["sweep", "--preset", "connectivity", "--model-seeds", "9"],
     r"model seeds must be 1 to 5"),
    ("cut-similarity-receivers", [*SIMILARITY, "--receivers", "fc9"], r"no cut 'fc9'"),
    ("cut-sweep-positions", [*SWEEP, "--positions", "blok1"], r"no cut\(s\) \['blok1'\].*its cuts are"),
    ("head-a-without-cut", [*STITCH, "--head", "a"], r"head='a' needs head_cut"),
    ("head-cut-without-a", [*STITCH, "--head-cut", "fc1"], r"head_cut needs head='a'"),
    # -- numbers
    ("stitch-lr-negative", [*STITCH, "--lr", "-1"], r"lr must be > 0 \(got -1\.0\); typical values"),
    ("stitch-lr-zero", [*STITCH, "--lr", "0"], r"lr must be > 0 \(got 0\.0\)"),
    ("stitch-lr-nan", [*STITCH, "--lr", "nan"], r"lr must be a finite number \(got nan\)"),
    ("stitch-lr-inf", [*STITCH, "--lr", "inf"], r"lr must be a finite number \(got inf\)"),
    ("stitch-lr-text", [*STITCH, "--lr", "fast"], r"argument --lr: expected a number such as 0\.01 or 1e-3, not 'fast'; see .*--help"),
    ("stitch-wd-negative", [*STITCH, "--weight-decay", "-1"], r"--weight-decay\) must be at least 0 \(got -1\.0\)"),
    ("stitch-epochs-negative", [*STITCH, "--epochs", "-1"], r"epochs must be at least 0 \(got -1\)"),
    ("stitch-epochs-text", [*STITCH, "--epochs", "abc"], r"argument --epochs: expected a whole number, not 'abc'"),
    ("stitch-batch-zero", [*STITCH, "--batch-size", "0"], r"--batch-size\) must be at least 1 \(got 0\)"),
    ("stitch-max-train-zero", [*STITCH, "--max-train", "0"], r"--max-train\) must be at least 2 images \(got 0\)"),
    ("stitch-max-test-zero", [*STITCH, "--max-test", "0"], r"--max-test\) must be at least 2 images \(got 0\)"),
    ("stitch-seed-negative", [*STITCH, "--seed", "-1"], r"seed must be a whole number 0 \.\. 2147483647 \(got -1\)"),
    ("stitch-rank-zero", [*STITCH, "--adapter", "lowrank", "--rank", "0"], r"rank must be a positive int"),
    ("matrix-max-train-zero", [*MATRIX, "--max-train", "0"], r"--max-train\) must be at least 2 images"),
    ("matrix-max-test-zero", [*MATRIX, "--max-test", "1"], r"--max-test\) must be at least 2 images \(got 1\)"),
    ("matrix-epochs-negative", [*MATRIX, "--mode", "trained", "--epochs", "-1"], r"epochs must be at least 0 \(got -1\)"),
    ("similarity-max-samples-zero", [*SIMILARITY, "--max-samples", "0"],
     r"--max-samples\) must be at least 4 \(got 0\).*leave it out"),
    ("similarity-batch-small", [*SIMILARITY, "--batch-size", "2"], r"--batch-size\) must be at least 4"),
    ("sweep-max-train-zero", [*SWEEP, "--max-train", "0"], r"--max-train\) must be at least 2 images"),
    ("sweep-epochs-negative", [*SWEEP, "--epochs", "-1"], r"epochs must be at least 0 \(got -1\)"),
    ("sweep-lr-negative", [*SWEEP, "--lr", "-1"], r"lr must be > 0"),
    ("zoo-lr-negative", [*ZOO, "--lr", "-1"], r"lr must be > 0 \(got -1\.0\); typical values 1e-3 \.\. 1e-1"),
    ("zoo-lr-zero", [*ZOO, "--lr", "0"], r"lr must be > 0 \(got 0\.0\)"),
    ("zoo-lr-nan", [*ZOO, "--lr", "nan"], r"lr must be a finite number"),
    ("zoo-wd-negative", [*ZOO, "--weight-decay", "-1"], r"--weight-decay\) must be at least 0 \(got -1\.0\)"),
    ("zoo-epochs-zero", [*ZOO, "--epochs", "0"], r"epochs must be at least 1 \(got 0\)"),
    ("zoo-epochs-negative", [*ZOO, "--epochs", "-1"], r"epochs must be at least 1 \(got -1\)"),
    ("zoo-batch-zero", [*ZOO, "--batch-size", "0"], r"--batch-size\) must be at least 1 \(got 0\)"),
    ("zoo-image-size-zero", [*ZOO, "--image-size", "0"], r"--image-size\) must be at least 1 \(got 0\).*native"),
    ("zoo-image-size-too-small", [*ZOO, "--image-size", "2"], r"image_size 2 is too small.*use image_size >= 4"),
    ("zoo-l1-negative", [*ZOO, "--l1", "-5"], r"l1 must be at least 0 \(got -5\.0\); 0 turns the penalty off"),
    ("zoo-l2-negative", [*ZOO, "--l2", "-1"], r"l2 must be at least 0"),
    ("zoo-seed-negative", [*ZOO, "--seed", "-1"], r"seed must be at least 0 \(got -1\)"),
    ("zoo-prune-fraction", [*ZOO, "--prune-fraction", "1.5"], r"--prune-fraction\) must be below 1"),
    ("zoo-prune-every", [*ZOO, "--prune-every", "-1"], r"--prune-every\) must be at least 0"),
    ("zoo-relabel-range", [*ZOO, "--relabel", "3:99"], r"relabel 99 is not a class of digits; use 0\.\.9"),
    ("zoo-relabel-same", [*ZOO, "--relabel", "3:3"], r"changes nothing; pick two different classes"),
    ("zoo-relabel-syntax", [*ZOO, "--relabel", "3"], r"expected X:Y \(two class indices\)"),
    ("zoo-drop-class-range", [*ZOO, "--drop-class", "10"], r"--drop-class\) 10 is not a class of digits"),
    # -- choices
    ("choice-adapter", [*STITCH, "--adapter", "foo"], r"argument --adapter: invalid choice: 'foo' \(choose from 'identity'"),
    ("choice-norm", [*STITCH, "--norm", "foo"], r"argument --norm: invalid choice: 'foo' \(choose from 'none'"),
    ("choice-resample", [*STITCH, "--resample", "foo"], r"argument --resample: invalid choice: 'foo'"),
    ("choice-init", [*STITCH, "--init", "foo"], r"argument --init: invalid choice: 'foo' \(choose from 'random'"),
    ("choice-objective", [*STITCH, "--objective", "foo"], r"unknown objective 'foo'; use one of: task"),
    ("choice-objective-term", [*STITCH, "--objective", "task+x*kd"], r"write e\.g\. 'task'"),
    ("choice-optimizer", [*STITCH, "--optimizer", "adam"], r"invalid choice: 'adam' \(choose from"),
    ("choice-zoo-optimizer", [*ZOO, "--optimizer", "adam"], r"invalid choice: 'adam'.*zoo train --help"),
    ("choice-head", [*STITCH, "--head", "z"], r"argument --head: invalid choice"),
    ("choice-measure", [*SIMILARITY, "--measure", "foo"], r"unknown measure 'foo'; use one of cka-linear"),
    ("choice-matrix-mode", [*MATRIX, "--mode", "foo"], r"argument --mode: invalid choice"),
    ("choice-precision", [*MATRIX, "--precision", "fp8"], r"argument --precision: invalid choice"),
    ("choice-arch", [*ZOO, "--arch", "cnm"], r"unknown architecture 'cnm'; did you mean 'cnn'"),
    ("choice-dataset", [*ZOO, "--dataset", "mnst"], r"unknown dataset 'mnst'; did you mean 'mnist'"),
    ("choice-stitch-dataset", [*STITCH, "--dataset", "foo"], r"unknown dataset 'foo'"),
    ("choice-dataset-transform", [*ZOO, "--dataset", "digits|bogus"], r"use relabelAtoB, dropC, subsetNsS"),
    ("choice-gpt-corpus", [*ZOO, "--arch", "gpt", "--dataset", "nosuchcorpus"],
     r"train it on a text corpus \(pydoc, tinyshakespeare or file:PATH\), not on 'nosuchcorpus'"),
    ("folder-gpt-corpus-missing", [*ZOO, "--arch", "gpt", "--dataset", "file:/nonexistent.txt"],
     r"text file /nonexistent\.txt not found; check the path"),
    ("choice-gpt-on-images", [*ZOO, "--arch", "gpt"], r"'gpt' is a language model: train it on a text corpus"),
    ("choice-preset", ["sweep", "--preset", "foo"], r"unknown preset 'foo' \(known: inheritance"),
    ("preset-data-digits-only", ["sweep", "--preset", "label-noise", "--dataset", "mnist5k"],
     r"preset 'label-noise' runs on digits only; the mnist5k scale is for connectivity, more-is-better"),
    ("preset-data-unknown", ["sweep", "--preset", "coarse-labels", "--dataset", "cifar10"],
     r"unknown preset data 'cifar10'; use one of: digits, mnist5k"),
    ("preset-ignored-flag", ["sweep", "--preset", "coarse-labels", "--max-test", "50"],
     r"--max-test is for a sweep of --a/--b; a preset's sweeps fix their own"),
    ("choice-verb", ["frobnicate"], r"invalid choice: 'frobnicate'.*python -m stitchcore --help"),
    ("choice-zoo-verb", ["zoo", "frobnicate"], r"invalid choice: 'frobnicate' \(choose from 'train', 'list'\)"),
    ("choice-runs-kind", ["runs", "list", "--kind", "foo"], r"unknown kind 'foo'; use one of"),
    ("choice-runs-status", ["runs", "list", "--status", "foo"], r"argument --status: invalid choice"),
    # -- devices
    pytest.param("device-mps", [*STITCH, "--device", "mps"], r"Apple MPS is not available here; use --device cpu",
                 marks=pytest.mark.skipif(not NO_MPS, reason="this machine has MPS")),
    pytest.param("device-mps-cached", [*ZOO, "--device", "mps"], r"Apple MPS is not available",
                 marks=pytest.mark.skipif(not NO_MPS, reason="this machine has MPS")),
    ("device-cuda-7", [*STITCH, "--device", "cuda:7"], NOT_HERE),
    ("device-nonsense", [*STITCH, "--device", "nonsense"], r"unknown device 'nonsense'; use auto, cpu, cuda"),
    ("device-meta", [*ZOO, "--device", "meta"], r"unknown device 'meta'"),
    # -- datasets on disk
    ("folder-one-class", [*ZOO, "--dataset", "imagefolder:{one}"], r"at least 2 classes, found only 'cat'"),
    ("folder-one-class-stitch", [*STITCH, "--dataset", "imagefolder:{one}"], r"add a folder per class"),
    ("folder-empty", [*ZOO, "--dataset", "imagefolder:{empty}"], r"no class folders in .*put images in"),
    ("folder-missing", [*ZOO, "--dataset", "imagefolder:{missing}"], r"is not a folder; put images in"),
    ("folder-bad-size", [*ZOO, "--dataset", "imagefolder:{one}?size=0"], r"the options are size=N .*and full"),
    ("dataset-files-missing", [*STITCH, "--dataset", "mnist"], r"mnist not found under .*put the IDX files"),
    # -- JSON options
    ("json-not-json", [*ZOO, "--arch-kwargs", "{oops"], r"argument --arch-kwargs: not JSON"),
    ("json-not-object", [*ZOO, "--arch-kwargs", "[1]"], r"expected a JSON object, e\.g\."),
    ("json-unknown-option", [*ZOO, "--arch-kwargs", '{"foo": 1}'], r"unknown option 'foo'.*options: channels"),
    ("json-bad-value", [*ZOO, "--arch-kwargs", '{"channels": [0]}'], r"channels must be 1\.\.4 positive ints"),
    # -- runs and missing arguments
    ("runs-show-unknown", ["runs", "show", "deadbeef"], r"no run 'deadbeef'.*runs list"),
    ("runs-show-no-id", ["runs", "show"], r"required: run_id; see python -m stitchcore runs show --help"),
    ("runs-limit-text", ["runs", "list", "--limit", "abc"], r"argument --limit: expected a whole number, not 'abc'"),
    ("runs-cancel-unknown", ["runs", "cancel", "deadbeef"], r"no run 'deadbeef'.*runs list"),
    ("runs-cancel-finished", ["runs", "cancel", "FIRST_DONE"], r"is done, not queued or running: nothing to cancel"),
    ("runs-cancel-no-id", ["runs", "cancel"], r"required: ID; see python -m stitchcore runs cancel --help"),
    ("runs-report-unknown", ["runs", "report", "deadbeef", "--out", "r.html"], r"unknown run id 'deadbeef'.*runs list"),
    ("runs-report-no-out", ["runs", "report", "FIRST_DONE"], r"required: --out"),
    ("runs-report-out-folder", ["runs", "report", "FIRST_DONE", "--out", "."], r"is a folder, not a file: name a new file"),
    ("zoo-threads-zero", [*ZOO, "--threads", "0"], r"argument --threads: must be at least 1, not 0"),
    ("zoo-threads-text", [*ZOO, "--threads", "two"], r"argument --threads: expected a whole number, not 'two'"),
    ("stitch-missing-b", ["stitch", "--a", A, "--cut-a", "fc1", "--cut-b", "fc1"], r"required: --b"),
    ("sweep-only-a", ["sweep", "--a", A], r"sweep needs --a REF and --b REF"),
    ("merge-image-models", ["merge", "--a", A, "--b", B], r"is not a language model; use the Stitch page"),
    ("merge-sample-tokens-negative", ["merge", "--a", A, "--b", B, "--sample-tokens", "-1"],
     r"sample_tokens must be 0 \(no samples\) or more, not -1"),
    ("lmstitch-mlp-hidden-zero", ["merge", "--a", A, "--b", B, "--mode", "stitch", "--adapter", "mlp", "--hidden", "0"],
     r"--hidden must be at least 1 for the mlp adapter"),
    # -- issue 45: numbers as text.  ASCII digits only: int() takes "٣" (an Arabic-Indic 3), not "²", though
    # both are isdigit(); float() takes "٣" and "1_0" too
    ("num-superscript-epochs", [*STITCH, "--epochs", "²"], r"argument --epochs: expected a whole number, not '²'"),
    ("num-arabic-seed", [*STITCH, "--seed", "٣"], r"argument --seed: expected a whole number, not '٣'"),
    ("num-arabic-lr", [*STITCH, "--lr", "٣"], r"argument --lr: expected a number such as 0\.01 or 1e-3, not '٣'"),
    ("num-underscore-lr", [*SWEEP, "--lr", "1_0"], r"argument --lr: expected a number .*not '1_0'"),
    ("num-arabic-zoo-seed", [*ZOO, "--seed", "٣"], r"argument --seed: expected a whole number, not '٣'"),
    ("num-superscript-limit", ["runs", "list", "--limit", "²"], r"argument --limit: expected a whole number, not '²'"),
    ("num-arabic-port", ["app", "--print-only", "--port", "٣"], r"argument --port: expected a whole number, not '٣'"),
    ("num-arabic-threads", [*STITCH, "--threads", "٣"], r"argument --threads: expected a whole number, not '٣'"),
    ("num-arabic-gpus", [*MATRIX, "--gpus-per-task", "٣"], r"argument --gpus-per-task: expected a number"),
    ("num-superscript-split", ["merge", "--a", A, "--b", B, "--split", "h.²"],
     r"no residual cut 'h\.²': write a position in ASCII digits"),
    ("num-5000-digits", [*STITCH, "--seed", "9" * 5000], r"argument --seed: '9{37}\.\.\.' has more than 40 digits"),
    ("num-empty-rank", [*STITCH, "--adapter", "lowrank", "--rank", ""], r"argument --rank: expected a whole number, not ''"),
    ("num-timeout-nan", ["runs", "cancel", "FIRST_DONE", "--timeout", "nan"], r"argument --timeout: must be 0 to 86400 seconds, not nan"),
    ("num-timeout-inf", ["runs", "cancel", "FIRST_DONE", "--timeout", "1e400"], r"--timeout: must be 0 to 86400 seconds, not inf"),
    ("num-timeout-negative", ["runs", "cancel", "FIRST_DONE", "--timeout", "-1"], r"--timeout: must be 0 to 86400"),
    # -- issue 45: every count and size has an upper bound, checked before anything runs (in the spec: the app,
    # lessons and the API refuse the same)
    ("big-stitch-seeds", [*STITCH, "--seeds", "1000000000"], r"seeds must be at most 100 \(got 1000000000\); each seed trains the adapter again"),
    ("big-stitch-seed-2**63", [*STITCH, "--seed", "9223372036854775808"],
     r"seed must be a whole number 0 \.\. 2147483647 \(got 9223372036854775808\)"),
    ("big-stitch-split-seed", [*STITCH, "--split-seed", str(2**70)], r"split_seed \(--split-seed\) must be a whole number"),
    ("big-stitch-epochs", [*STITCH, "--epochs", str(2**70)], r"epochs must be at most 10000 \(got 1180591620717411303424\)"),
    ("big-stitch-batch", [*STITCH, "--batch-size", "9" * 30], r"batch_size \(--batch-size\) must be at most 65536"),
    ("big-stitch-max-train", [*STITCH, "--max-train", "9" * 30], r"max_train \(--max-train\) must be at most 1000000000 .*leave it out to use every image"),
    ("big-stitch-lr", [*STITCH, "--lr", "9" * 30], r"lr must be at most 10\.0 \(got 1e\+30\)"),
    ("big-stitch-weight-decay", [*STITCH, "--weight-decay", "1e9"], r"weight_decay \(--weight-decay\) must be at most 10"),
    ("big-stitch-rank", [*STITCH, "--adapter", "lowrank", "--rank", str(2**70)], r"rank must be at most 65536"),
    ("big-runs-limit", ["runs", "list", "--limit", "9" * 30], r"argument --limit: must be at most 1000000000, not 9{30}"),
    ("big-runs-limit-zero", ["runs", "list", "--limit", "0"], r"argument --limit: must be at least 1, not 0"),
    ("big-runs-limit-negative", ["runs", "list", "--limit", "-1"], r"argument --limit: must be at least 1, not -1"),
    ("big-threads", ["runs", "list", "--threads", "1000000000"], r"argument --threads: must be at most 1024"),
    ("big-threads-2**70", [*STITCH, "--threads", str(2**70)], r"argument --threads: must be at most 1024"),
    ("big-task-threads", [*MATRIX, "--task-threads", "9" * 30], r"argument --task-threads: must be at most 1024"),
    ("big-max-retries", [*MATRIX, "--max-retries", "1000000000"], r"argument --max-retries: must be at most 100"),
    ("big-max-retries-negative", [*MATRIX, "--max-retries", "-1"], r"argument --max-retries: must be at least 0"),
    ("big-matrix-seed", [*MATRIX, "--seed", str(2**70)], r"seed must be a whole number 0 \.\. 2147483647"),
    ("big-matrix-seed-negative", [*MATRIX, "--seed", "-1"], r"seed must be a whole number 0 \.\. 2147483647 \(got -1\)"),
    ("big-matrix-epochs", [*MATRIX, "--mode", "trained", "--epochs", "1000000000"], r"epochs must be at most 10000"),
    ("big-similarity-samples", [*SIMILARITY, "--max-samples", str(2**70)], r"max_samples \(--max-samples\) must be at most"),
    ("big-similarity-batch", [*SIMILARITY, "--batch-size", "1000000000"], r"batch_size \(--batch-size\) must be at most"),
    ("big-sweep-control-seeds", [*SWEEP, "--control-seeds", "1000000000"], r"control_seeds \(--control-seeds\) must be at most 10000"),
    ("big-sweep-draws", [*SWEEP, "--draws", "9" * 30], r"sharpness_draws \(--sharpness-draws\) must be at most 10000"),
    ("big-sweep-eps", [*SWEEP, "--eps", "1e9"], r"sharpness_eps \(--sharpness-eps\) must be at most 10"),
    ("big-sweep-seed-negative", [*SWEEP, "--seed", "-1"], r"seed must be a whole number 0 \.\. 2147483647 \(got -1\)"),
    ("big-sweep-model-seeds", ["sweep", "--preset", "connectivity", "--model-seeds", "9" * 30],
     r"model seeds must be 1 to 5"),
    ("big-assemble-epochs", ["assemble", "--a", A, "--b", B, "--epochs", "1000000000"], r"epochs must be at most 10000"),
    ("big-assemble-seed", ["assemble", "--a", A, "--b", B, "--seed", str(2**70)], r"seed must be a whole number"),
    ("big-merge-steps", ["merge", "--a", A, "--b", B, "--steps", str(2**70)], r"steps must be at most 10000000"),
    ("big-merge-windows", ["merge", "--a", A, "--b", B, "--eval-windows", "1000000000"],
     r"eval_windows \(--eval-windows\) must be at most 10000"),
    ("big-merge-tokens", ["merge", "--a", A, "--b", B, "--sample-tokens", "9" * 30], r"sample_tokens \(--sample-tokens\) must be at most 100000"),
    ("big-merge-seed-negative", ["merge", "--a", A, "--b", B, "--seed", "-1"], r"seed must be a whole number 0 \.\. "),
    ("big-merge-tol", ["merge", "--a", A, "--b", B, "--tol", "1e9"], r"tol must be at most 1 "),
    ("big-merge-patience", ["merge", "--a", A, "--b", B, "--patience", "1000000000"], r"patience must be at most 10000"),
    ("big-merge-hidden", ["merge", "--a", A, "--b", B, "--adapter", "mlp", "--hidden", str(2**70)],
     r"mlp_hidden \(--mlp-hidden\) must be at most 65536"),
    ("big-app-port", ["app", "--print-only", "--port", "70000"], r"--port is 1 to 65535, not 70000"),
    # -- issue 45: an empty value is refused, not read as the default
    ("empty-dataset", [*STITCH, "--dataset", ""], r"argument --dataset: is empty: give a value, or leave the flag out"),
    ("empty-head-cut", [*STITCH, "--head-cut", ""], r"argument --head-cut: is empty"),
    ("empty-device", [*STITCH, "--device", ""], r"argument --device: unknown device ''; use auto, cpu, cuda"),
    ("empty-address", [*MATRIX, "--address", ""], r"argument --address: is empty"),
    ("empty-zoo-start", [*ZOO, "--start", ""], r"argument --start: empty model ref"),
    ("empty-assemble-senders", ["assemble", "--a", A, "--b", B, "--senders", ""], r"--senders names nothing"),
    ("empty-assemble-adapters", ["assemble", "--a", A, "--b", B, "--adapters", ""], r"--adapters names nothing"),
    ("empty-assemble-norm", ["assemble", "--a", A, "--b", B, "--norm", " , "], r"--norm names nothing"),
    ("empty-sweep-positions", [*SWEEP, "--positions", ""], r"--positions names nothing"),
    ("empty-sweep-metrics", [*SWEEP, "--metrics", ","], r"--metrics names nothing"),
    ("empty-sweep-preset", ["sweep", "--preset", ""], r"argument --preset: is empty"),
    ("empty-merge-text", ["merge", "--a", A, "--b", B, "--text", ""], r"argument --text: is empty"),
    ("empty-report-out", ["runs", "report", "FIRST_DONE", "--out", ""], r"argument --out: is empty: name the file"),
    ("empty-app-key", ["app", "--print-only", "--class", "--key", ""], r"argument --key: use 1 to 200 letters"),
    ("empty-app-base-url", ["app", "--print-only", "--base-url", ""], r"argument --base-url: is empty"),
    # -- issue 45: a flag the run would ignore is refused, not silently dropped
    ("unused-merge-end", ["merge", "--a", A, "--b", B, "--end", "3"], r"--end means nothing here: it is used with --split"),
    ("unused-merge-hidden", ["merge", "--a", A, "--b", B, "--hidden", "-1"], r"--hidden is the width of the mlp adapter's branch: use it with --adapter mlp"),
    ("unused-merge-cut-b", ["merge", "--a", A, "--b", B, "--split", "1", "--cut-b", "2"], r"--cut-b means nothing here: it is used with --mode stitch"),
    ("unused-merge-heatmap", ["merge", "--a", A, "--b", B, "--split", "1", "--heatmap"], r"--heatmap means nothing here"),
    ("unused-sweep-model-seeds", [*SWEEP, "--model-seeds", "-1"], r"--model-seeds trains a preset's models .*--preset"),
    # -- issue 45: what is echoed back is one line with every control character escaped (item 7)
    ("esc-ref", [*STITCH[:1], "--a", "zoo:\x1b[2Jx", *STITCH[3:]], r"zoo:\\x1b\[2Jx"),
    ("esc-cut-newline", [*STITCH[:5], "--cut-a", "blok\nfake line", "--cut-b", "block2"], r"no cut 'blok\\nfake line'"),
    ("esc-run-id", ["runs", "show", "x\x1b]0;pwned\x07"], r"no run 'x\\x1b\]0;pwned\\x07'"),
    ("esc-kind", ["runs", "list", "--kind", "\x1b[31mred"], r"unknown kind '\\x1b\[31mred'"),
    ("esc-device-bidi", [*STITCH, "--device", "cpu\u202e"], r"unknown device 'cpu\\u202e'"),
    ("esc-out-name", ["runs", "report", "FIRST_DONE", "--out", "r\x1b[2J.html"], r"has control characters: name a plain"),
    ("esc-preset", ["sweep", "--preset", "x\r\x1b[2K"], r"unknown preset 'x\\r\\x1b\[2K'"),
    ("esc-app-address", ["app", "--print-only", "--address", "\x1b[31mX\nY"], r"argument --address: expected a host name"),
    ("esc-app-key", ["app", "--print-only", "--class", "--key", "a b"], r"argument --key: use 1 to 200 letters"),
    ("esc-app-base-url", ["app", "--print-only", "--base-url", "http://x\x1b[2J"], r"--base-url starts with http:// or https:// and holds no spaces"),
    # -- issue 45: FIFOs, device nodes and links where a file is read or written (<fifo>, <link> ...: the `paths`
    # fixture); never opened, so never read forever, and /dev/null is still a device afterwards
    ("path-report-out-fifo", ["runs", "report", "FIRST_DONE", "--out", "<fifo>"], r"--out .*fifo is a FIFO, not a file"),
    ("path-report-out-link", ["runs", "report", "FIRST_DONE", "--out", "<link>"], r"--out .*link\.html is a link, not a file"),
    ("path-report-out-devnull", ["runs", "report", "FIRST_DONE", "--out", "/dev/null"], r"--out /dev/null is a device"),
    ("path-export-out-fifo", ["runs", "export", "FIRST_DONE", "--out", "<fifo>"], r"--out .*fifo is a FIFO, not a file"),
    ("path-export-out-link", ["runs", "export", "FIRST_DONE", "--out", "<link>"], r"is a link, not a file"),
    ("path-export-out-devnull", ["runs", "export", "FIRST_DONE", "--out", "/dev/null"], r"--out /dev/null is a device"),
    ("path-lessons-report-fifo", ["lessons", "report", "<lesson>", "--out", "<fifo>"], r"--out .*fifo is a FIFO"),
    ("path-lessons-report-link", ["lessons", "report", "<lesson>", "--out", "<link>"], r"is a link, not a file"),
    ("path-lessons-report-devnull", ["lessons", "report", "<lesson>", "--out", "/dev/null"], r"--out /dev/null is a device"),
    ("path-import-fifo", ["runs", "import", "<fifo>"], r"bundle .*fifo is a FIFO, not a file: give the path of a \.zip"),
    ("path-import-dev-zero", ["runs", "import", "/dev/zero"], r"bundle /dev/zero is a device, not a file"),
    ("path-import-link-to-fifo", ["runs", "import", "<fifo-link>"], r"bundle .* is a FIFO, not a file"),
    ("path-import-folder", ["runs", "import", "<dir>"], r"bundle .* is a folder, not a file"),
    ("path-checkpoint-fifo", ["cuts", "file:<fifo>.pt?arch=zoo:cnn"], r"checkpoint .*fifo\.pt is a FIFO, not a file"),
    ("path-checkpoint-dev-zero-link", ["cuts", "file:<zero-link>"], r"checkpoint .*zero\.pt is a device, not a file"),
    ("path-checkpoint-dev-zero", [*STITCH[:1], "--a", "file:/dev/zero", *STITCH[3:]], r"checkpoint /dev/zero is a device"),
    ("path-start-fifo", [*ZOO, "--start", "file:<fifo>.pt"], r"argument --start: checkpoint .* is a FIFO"),
    ("path-text-fifo", ["merge", "--a", A, "--b", B, "--text", "file:<fifo>"], r"argument --text: text file .* is a FIFO"),
    ("path-text-dev-zero", ["merge", "--a", A, "--b", B, "--text", "file:/dev/zero"], r"text file /dev/zero is a device"),
    ("path-corpus-fifo", [*ZOO, "--arch", "gpt", "--dataset", "file:<fifo>"], r"argument --dataset: text file .* is a FIFO"),
    ("json-nested-deep", [*ZOO, "--arch-kwargs", "[" * 100_000], r"argument --arch-kwargs: not JSON \(nested too deep\)"),
]
# fmt: on


@pytest.fixture(scope="module")
def store(trained_store, tmp_path_factory) -> Store:
    """A copy of the session store (two trained digit CNNs) that only this module touches."""
    src, _ = trained_store
    root = tmp_path_factory.mktemp("bad-inputs") / "store"
    copy_store(src.root, root)
    opened = Store(root)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    """Image folders: one class only, train/ and test/ without class folders, and none at all."""
    base = tmp_path_factory.mktemp("folders")
    for split in ("train", "test"):
        (base / "one" / split / "cat").mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (200, 10 * i, 10)).save(base / "one" / split / "cat" / f"{i}.png")
        (base / "empty" / split).mkdir(parents=True)
    return {"one": str(base / "one"), "empty": str(base / "empty"), "missing": str(base / "missing")}


@pytest.fixture(scope="module")
def paths(tmp_path_factory, trained_store) -> dict[str, str]:
    """What may not be read or written as a file: a FIFO (a read waits forever), links (to a FIFO, to /dev/zero,
    and one planted where --out points), a folder; and a lesson file whose one step the store has computed."""
    base = tmp_path_factory.mktemp("paths")
    os.mkfifo(base / "fifo")
    os.mkfifo(base / "fifo.pt")
    (base / "target.html").write_text("the link's target, unchanged")
    os.symlink(base / "target.html", base / "link.html")
    os.symlink(base / "fifo", base / "fifo-link.zip")
    os.symlink("/dev/zero", base / "zero.pt")
    (base / "folder.zip").mkdir()
    lesson = {"name": "out-paths", "title": "Out paths", "summary": "", "models": {},
              "steps": [{"title": "Train A", "text": "", "kind": "zoo", "spec": {"seed": 0}}]}
    (base / "out-paths.json").write_text(json.dumps(lesson))
    return {"<fifo-link>": str(base / "fifo-link.zip"), "<zero-link>": str(base / "zero.pt"),
            "<fifo>": str(base / "fifo"), "<link>": str(base / "link.html"), "<dir>": str(base / "folder.zip"),
            "<lesson>": str(base / "out-paths.json")}  # fmt: skip


def rows(store: Store) -> list[tuple[str, str]]:
    return sorted((r.id, r.status) for r in store.list_runs(limit=10_000))


def run_cli(argv: list[str], store: Store, capsys) -> tuple[int, str, str]:
    """``main(argv)`` in-process over ``store``: (exit code, stdout, stderr)."""
    return run_store_cli(argv, store.root, capsys)


def assert_refused(code: int, out: str, err: str, fix: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, err)
    assert "Traceback" not in err and out == "", err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert lines[0].isprintable(), f"{lines[0]!r} holds a control character"  # ESC, \r, U+202E ... escaped
    assert re.search(fix, lines[0]), f"{lines[0]!r} does not say {fix!r}"


PARAMS = [c if hasattr(c, "marks") else pytest.param(*c) for c in CASES]  # pytest.param(...) keeps its marks
NAMES = [p.values[0] for p in PARAMS]


@pytest.mark.parametrize(("name", "argv", "fix"), PARAMS, ids=NAMES)
def test_a_bad_input_is_one_line_naming_the_fix_and_stores_nothing(store, folders, paths, capsys, monkeypatch, name,
                                                                    argv, fix):  # fmt: skip
    monkeypatch.setenv("STITCHLAB_DATA", folders["missing"])  # no dataset files (mnist) here
    argv = [a.format(**folders) if "{" in a and "imagefolder:" in a else a for a in argv]
    for token, path in paths.items():
        argv = [a.replace(token, path) for a in argv]
    argv = [store.list_runs(status="done")[0].id if a == "FIRST_DONE" else a for a in argv]
    before = rows(store)
    code, out, err = run_cli(argv, store, capsys)
    assert_refused(code, out, err, fix)
    assert rows(store) == before, "a refused input must not add or change a row"
    assert Path("/dev/null").is_char_device() and Path(paths["<fifo>"]).is_fifo() and Path(paths["<link>"]).is_symlink()
    assert Path(paths["<link>"]).read_text() == "the link's target, unchanged"


def test_the_table_is_large_and_covers_every_group():
    assert len(NAMES) == len(set(NAMES)) and len(NAMES) >= 40
    for group in ("ref-", "cut-", "stitch-lr", "zoo-", "choice-", "device-", "folder-", "json-", "runs-", "num-",
                  "big-", "empty-", "unused-", "esc-", "path-"):  # fmt: skip
        assert any(n.startswith(group) for n in NAMES), group


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["cuts", "zoo:cnn-digits-s0?init=random&seed=abc"], r"bad seed 'abc'"),
        ([*ZOO, "--lr", "-1"], r"lr must be > 0"),
        ([*STITCH, "--optimizer", "adam"], r"invalid choice: 'adam'"),
    ],
)
def test_a_real_process_prints_one_line_too(store, argv, fix):
    """The same refusal from ``python -m stitchcore``: logging, argparse and the interpreter add nothing."""
    env = {**os.environ, "STITCHLAB_STORE": str(store.root)}
    before = rows(store)
    p = subprocess.run([sys.executable, "-m", "stitchcore", *argv], capture_output=True, text=True, env=env,
                       timeout=120, cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    assert_refused(p.returncode, p.stdout, p.stderr, fix)
    assert rows(store) == before


def test_output_piped_to_a_reader_that_stops_ends_quietly(tmp_path):
    """`... | head`: the reader closes the pipe before the CLI writes; no traceback, the pipe's exit code."""
    proc = subprocess.Popen([sys.executable, "-m", "stitchcore", "runs", "list", "--store", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=Path(__file__).parents[1])  # fmt: skip
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_missing_or_empty_text_file_is_refused_before_any_run_is_stored(tmp_path, capsys):
    """LM runs read --text when they start; a file that cannot be read is refused before the row exists."""
    copy_store(Path(__file__).parent / "fixtures" / "store_v1", tmp_path / "store")  # its two char-GPTs
    (tmp_path / "empty.txt").write_text("")
    lm = ["merge", "--a", "zoo:gpt-pydoc-s0-adamw-0a2972", "--b", "zoo:gpt-pydoc-s1-adamw-0b2075"]
    with Store(tmp_path / "store") as store:
        before = rows(store)
        for text, fix in ((f"file:{tmp_path}/missing.txt", r"text file .*missing\.txt not found"),
                          (f"file:{tmp_path}/empty.txt", r"empty\.txt is empty; give a file with some text")):
            assert_refused(*run_cli([*lm, "--text", text], store, capsys), fix)
            assert rows(store) == before  # no failed row left behind
