"""Plotly figure builders: plain data as the store holds it in, a Figure out.

``runs`` (curves, bars, cut diagram, penalty over depth), ``heatmap`` (layer-pair grids and their
CSV), ``traits`` (sweep positions), ``lm`` (language-model penalties), ``penalty`` (which way is
worse and in what unit: stored fractions shown times 100, higher = worse, with one colour scale and
one wording for every penalty figure and page); ``_style`` is the shared look.

>>> from stitchcore.plots import penalty_words
>>> penalty_words(higher_is_worse=True)
'higher = worse'
"""

from stitchcore.plots.penalty import penalty_colorscale, penalty_label, penalty_words

__all__ = ["penalty_colorscale", "penalty_label", "penalty_words"]
