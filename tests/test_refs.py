"""ModelRef grammar: parsing, canonical spelling, and errors that name the fix."""

from __future__ import annotations

import pytest

from stitchcore.errors import RefError
from stitchcore.models.refs import SCHEMES, ModelRef, parse_ref


@pytest.mark.parametrize(
    "text, scheme, name, file, params",
    [
        ("zoo:cnn-digits-s0", "zoo", "cnn-digits-s0", None, ()),
        ("timm:resnet18", "timm", "resnet18", None, ()),
        ("timm:resnet18@file=/path/w.safetensors", "timm", "resnet18", "/path/w.safetensors", ()),
        ("timm:resnet18?pretrained=false", "timm", "resnet18", None, (("pretrained", "false"),)),
        ("torchvision:resnet18", "torchvision", "resnet18", None, ()),
        ("torchvision:resnet18?weights=none", "torchvision", "resnet18", None, (("weights", "none"),)),
        ("hf:gpt2", "hf", "gpt2", None, ()),
        ("hf:openai-community/gpt2", "hf", "openai-community/gpt2", None, ()),
        ("hf:/local/dir", "hf", "/local/dir", None, ()),
        (
            "file:/path/model.pt?arch=zoo:cnn&num_classes=10",
            "file",
            "/path/model.pt",
            None,
            (("arch", "zoo:cnn"), ("num_classes", "10")),
        ),
        (
            "timm:resnet18@file=/w/r.pth?num_classes=10",
            "timm",
            "resnet18",
            "/w/r.pth",
            (("num_classes", "10"),),
        ),
    ],
)
def test_parse_examples(text, scheme, name, file, params):
    ref = parse_ref(text)
    assert (ref.scheme, ref.name, ref.file, ref.params) == (scheme, name, file, params)
    assert str(ref) == text
    assert parse_ref(str(ref)) == ref


def test_params_sorted_and_canonical():
    ref = parse_ref("file:/m.pt?num_classes=10&blocks=1,1,1,1&arch=zoo:resnet")
    assert str(ref) == "file:/m.pt?arch=zoo:resnet&blocks=1,1,1,1&num_classes=10"
    assert parse_ref(str(ref)) == ref
    assert ref.param("blocks") == "1,1,1,1"
    assert ref.param("missing") is None and ref.param("missing", "x") == "x"
    assert ref.without_params("arch") == {"blocks": "1,1,1,1", "num_classes": "10"}
    assert hash(ref) == hash(parse_ref(str(ref)))


def test_scheme_case_and_whitespace_normalised():
    assert str(parse_ref("  TIMM:resnet18 ")) == "timm:resnet18"


def test_path_with_at_sign_stays_in_name():
    ref = parse_ref("file:/tmp/user@host/model.safetensors")
    assert ref.name == "/tmp/user@host/model.safetensors" and ref.file is None


def test_value_may_contain_equals_and_colon():
    ref = parse_ref("file:/m.pt?arch=timm:resnet18&note=a=b")
    assert ref.param("arch") == "timm:resnet18" and ref.param("note") == "a=b"
    assert parse_ref(str(ref)) == ref


def test_parse_ref_passes_modelref_through():
    ref = parse_ref("hf:gpt2")
    assert parse_ref(ref) is ref


def test_schemes_constant():
    assert SCHEMES == ("zoo", "timm", "torchvision", "hf", "file")


def test_unknown_scheme_suggests_close_one():
    with pytest.raises(RefError) as err:
        parse_ref("tim:resnet18")
    msg = str(err.value)
    assert "unknown model source 'tim' in 'tim:resnet18'" in msg
    assert "zoo:, timm:, torchvision:, hf:, file:" in msg and "did you mean timm:?" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    "text, guess", [("tv:resnet18", "torchvision:"), ("huggingface:gpt2", "hf:"), ("C:/m.pt", "file:")]
)
def test_scheme_aliases(text, guess):
    with pytest.raises(RefError, match=f"did you mean {guess}"):
        parse_ref(text)


def test_bare_name_suggests_timm():
    with pytest.raises(RefError, match="timm:resnet18"):
        parse_ref("resnet18")


def test_bare_path_suggests_file():
    with pytest.raises(RefError, match="file:/x/model.pt"):
        parse_ref("/x/model.pt")


def test_bare_hub_id_suggests_hf():
    with pytest.raises(RefError, match="hf:openai-community/gpt2"):
        parse_ref("openai-community/gpt2")


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_says_what_a_ref_looks_like(text):
    with pytest.raises(RefError, match="looks like 'timm:resnet18'"):
        parse_ref(text)


def test_not_a_string():
    with pytest.raises(RefError, match="must be a string"):
        parse_ref(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text, match",
    [
        ("timm:", "no name after 'timm:'"),
        ("file:?arch=zoo:cnn", "no name after 'file:'"),
        ("timm:resnet18?", "ends with '\\?'"),
        ("timm:resnet18?pretrained", "key=value"),
        ("timm:resnet18?=x", "key=value"),
        ("timm:resnet18?a=1&a=2", "given twice"),
        ("timm:resnet18?bad key=1", "bad option name"),
        ("timm:resnet18@file=", "empty @file="),
        ("file:/m.pt@file=/w.pt", "write 'file:/w.pt'"),
        ("zoo:cnn@file=/w.pt", "for hub models"),
        ("hf:gpt2@file=/w.bin", "hf:/local/dir"),
    ],
)
def test_malformed_refs(text, match):
    with pytest.raises(RefError, match=match):
        parse_ref(text)


def test_direct_construction_is_validated_and_sorted():
    ref = ModelRef("timm", "resnet18", params=(("z", "1"), ("a", "2")))
    assert ref.params == (("a", "2"), ("z", "1"))
    with pytest.raises(RefError, match="unknown model source"):
        ModelRef("timn", "resnet18")
    with pytest.raises(RefError, match="no name"):
        ModelRef("timm", "")
    with pytest.raises(RefError, match="cannot contain '&'"):
        ModelRef("timm", "resnet18", params=(("a", "x&y"),))


def test_frozen():
    ref = parse_ref("timm:resnet18")
    with pytest.raises(AttributeError):
        ref.name = "resnet50"  # type: ignore[misc]
