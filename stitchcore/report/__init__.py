"""Reports: a stored run's figures, headline numbers and facts, and one offline HTML file for several runs.

``figures`` (each kind's figures with their CSV: the app's run views draw the same), ``summary`` (a run
in words: label, headline, facts), ``html`` (``runs report`` and the app's "Download report").

>>> from stitchcore.report import run_figures, write_report
"""

from stitchcore.report.figures import RunFigure, run_figures
from stitchcore.report.html import ReportInfo, report_html, write_report
from stitchcore.report.summary import headline, run_label, summary_row

__all__ = ["RunFigure", "run_figures", "ReportInfo", "report_html", "write_report", "headline", "run_label",
           "summary_row"]
