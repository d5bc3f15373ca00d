"""The job system: background runs for the app (and the CLI's ``--wait``), above the experiments.

``runner`` (:class:`JobRunner`: queues per device, worker threads, submit / poll / cancel),
``snapshot`` (:class:`JobSnapshot`: what a page sees of a job, its states and time left) and
``worker`` (the worker process a job runs in when the app isolates jobs from its server).
"""

from __future__ import annotations

from stitchcore.jobs.runner import JobRunner, LocalRay
from stitchcore.jobs.snapshot import FINAL_STATES, JOB_STATES, JobSnapshot

__all__ = ["FINAL_STATES", "JOB_STATES", "JobRunner", "JobSnapshot", "LocalRay"]
