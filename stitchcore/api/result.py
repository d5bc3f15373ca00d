"""What a notebook gets back from a run: :class:`Result` (one stored run: its numbers, figures, table and link) and
:class:`Runs` (a list of them, as the app's Results page lists them)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from stitchcore.errors import StitchError

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from stitchcore.report.figures import RunFigure
    from stitchcore.store.records import RunRecord
    from stitchcore.store.results import Store

__all__ = ["DEFAULT_BASE_URL", "Result", "Runs"]

DEFAULT_BASE_URL = "http://localhost:8501"  # `stitchlab app` on this machine


@dataclass(frozen=True)
class Result:
    """One stored run, as the app shows it: ``summary`` (the stored dict), ``figure()`` (the app's plotly figure),
    ``to_pandas()`` (that figure's numbers), ``link()`` (where the app opens it), ``spec`` (what made it)."""

    record: RunRecord
    store: Store
    cached: bool = False  # found in the store, not computed by this call

    @property
    def run_id(self) -> str:
        """The run id: the same spec gives the same id in the app, the CLI and here."""
        return self.record.id

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def summary(self) -> dict[str, Any]:
        """The stored result (what ``--json`` prints after the run id)."""
        return self.record.summary

    @property
    def spec(self) -> Any:
        """The spec object that made the run (every field, today's and stored ones' readings alike)."""
        from stitchcore.experiments import spec_from_record

        return spec_from_record(self.record)

    @property
    def ref(self) -> str:
        """A trained zoo model's ref (``zoo:cnn-digits-s0``), to pass to a stitch; StitchError for other kinds."""
        if self.kind != "zoo" or "ref" not in self.summary:
            raise StitchError(f"run {self.run_id} is a {self.kind} run, not a trained zoo model: it has no ref")
        return self.summary["ref"]

    def figures(self) -> list[RunFigure]:
        """Every figure the app's view of this kind draws (name, title, plotly figure, its numbers as CSV)."""
        from stitchcore.report.figures import run_figures

        return run_figures(self.record, self.store)

    def _figure(self, name: str | None) -> RunFigure:
        figs = self.figures()
        if not figs:
            raise StitchError(f"run {self.run_id} ({self.kind}, {self.status}) has no figure")
        if name is None:
            return figs[0]
        for fig in figs:
            if fig.name == name:
                return fig
        raise StitchError(f"run {self.run_id} has no figure {name!r}: it has {', '.join(f.name for f in figs)}")

    def figure(self, name: str | None = None) -> go.Figure:
        """The app's figure (the first of :meth:`figures`, or the one called ``name``)."""
        return self._figure(name).figure

    def to_pandas(self, name: str | None = None) -> pd.DataFrame:
        """The numbers of :meth:`figure` as a table: a heat map's rows by its columns (indexed by the rows; the
        figure's ``csv`` adds each cell's 95% interval), any other plot's traces as ``trace, x, value`` rows (with
        their intervals' ends); a run without figures, its Results-table row."""
        import pandas as pd

        if not self.figures() and name is None:
            return Runs([self]).to_pandas()
        fig = self._figure(name)
        import plotly.graph_objects as go

        if any(isinstance(t, go.Heatmap) for t in fig.figure.data):  # the values' block; its intervals follow it
            return pd.read_csv(io.StringIO(fig.csv.split("\n\n", 1)[0]), index_col=0)
        return pd.read_csv(io.StringIO(fig.csv))

    def link(self, base_url: str = DEFAULT_BASE_URL) -> str:
        """The address that opens this run in the app (any kind opens on the Results page by its id)."""
        return f"{base_url.rstrip('/')}/results?{urlencode({'run': self.run_id})}"

    def log_to(self, target: str) -> str:
        """Log this run to an experiment tracker, once (``mlflow:DIR``, ``mlflow:http://...``, ``tensorboard:DIR``):
        the spec as parameters, its curves as step metrics, its numbers with intervals, its report and figures as
        artifacts; returns where it went."""
        from stitchcore.report.trackers import log_run

        return log_run(self.record, self.store, target)

    def save_adapter(self, folder: str | Path) -> Path:
        """Save a finished stitch run's adapter to ``folder`` as a Hub artifact: weights, config (spec, refs, cuts,
        metrics with intervals, run id) and a model card (``stitchcore.load_adapter(folder)`` reads it back)."""
        from stitchcore.api.adapters import save_adapter

        return save_adapter(self, folder)

    def python(self) -> str:
        """The Python call that makes this run again (the same run id): what the app's "Copy as Python" gives."""
        from stitchcore.api.reproduce import python_call

        return python_call(self.kind, self.spec)

    def __repr__(self) -> str:
        how = ", cached" if self.cached else ""
        return f"<Result {self.kind} {self.run_id} {self.status}{how}: {self.record.label}>"


class Runs(list):
    """Stored runs (a list of :class:`Result`), newest first; ``to_pandas()`` is the app's Results table."""

    def to_pandas(self) -> pd.DataFrame:
        """One row per run with its kind, status, label, numbers (with their 95% intervals) and times."""
        from stitchcore.report.runs_table import runs_frame

        return runs_frame([r.record for r in self])

    def __repr__(self) -> str:
        return f"<Runs: {len(self)}>" if len(self) > 5 else f"Runs({list.__repr__(self)})"
