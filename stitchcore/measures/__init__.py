"""Measures of trained models: what they represent, how simple they are, what they do.

- :mod:`stitchcore.measures.similarity`: representation similarity between layers of two
  models (CKA linear / RBF / minibatch, Procrustes), on the measure registry
  (``register_measure``, ``list_measures``, ``get_measure``).
- :mod:`stitchcore.measures.representational`: RSA, SVCCA, held-out ridge R² and k-NN Jaccard,
  registered on the same table.
- :mod:`stitchcore.measures.simplicity`: gradient norm, loss sharpness, gzip size of the weights.
- :mod:`stitchcore.measures.traits`: trait metrics (``class_acc:3``, ``confusion:3->8``,
  ``blackout:left`` ...) parsed from one canonical string.
- :mod:`stitchcore.measures.meaning`: what each measure's and metric's number means (``explain``, one line;
  ``colorbar_title``, a heat map's colour bar).

Import the module you need.  The package imports only :mod:`~stitchcore.measures.representational` on its
own, so that its measures are registered whichever module asks the registry (``list_measures()`` lists
all seven).
"""

from stitchcore.measures import representational  # noqa: F401  (registers rsa, svcca, ridge-r2, knn-jaccard)
