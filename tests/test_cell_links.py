"""A matrix cell and an assembled network open on the Stitch page as their own stitch: the link the view writes
(``params.link_params`` of ``MatrixSpec.cell_stitch`` / ``AssembleSpec.cell_stitch``) reads back, through the
Stitch form's rule (fields left out at today's defaults), to that very spec, its run id included."""

from __future__ import annotations

import stitchcore.experiments  # noqa: F401 - registers the kinds
from stitchcore.experiments.assemble import AssembleSpec
from stitchcore.experiments.matrix import MatrixSpec, preset_fields
from stitchcore.experiments.stitch_fields import ADAPTER_KEYS
from stitchcore.params import build_spec, link_params, read_link, spec_fields
from stitchcore.store.records import run_id_for

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"


def _through_link(spec) -> object:
    params = link_params("stitch", spec, explicit=ADAPTER_KEYS)
    values, notes = read_link("stitch", params)
    assert not notes
    assert {"init", "kind", "resample", "norm"} <= set(params)  # the cell's adapter says itself
    return build_spec("stitch", spec_fields("stitch", values))


def test_a_closed_form_cell_opens_as_its_fit_on_every_train_image():
    cell = MatrixSpec(A, B, dataset="digits|drop3", seeds=1).cell_stitch("fc1", "fc2")
    assert (cell.adapter.init, cell.val_fraction, cell.dataset) == ("lstsq", 0.0, "digits|drop3")
    again = _through_link(cell)
    assert run_id_for("stitch", again.to_dict()) == run_id_for("stitch", cell.to_dict())


def test_a_trained_cell_of_the_papers_recipe_keeps_its_adapter_and_training():
    matrix = MatrixSpec(A, B, epochs=2, lr=0.005, seeds=3, **preset_fields("hernandez"))
    cell = matrix.cell_stitch("block1", "block2")
    assert (cell.adapter.resample, cell.adapter.init, cell.epochs, cell.lr, cell.seeds) == ("strided", "random", 2,
                                                                                           0.005, 3)  # fmt: skip
    assert run_id_for("stitch", _through_link(cell).to_dict()) == run_id_for("stitch", cell.to_dict())


def test_an_assembled_network_opens_as_the_stitch_the_assembly_trained():
    spec = AssembleSpec(A, B, epochs=3)
    cell = spec.cell_stitch({"sender": "block1", "receiver": "block2", "adapter": "conv3x3_relu", "norm": "both",
                             "resample": "bilinear"})  # fmt: skip
    assert (cell.adapter.kind, cell.adapter.init, cell.adapter.rescale, cell.epochs) == ("conv3x3_relu", "random",
                                                                                        "chained", 3)  # fmt: skip
    assert run_id_for("stitch", _through_link(cell).to_dict()) == run_id_for("stitch", cell.to_dict())
