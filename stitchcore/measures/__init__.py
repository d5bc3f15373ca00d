"""Measures of trained models: what they represent, how simple they are, what they do.

- :mod:`stitchcore.measures.similarity`: representation similarity between layers of two
  models (CKA linear / RBF / minibatch, Procrustes), on the measure registry
  (``register_measure``, ``list_measures``, ``get_measure``).
- :mod:`stitchcore.measures.simplicity`: gradient norm, loss sharpness, gzip size of the weights.
- :mod:`stitchcore.measures.traits`: trait metrics (``class_acc:3``, ``confusion:3->8``,
  ``blackout:left`` ...) parsed from one canonical string.

Import the module you need; this package imports nothing on its own.
"""
