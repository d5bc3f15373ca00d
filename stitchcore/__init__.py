"""stitchcore: the model-stitching library behind StitchLab (UI-free)."""

__version__ = "0.1.0"
