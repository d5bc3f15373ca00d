"""The job system: background runs for the app (and the CLI's ``--wait``), above the experiments.

``runner`` (:class:`JobRunner`: queues per device, worker threads, submit / poll / cancel),
``local_ray`` (:class:`LocalRay`: the Ray its jobs start on this machine, kept while the setting uses it),
``snapshot`` (:class:`JobSnapshot`: what a page sees of a job, its states and time left) and
``worker`` (the worker process a job runs in when the app isolates jobs from its server).
"""

from __future__ import annotations

from stitchcore.jobs.local_ray import LocalRay
from stitchcore.jobs.runner import JobRunner
from stitchcore.jobs.snapshot import FINAL_STATES, JOB_STATES, JobSnapshot

__all__ = ["FINAL_STATES", "JOB_STATES", "JobRunner", "JobSnapshot", "LocalRay"]
