"""The Models page, driven through the real app (app.py -> views/models.py) with Streamlit's AppTest.

AppTest cannot run ``run_every`` timers: a test submits, waits on the runner,
then runs the script again and reads the rendered elements.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the pages import ui from the repo root
    sys.path.insert(0, str(ROOT))

import ui
from stitchcore.models.archs import create_arch
from stitchcore.models.info import weights_fingerprint
from stitchcore.models.sources import load_model

TRAIN = "zoo_train"  # the Train button (a launch button, with its estimate above)


@pytest.fixture
def open_page(tmp_path, monkeypatch):
    """``open_page(store_dir=None, **query)`` -> an AppTest on the Models page, with a fresh runner."""
    monkeypatch.delenv("STITCHLAB_VIEWER", raising=False)
    started = []

    def _open(store_dir: Path | None = None, **query: str) -> AppTest:
        monkeypatch.setenv("STITCHLAB_STORE", str(store_dir or tmp_path / "store"))
        st.cache_resource.clear()
        started.append(True)
        if query:  # a permalink: open the page file itself with its URL query
            at = AppTest.from_file(str(ROOT / "views" / "models.py"), default_timeout=60)
            at.query_params.update(query)
            return at.run()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
        return at.switch_page("views/models.py").run()

    yield _open
    if started:
        ui.get_runner().shutdown()
        ui.get_store().close()
    st.cache_resource.clear()


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def cut_names(at: AppTest) -> list[str]:
    table = next(d.value for d in at.dataframe if "layout" in d.value.columns)
    return list(table["name"])


def inspect(at: AppTest, ref: str) -> AppTest:
    at.text_input(key="ref_text").input(ref)
    return at.button(key="inspect").click().run()


def upload(at: AppTest, name: str, data: bytes, arch: str = "", options: str = "") -> AppTest:
    at.file_uploader(key="upload").upload(name, data)
    at.text_input(key="upload_arch").input(arch)
    at.text_input(key="upload_opts").input(options)
    at.run()  # the button is enabled once a file is there
    return at.button(key="upload_go").click().run()


def state_dict_bytes(model: torch.nn.Module) -> bytes:
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getvalue()


def test_train_via_form_shows_finished_card_then_cache_hit(open_page):
    at = open_page()
    assert not at.exception and not errors(at)
    at.button(key=TRAIN).click().run()
    run_id = at.query_params["run"][0] if isinstance(at.query_params["run"], list) else at.query_params["run"]
    snap = ui.get_runner().wait(run_id, timeout=120)
    assert snap.state == "done", snap.error
    at.run()
    assert not at.exception
    assert any("zoo:cnn-digits-s0" in m.value for m in at.markdown)
    assert float(metric(at, "Test accuracy").rstrip("%")) > 80
    # the same recipe again: shown at once from the store, and offered in the inspect picker
    at.button(key=TRAIN).click().run()
    assert any("already trained" in s.value.lower() for s in at.success)
    assert "zoo:cnn-digits-s0" in at.selectbox(key="zoo_pick").options


def test_fine_tune_a_hub_model_from_the_form(open_page):
    at = open_page()
    at.text_input(key="zoo_start").input("timm:test_resnet?pretrained=false").run()
    assert any("add num_classes=10" in e for e in errors(at)) and at.button(key=TRAIN).disabled
    at.text_input(key="zoo_start").input("timm:test_resnet?pretrained=false&num_classes=10")
    at.number_input(key="zoo_image_size").set_value(16)
    at.number_input(key="zoo_epochs").set_value(1).run()
    assert not errors(at) and any("**timm:test_resnet**, the start's own" in c.value for c in at.caption)
    at.button(key=TRAIN).click().run()
    run_id = at.query_params["run"][0] if isinstance(at.query_params["run"], list) else at.query_params["run"]
    snap = ui.get_runner().wait(run_id, timeout=120)
    assert snap.state == "done", snap.error
    assert snap.summary["arch"] == "timm:test_resnet" and snap.summary["ref"].startswith("zoo:testresnet-digits-s0-")


def test_inspect_zoo_ref_lists_cuts_and_base_accuracy(open_page, trained_store):
    store, refs = trained_store
    at = open_page(store.root)
    at.selectbox(key="zoo_pick").select(refs[0]).run()  # the picker fills the text box
    assert at.text_input(key="ref_text").value == refs[0]
    at.button(key="inspect").click().run()
    assert not at.exception and not errors(at)
    assert cut_names(at) == ["block1", "block2", "flatten", "fc1", "fc2"]
    assert metric(at, "Base accuracy").endswith("%")
    assert at.query_params["ref"] in (refs[0], [refs[0]])


def test_ref_permalink_reproduces_the_view(open_page, trained_store):
    store, refs = trained_store
    at = open_page(store.root, ref=refs[1])
    assert not at.exception and not errors(at)
    assert cut_names(at)[0] == "block1"
    assert at.text_input(key="ref_text").value == refs[1]


def weights_line(at: AppTest) -> str:
    lines = (line.rstrip() for m in at.markdown for line in m.value.splitlines())
    return next(line for line in lines if line.startswith("**Weights**"))


def test_inspect_timm_model(open_page):
    at = inspect(open_page(), "timm:resnet18?pretrained=false")
    assert not at.exception and not errors(at)
    assert "layer4.1" in cut_names(at)
    assert metric(at, "Input shape") == "3 × 224 × 224"
    # the weights are the seed-0 draw, and the page says so with their fingerprint
    fingerprint = weights_fingerprint(load_model("timm:resnet18?pretrained=false").model)
    assert weights_line(at) == f"**Weights** random init, seed 0 · fingerprint `{fingerprint}`"
    at = inspect(at, "timm:resnet18?pretrained=false&seed=1")
    assert weights_line(at).startswith("**Weights** random init, seed 1 · fingerprint `")
    assert fingerprint not in weights_line(at)


def test_inspect_trained_and_random_zoo_weights(open_page, trained_store):
    store, refs = trained_store
    at = inspect(open_page(store.root), refs[0])
    trained = weights_fingerprint(load_model(refs[0], store=store).model)
    assert weights_line(at) == f"**Weights** fingerprint `{trained}`"
    at = inspect(at, refs[0] + "?init=random&seed=2")
    assert not at.exception and not errors(at)
    assert weights_line(at).startswith("**Weights** random init, seed 2 · fingerprint `")
    assert trained not in weights_line(at)
    # a random twin is scored, not credited with the trained model's stored accuracy
    assert "stored" not in next(m.help for m in at.metric if m.label == "Base accuracy")


@pytest.mark.parametrize(
    ("ref", "fix"),
    [
        ("tim:resnet18", "did you mean timm:"),
        ("resnet18", "timm:resnet18"),
        ("zoo:cnn-digits-s7", "--seed 7"),
    ],
)
def test_invalid_ref_shows_the_fix_and_page_keeps_working(open_page, ref, fix):
    at = inspect(open_page(), ref)
    assert not at.exception
    assert len(errors(at)) == 1 and fix in errors(at)[0]
    assert "layer4.1" not in str([d.value for d in at.dataframe])
    assert at.button(key=TRAIN)  # the rest of the page still renders


def test_garbage_upload_is_an_error_not_a_crash(open_page):
    at = upload(open_page(), "garbage.pt", b"this is not a checkpoint", arch="zoo:cnn")
    assert not at.exception
    assert len(errors(at)) == 1 and "not a PyTorch checkpoint" in errors(at)[0]


def test_mismatched_state_dict_upload_names_the_mismatch(open_page):
    at = upload(open_page(), "mlp.pt", state_dict_bytes(create_arch("mlp")), arch="zoo:cnn")
    assert not at.exception
    assert len(errors(at)) == 1 and "does not fit zoo:cnn" in errors(at)[0]


def test_bad_options_json_is_an_error(open_page):
    at = upload(open_page(), "cnn.pt", state_dict_bytes(create_arch("cnn")), arch="zoo:cnn", options="{oops")
    assert len(errors(at)) == 1 and "valid JSON" in errors(at)[0]


def test_good_upload_becomes_a_file_ref(open_page, tmp_path):
    model = create_arch("cnn", channels=[8, 16], num_classes=3)
    at = upload(
        open_page(),
        "my cnn.pth",
        state_dict_bytes(model),
        arch="zoo:cnn",
        options='{"channels": [8, 16], "num_classes": 3}',
    )
    assert not at.exception and not errors(at)
    assert cut_names(at) == ["block1", "block2", "flatten", "fc1", "fc2"]
    ref = at.text_input(key="ref_text").value
    assert ref.startswith(f"file:{tmp_path / 'store' / 'uploads'}/") and "-my_cnn.pth?arch=zoo:cnn" in ref
    assert metric(at, "Classes") == "3"


def test_viewer_mode_disables_training(open_page, monkeypatch):
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = open_page()
    assert at.button(key=TRAIN).disabled
    assert any("Viewer mode" in c.value for c in at.caption)


def test_an_unexpected_error_is_one_line_and_a_logged_traceback(open_page, monkeypatch, caplog):
    at = inspect(open_page(), "tim:resnet18")  # a user error: its own message, nothing logged
    assert len(errors(at)) == 1 and not [r for r in caplog.records if r.name.startswith("ui.")]

    def broken(ref, store=None):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(ui.resources, "load_model", broken)  # a bug in a loader (ui.load_for_display calls it)
    at = inspect(at, "zoo:cnn-digits-s0")
    assert not at.exception
    assert errors(at) == [("loading zoo:cnn-digits-s0 failed: unexpected error: RuntimeError: boom "
                           "(details in the server log)")]  # fmt: skip
    logged = [r for r in caplog.records if r.name == "ui.errors"]  # show_error's log
    assert len(logged) == 1 and logged[0].exc_info[0] is RuntimeError
    assert at.button(key=TRAIN)  # the rest of the page still renders


def test_upload_form_prefills_the_zoo_inputs_and_scores_the_model(open_page, trained_store):
    store, refs = trained_store
    zoo = ui.resources.load_model(refs[0], store=store)
    at = open_page()
    at.file_uploader(key="upload").upload("digit-cnn.pt", state_dict_bytes(zoo.model))
    at.text_input(key="upload_arch").input("zoo:cnn")
    at.run()
    assert not at.exception and not errors(at)
    assert at.selectbox(key="upload_dataset").value == "digits"
    assert (at.text_input(key="upload_mean").value, at.text_input(key="upload_std").value) == (
        "0.30527535", "0.37584367"
    )
    assert at.text_input(key="upload_size").value == "8"
    assert any("zoo recipe" in c.value for c in at.caption)
    shown = at.code[0].value
    assert "?arch=zoo:cnn&dataset=digits&mean=0.30527535&size=8&std=0.37584367" in shown
    at.button(key="upload_go").click().run()
    assert not at.exception and not errors(at)
    assert at.text_input(key="ref_text").value == shown
    stored = store.lookup(zoo.meta["run_id"]).summary["accuracy"]
    assert metric(at, "Base accuracy") == f"{stored:.1%}"


def test_upload_form_edits_reach_the_ref(open_page, monkeypatch, tmp_path):
    monkeypatch.setenv("STITCHLAB_DATA", str(tmp_path / "no-data"))  # cifar10's files are not here
    at = open_page()
    at.file_uploader(key="upload").upload("cnn.pt", state_dict_bytes(create_arch("cnn", num_classes=3)))
    at.text_input(key="upload_arch").input("zoo:cnn")
    at.run()
    assert at.selectbox(key="upload_dataset").value == ""  # 3 classes: not digits, the dataset is unknown
    assert (at.text_input(key="upload_mean").value, at.text_input(key="upload_std").value) == ("0.0", "1.0")
    assert any("no dataset" in c.value for c in at.caption)
    at.selectbox(key="upload_dataset").select("digits").run()  # a zoo arch takes its dataset's mean/std
    assert at.text_input(key="upload_mean").value == "0.30527535"
    at.text_input(key="upload_mean").input("0.5").run()
    assert "?arch=zoo:cnn&dataset=digits&mean=0.5&size=8&std=0.37584367" in at.code[0].value
    at.selectbox(key="upload_dataset").select("cifar10").run()  # no files: mean/std are kept, and it says so
    assert at.text_input(key="upload_mean").value == "0.5" and not errors(at)
    assert "cifar10 not found" in at.warning[0].value and "Type its mean and std in" in at.warning[0].value
    at.selectbox(key="upload_dataset").select("digits").run()
    at.text_input(key="upload_std").input("abc").run()  # malformed: said at once, no ref
    assert len(errors(at)) == 1 and "std=abc must be positive numbers" in errors(at)[0] and not at.code
    at.text_input(key="upload_std").input("0.1,0.2").run()  # well formed, but the model has one channel
    assert not errors(at)
    at.button(key="upload_go").click().run()
    assert len(errors(at)) == 1 and "std=0.1,0.2 has 2 values but the model takes 1-channel" in errors(at)[0]


def test_viewer_mode_opens_only_models_in_the_store(open_page, monkeypatch, tmp_path, trained_store):
    """A viewer cannot read server files by path (file:/etc/passwd, a checkpoint outside the store, a hub
    model); zoo models and uploads under the store still open.  Without viewer mode the same file opens."""
    from tests.conftest import copy_store

    store, refs = trained_store
    copy_store(store.root, tmp_path / "store")
    outside = tmp_path / "elsewhere" / "cnn.pt"
    outside.parent.mkdir()
    outside.write_bytes(state_dict_bytes(create_arch("cnn")))
    inside = tmp_path / "store" / "uploads" / "0123456789abcdef-cnn.pt"
    inside.parent.mkdir(exist_ok=True)
    inside.write_bytes(outside.read_bytes())

    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = open_page(tmp_path / "store")
    climbing = f"file:{inside.parent}/../../elsewhere/cnn.pt?arch=zoo:cnn"  # .. out of the store
    hub = "timm:resnet18?pretrained=false"
    for ref in ("file:/etc/passwd", f"file:{outside}?arch=zoo:cnn", climbing, hub):
        at = inspect(at, ref)
        assert not at.exception
        assert len(errors(at)) == 1 and "viewer mode opens only models in the store" in errors(at)[0], ref
        assert "\n" not in errors(at)[0] and not [d for d in at.dataframe if "layout" in d.value.columns]
    for ref in (refs[0], f"file:{inside}?arch=zoo:cnn"):
        at = inspect(at, ref)
        assert not at.exception and not errors(at), ref
        assert cut_names(at)[0] == "block1"

    monkeypatch.setenv("STITCHLAB_VIEWER", "0")
    at = inspect(at, f"file:{outside}?arch=zoo:cnn")
    assert not at.exception and not errors(at)
    assert cut_names(at) == ["block1", "block2", "flatten", "fc1", "fc2"]


def test_viewer_mode_refuses_a_permalink_to_a_server_file(open_page, monkeypatch, tmp_path):
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = open_page(ref="file:/etc/passwd?arch=zoo:cnn")
    assert not at.exception
    assert len(errors(at)) == 1 and "viewer mode opens only models in the store" in errors(at)[0]


def test_architecture_sets_its_training_defaults(open_page):
    at = open_page()
    assert at.selectbox(key="zoo_optimizer").value == "sgd" and at.number_input(key="zoo_epochs").value == 20
    at.selectbox(key="zoo_arch").select("vit").run()  # a transformer needs AdamW (SGD leaves it near 30%)
    assert not at.exception
    assert at.selectbox(key="zoo_optimizer").value == "adamw" and at.number_input(key="zoo_epochs").value == 40
    at.selectbox(key="zoo_arch").select("cnn").run()
    assert at.selectbox(key="zoo_optimizer").value == "sgd"


def test_a_zoo_runs_link_refills_the_recipe_form_and_train_gives_the_same_run(open_page, tmp_path):
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store, run_id_for

    recipe = ZooRecipe(seed=3, epochs=2, relabel=(3, 8), l2=1e-4, keep_epochs=(0, 1), arch_kwargs={"channels": [8, 16]})
    run_id = run_id_for("zoo", recipe.to_dict())
    at = open_page(tmp_path / "store", run=run_id)  # not stored yet: the form still reads nothing from it
    at = open_page(tmp_path / "store", **{"seed": "3", "epochs": "2", "relabel": "3:8", "l2": "0.0001",
                                          "keep_epochs": "0,1", "arch_kwargs": '{"channels": [8, 16]}'})
    assert not at.exception and not errors(at)
    assert at.text_input(key="zoo_relabel").value == "3:8" and at.number_input(key="zoo_seed").value == 3
    at.button(key=TRAIN).click().run()
    assert at.query_params["run"] in (run_id, [run_id])  # the link's recipe, field for field
    assert ui.get_runner().wait(run_id, timeout=120).state == "done"
    store = Store(tmp_path / "store")
    assert store.lookup(run_id).spec["relabel"] == [3, 8]
    store.close()


def test_a_bad_recipe_value_in_a_link_is_held_with_a_note_and_bad_text_is_refused(open_page):
    at = open_page(epochs="100000", optimizer="nope")
    assert not at.exception
    notes = " ".join(w.value for w in at.warning)
    assert "epochs=100000 is outside 1 to 1000: using 1000" in notes and "optimizer='nope'" in notes
    assert at.number_input(key="zoo_epochs").value == 1000
    at.text_input(key="zoo_relabel").input("3-8").run()
    assert any("expected X:Y" in e for e in errors(at)) and at.button(key=TRAIN).disabled
