"""The results store: runs, their metric series and artifacts (:mod:`.results`), the canonical
JSON that run ids hash (:mod:`.canonical_json`), and uploaded checkpoints (:mod:`.uploads`).

>>> run_id_for("zoo", {"arch": "cnn"}) == run_id_for("zoo", {"arch": "cnn"})
True
"""

from __future__ import annotations

from stitchcore.store.results import SCHEMA_VERSION, RunRecord, Store, resolve_store_dir, run_id_for

__all__ = ["SCHEMA_VERSION", "RunRecord", "Store", "resolve_store_dir", "run_id_for"]
