"""Plotly figure builders: plain data as the store holds it in, a Figure out.

``runs`` (curves, bars, cut diagram, penalty over depth), ``heatmap`` (layer-pair grids),
``traits`` (sweep positions), ``lm`` (language-model penalties); ``_style`` is the shared look.
"""
