"""The results store: runs, their metric series and artifacts (:mod:`.results`), the canonical
JSON that run ids hash (:mod:`.canonical_json`), uploaded checkpoints (:mod:`.uploads`), and bundles
(:mod:`.bundle`: runs carried between stores as one checked zip).

>>> run_id_for("zoo", {"arch": "cnn"}) == run_id_for("zoo", {"arch": "cnn"})
True
"""

from __future__ import annotations

from stitchcore.store.bundle import BundleInfo, ImportReport, export_bundle, import_bundle, read_manifest
from stitchcore.store.records import SCHEMA_VERSION, RunRecord, resolve_store_dir, run_id_for
from stitchcore.store.results import Store

__all__ = [
    "SCHEMA_VERSION",
    "BundleInfo",
    "ImportReport",
    "RunRecord",
    "Store",
    "export_bundle",
    "import_bundle",
    "read_manifest",
    "resolve_store_dir",
    "run_id_for",
]
