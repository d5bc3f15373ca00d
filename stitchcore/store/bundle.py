"""Bundles: runs carried between stores as one zip, checked whole before anything is written.

A bundle holds ``manifest.json`` (bundle schema, StitchLab version, creation time, and for each
run its row, its spec and the sha256 and size of each member) and the members:
``runs/<id>/series.json`` (its metric curves) and ``runs/<id>/blobs/<name>`` (its artifacts).
``with_models=True`` adds the zoo runs (checkpoints) that the runs' specs name as ``zoo:NAME``,
so a bundle reproduces on a machine that never trained them.

Import refuses, with one line and nothing written: a member path that leaves the store, a symlink
or special member, a size above the declared one or the caps (zip bombs), a sha256 mismatch, a
missing or malformed manifest, an unknown schema, a damaged, non-zip or empty file.  A run its kind names
(a zoo model, ``zoo:cnn-digits-s0``) is refused when its spec cannot be read to name it (a seed of 2**70, a
malformed ``data_id``), when its summary claims another name (:mod:`stitchcore.store.claims`), and when its
name is already held by another run, in the store or in the bundle: a bundle never takes a name over.

Every value a reader formats is checked by type and range before anything is written (a genuine export
always passes; one bad value refuses the bundle whole): ``NaN``, ``Infinity`` and numbers beyond a float
(``1e999``) are refused where the JSON is parsed (``runs export`` writes none: a missing number is ``null``);
a row's id is 16 hex digits, its kind a short lowercase word, its status a finished one, its label and error
bounded strings, its times finite and between :data:`EARLIEST` and now (plus :data:`CLOCK_SKEW`); a series'
name is a bounded string, each step a whole number in ``0 <= step < 2**53``, each value a number or ``null``;
a summary's headline numbers (:data:`HEADLINE_NUMBERS`) are finite numbers, its other numbers
(:data:`NUMBERS`, :data:`NUMBER_TABLES`) numbers or ``null``, its words (:data:`WORDS`) bounded strings.

Where each part lives (this module re-exports their public names): :mod:`.bundle_export` writes a bundle
(:func:`export_bundle`, :func:`resolve_runs`), :mod:`.bundle_check` reads and checks an untrusted one
(:func:`read_manifest`, :func:`member_problem`, :class:`Limits`), :mod:`.bundle_import` writes a checked one
into a store (:func:`import_bundle`), and :mod:`.bundle_rows` holds the rules for each row's values
(:func:`summary_problem`).

>>> summary_problem({"accuracy": 0.91, "base": {"a": 0.95, "b": 0.93}, "ref": "zoo:x"}) is None
True
>>> summary_problem({"accuracy": "ninety"})
"summary field 'accuracy' is 'ninety', not a finite number"

>>> member_problem("runs/ab12/blobs/model.safetensors") is None
True
>>> member_problem("../../etc/passwd")
"member path '../../etc/passwd' escapes the store"
"""

from __future__ import annotations

from stitchcore.store.bundle_check import BUNDLE_SCHEMA, Limits, member_problem, read_manifest
from stitchcore.store.bundle_export import BundleInfo, export_bundle, resolve_runs
from stitchcore.store.bundle_import import ImportReport, import_bundle
from stitchcore.store.bundle_rows import summary_problem

__all__ = [
    "BUNDLE_SCHEMA",
    "BundleInfo",
    "ImportReport",
    "Limits",
    "export_bundle",
    "import_bundle",
    "member_problem",
    "read_manifest",
    "resolve_runs",
    "summary_problem",
]
