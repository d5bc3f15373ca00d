"""Contract tests over the registries: the Registry type, then every registered entry of every table.

Parametrized over ``list_*()`` (timm's ``tests/test_models.py`` habit), so a newly registered adapter,
architecture, source or dataset gets the same checks for free.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from stitchcore.cuts import Cut
from stitchcore.data import dataset_loader, list_datasets, load_dataset
from stitchcore.errors import AdapterError, DataError, RefError, StitchError
from stitchcore.models.archs import arch_config, arch_defaults, arch_input_kind, create_arch, list_archs
from stitchcore.models.sources import get_source, list_sources, wrap_arch_model
from stitchcore.registry import Registry
from stitchcore.stitching.adapters import (
    AdapterSpec,
    adapter_cost,
    build_adapter,
    compatibility,
    get_adapter,
    list_adapters,
)

# ---------------------------------------------------------------------------- the Registry type


class ColourError(StitchError):
    pass


@pytest.fixture
def colours() -> Registry[str]:
    reg: Registry[str] = Registry("colour", ColourError, hint="write a CSS name")
    for name, value in (("red", "#f00"), ("green", "#0f0"), ("blue", "#00f"), ("grey", "#888")):
        assert reg.register(name)(value) == value  # the decorator hands the entry back
    return reg


def test_registry_duplicate_raises_and_keeps_the_first(colours):
    with pytest.raises(ValueError, match="colour 'red' is already registered"):
        colours.register("red")("#e00")
    assert colours.get("red") == "#f00"


def test_registry_miss_names_close_names_the_known_ones_and_the_hint(colours):
    with pytest.raises(ColourError) as info:
        colours.get("gren")
    msg = str(info.value)
    assert msg == (
        "unknown colour 'gren'; did you mean 'green' or 'grey'? (known: red, green, blue, grey); "
        "write a CSS name"
    )
    with pytest.raises(ColourError) as info:  # nothing close: no guess, still the known names
        colours.get("ultraviolet")
    assert "did you mean" not in str(info.value) and "(known: red, green, blue, grey)" in str(info.value)


def test_registry_list_is_a_glob_in_registration_order(colours):
    assert colours.list() == ["red", "green", "blue", "grey"]  # not sorted
    assert colours.list("g*") == ["green", "grey"]
    assert colours.list("*e") == ["blue"]
    assert colours.list("[rb]*") == ["red", "blue"]
    assert colours.list("purple*") == []
    assert list(colours) == colours.list() and len(colours) == 4 and "blue" in colours


def test_registry_unregister(colours):
    colours.unregister("green")
    colours.unregister("never-there")  # ignored
    assert colours.list() == ["red", "blue", "grey"] and "green" not in colours
    colours.register("green")("#0f0")  # the name is free again, and goes to the end
    assert colours.list()[-1] == "green"


# ---------------------------------------------------------------------------- every table: misses

# table -> (its list function, the functions that look a name up, the error a miss raises)
TABLES = {
    "adapter": (list_adapters, (get_adapter, AdapterSpec), AdapterError),
    "arch": (list_archs, (create_arch, arch_defaults, arch_input_kind, arch_config), RefError),
    "source": (list_sources, (get_source,), RefError),
    "dataset": (list_datasets, (dataset_loader, load_dataset), DataError),
}
ENTRIES = [(table, name) for table, (lister, _, _) in TABLES.items() for name in lister()]


@pytest.mark.parametrize("table", list(TABLES))
def test_table_lists_are_globs(table):
    lister = TABLES[table][0]
    names = lister()
    assert names and len(set(names)) == len(names)
    assert lister("*") == names and lister("no-such-name*") == []
    assert lister(names[0]) == [names[0]]


@pytest.mark.parametrize("table, name", ENTRIES, ids=[f"{t}:{n}" for t, n in ENTRIES])
def test_a_typo_of_every_name_is_named_back(table, name):
    _, lookups, error = TABLES[table]
    for lookup in lookups:
        with pytest.raises(error) as info:
            lookup(name + "x")
        guess, _, known = str(info.value).partition("(known: ")
        assert "did you mean" in guess and repr(name) in guess, lookup.__name__
        assert name in known.split(", ") or name + ")" in known


def _unchecked_spec(kind: str) -> AdapterSpec:
    """A spec whose kind skipped validation (as a stale stored spec might): build_adapter checks it too."""
    spec = AdapterSpec()
    object.__setattr__(spec, "kind", kind)
    return spec


@pytest.mark.parametrize(
    "call, error, fix",
    [
        (lambda: load_dataset("digts"), DataError, "'digits'"),
        (lambda: load_dataset("Digits|drop3"), DataError, "'digits'"),  # close names ignore case
        (lambda: load_dataset("twocue-digit-blackleft"), DataError, "'twocue-digits-blackleft'"),
        (lambda: create_arch("cnm"), RefError, "'cnn'"),
        (lambda: AdapterSpec("linaer"), AdapterError, "'linear'"),
        (lambda: build_adapter(_unchecked_spec("linaer"), _map, _map_b), AdapterError, "'linear'"),
        (lambda: get_source("tim"), RefError, "'timm'"),
    ],
    ids=["dataset", "dataset-case", "dataset-twocue", "arch", "adapter-spec", "adapter-build", "source"],
)
def test_misses_name_the_fix(call, error, fix):
    with pytest.raises(error, match="^unknown ") as info:
        call()
    assert fix in str(info.value)


def test_dataset_miss_keeps_its_extras():
    """The dataset loader parses ``name|transform`` and ``imagefolder:PATH`` before the table."""
    with pytest.raises(DataError, match="imagefolder:PATH"):
        load_dataset("no-such-set")
    with pytest.raises(DataError, match="unknown dataset transform"):
        load_dataset("digits|shuffle")
    with pytest.raises(DataError, match="imagefolder needs a path"):
        load_dataset("imagefolder:")


# ---------------------------------------------------------------------------- every adapter kind

_map = Cut(name="a", shape=(8, 4, 4), layout="map", depth=0.5)  # every kind joins map [8,4,4] -> [8,4,4]
_map_b = Cut(name="b", shape=(8, 4, 4), layout="map", depth=0.7)


@pytest.mark.parametrize("kind", list_adapters())
def test_every_adapter_kind_builds_runs_and_counts(kind):
    spec = AdapterSpec(kind)
    assert compatibility(_map, _map_b, spec) is None
    adapter = build_adapter(spec, _map, _map_b)
    assert adapter.spec == spec and adapter.spec.kind == kind and get_adapter(kind).kind == kind
    adapter.train()
    x = torch.randn(3, 8, 4, 4)
    y = adapter(x)  # [B, 8, 4, 4] -> [B, 8, 4, 4]
    assert y.shape == (3, 8, 4, 4) and torch.isfinite(y).all()
    params, flops = adapter_cost(adapter, batch=2)
    trainable = [p for p in adapter.parameters() if p.requires_grad]
    assert params == sum(p.numel() for p in trainable)
    assert adapter.training  # adapter_cost restores the train flag
    if get_adapter(kind).passthrough:
        assert (params, flops) == (0, 0) and torch.equal(y, x)
    else:
        assert params > 0 and flops > 0
        y.square().mean().backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in trainable)


# ---------------------------------------------------------------------------- every architecture


@pytest.mark.parametrize("name", list_archs())
def test_every_arch_builds_with_defaults_and_runs(name):
    torch.manual_seed(0)
    model = create_arch(name)
    assert model.arch_name == name and model.input_kind == arch_input_kind(name) in ("image", "tokens")
    assert model.arch_kwargs == arch_defaults(name) == json.loads(json.dumps(model.arch_kwargs))
    assert create_arch(name, **model.arch_kwargs).arch_kwargs == model.arch_kwargs  # kwargs rebuild it
    loaded = wrap_arch_model(model, f"zoo:{name}")  # reads input_kind, input_shape, num_outputs, arch_*
    assert loaded.input_shape == tuple(model.input_shape) and loaded.num_classes == model.num_outputs >= 1
    assert loaded.meta["arch"] == f"zoo:{name}" and loaded.meta["arch_kwargs"] == model.arch_kwargs
    x = loaded.example_input(batch=2)  # [2, C, H, W] floats or [2, T] token ids
    with torch.no_grad():
        out = loaded.model(x)
    per_token = () if model.input_kind == "image" else tuple(model.input_shape)  # LMs: logits per position
    expected = (2, *per_token, model.num_outputs)
    assert tuple(out.shape) == expected


# ---------------------------------------------------------------------------- every model source


@pytest.mark.parametrize("scheme", list_sources())
def test_every_source_is_a_loader(scheme):
    assert callable(get_source(scheme))


# ---------------------------------------------------------------------------- every dataset


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("empty-data-root")  # datasets that need files skip


@pytest.mark.parametrize("name", list_datasets())
def test_every_offline_dataset_loads_with_both_splits(name, data_root):
    try:
        ds = load_dataset(name, root=data_root)
    except DataError as e:
        if "download" in str(e) or "offline" in str(e):
            pytest.skip(f"{name} needs files under the data root")
        raise
    assert ds.name == name and ds.num_classes >= 2
    assert load_dataset(name, root=data_root) is ds  # cached
    for split in ("train", "test"):
        x, y = ds.x_train if split == "train" else ds.x_test, ds.labels(split)
        assert len(x) == len(y) > 0 and tuple(x.shape[1:]) == ds.image_shape
        assert 0 <= int(y.min()) and int(y.max()) < ds.num_classes
    small = load_dataset(f"{name}|subset20s0", root=data_root)  # the transform suffix works on every name
    assert small.name == f"{name}|subset20s0" and len(small.y_train) == 20


# ---------------------------------------------------------------------------- built-ins register on import


def test_built_ins_are_registered_whichever_module_is_imported_first():
    """A fresh interpreter imports one leaf module per table first; its table is still complete."""
    script = textwrap.dedent(
        """
        import json, sys
        from stitchcore.data.images import list_datasets   # first import of anything in stitchcore.data
        from stitchcore.models.archs.cnn import CNN         # first import of anything in models.archs
        from stitchcore.stitching.adapters import list_adapters
        from stitchcore.models.archs import list_archs
        datasets = list_datasets()
        from stitchcore.data import load_dataset, make_twocue, load_text  # the package re-exports
        print(json.dumps({"datasets": datasets, "archs": list_archs(), "adapters": list_adapters()}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    fresh = json.loads(done.stdout)
    def ours(names, entry, package):  # this process may hold entries registered elsewhere: compare ours
        return [n for n in names if entry(n).__module__.startswith(package)]

    built_in = {
        "datasets": ours(list_datasets(), dataset_loader, "stitchcore.data."),
        "archs": ours(list_archs(), lambda n: type(arch_config(n)), "stitchcore.models.archs"),
        "adapters": ours(list_adapters(), get_adapter, "stitchcore.stitching.adapter_kinds"),
    }
    assert fresh == built_in
    assert "twocue-digits" in fresh["datasets"] and "digits" in fresh["datasets"]
