"""What the Traits page reads from a link and writes into one, without drawing: a preset's link
(``?preset=NAME&protocol=match&data=mnist5k&seeds=3``) both ways, each bad value held with a note; the
preset as shown (its protocol, its data); the jobs its Run button queues; and the adapter recipes the
page's own-sweep form offers, with the one a stored sweep used (``?run=ID`` selects it).

A note quotes a link's value on one line, cut past :data:`QUOTE_CHARS` characters (a 5,000-digit
``seeds=`` is said by its start and its length); the page escapes it for Markdown where it shows it.

>>> link = read_preset_link({"preset": "kernel-size", "data": "mnist5k", "seeds": "2"})
>>> link.protocol, link.scale, link.seeds, link.notes
('task', 'mnist5k', 2, [])
>>> preset, note = shown_preset("kernel-size", link.protocol, link.scale)
>>> preset_link(preset, link.seeds)
{'preset': 'kernel-size', 'data': 'mnist5k', 'seeds': '2'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from stitchcore.experiments.preset_seeds import MAX_SEEDS, SEED_STEP, seeded_preset
from stitchcore.experiments.sweep.fields import SWEEP_FIELDS
from stitchcore.experiments.trait_presets import (
    PROTOCOLS,
    SCALES,
    TASK_EPOCHS,
    Preset,
    get_preset,
    preset_scales,
)
from stitchcore.stitching.adapters import AdapterSpec

__all__ = ["PROTOCOL_HELP", "PROTOCOL_WORDS", "QUOTE_CHARS", "SCALE_HELP", "SEEDS_HELP", "SWEEP_ADAPTERS",
           "PresetLink", "adapter_choice", "preset_jobs", "preset_link", "read_preset_link", "shown_preset"]

QUOTE_CHARS = 80  # a note quotes this much of a link's value (ui.text.LINK_CHARS: the page's other notes)

# What the page says of each setting a preset's link holds: its choices in words and one help line.
PROTOCOL_WORDS = {"task": "task-trained stitch (the report's protocol)",
                  "match": "least-squares match, no task training (label-free)"}  # fmt: skip
PROTOCOL_HELP = ("The report trains the stitch on the task (digits without 3s, A and B frozen); matching fits it to "
                 "B's activations by least squares, with no labels")  # fmt: skip
SCALE_HELP = ("The bundled 8x8 digits (seconds per model), or 5,000 real 28x28 MNIST digits with a three-block CNN "
              "(about half a minute per model), where a random-init bottom no longer stitches as well as a trained "
              "one at the conv cuts. Label noise runs on digits only.")  # fmt: skip
SEEDS_HELP = (f"Run each preset from this many seeds: seed k trains every model from seed {SEED_STEP}·k on and the "
              "adapters from seed k (seed 0 is the preset as it always runs, so its stored runs are reused). The "
              "results then show each cut's mean across the seeds with a 95% t-interval: whether the finding is "
              "the recipe's or one training run's.")  # fmt: skip

# The own-sweep form's adapter recipes: label -> (adapter, epochs); the first is the Oxford report's protocol.
SWEEP_ADAPTERS: dict[str, tuple[AdapterSpec, int]] = {
    f"task-trained, least-squares start, {TASK_EPOCHS} epochs (the report's)": (AdapterSpec(init="lstsq"), TASK_EPOCHS),
    "least-squares match, fitted only (label-free)": (AdapterSpec(init="lstsq"), 0),
    "task-trained (random init, 10 epochs)": (AdapterSpec(), 10),
    "none: weight substitution (identity)": (AdapterSpec(kind="identity", norm="none", init="identity"), 0),
}


class PresetLink(NamedTuple):
    """A ``?preset=`` link's settings, each a value the page offers, and a note for each it had to change."""

    protocol: str  # PROTOCOLS: how the Oxford presets stitch ("task", the report's, unless the link says match)
    scale: str  # SCALES: the data the Bansal presets that take it run on
    seeds: int  # model seeds, 1 .. MAX_SEEDS
    notes: list[str]  # one sentence per value the link gave that the page cannot use


def _quoted(value: str) -> str:
    cut = f"… ({len(value):,} characters)" if len(value) > QUOTE_CHARS else ""
    return repr(value[:QUOTE_CHARS]) + cut


def read_preset_link(params: Mapping[str, str]) -> PresetLink:
    """The protocol, data and model seeds a link asks for, each held in what the page offers (a value it
    does not offer: the page's own, with a note saying so).

    >>> read_preset_link({}).notes
    []
    >>> link = read_preset_link({"preset": "connectivity", "seeds": "50", "data": "cifar", "protocol": "x"})
    >>> link[:3]
    ('task', 'digits', 1)
    >>> print("\\n".join(link.notes))
    This link asked for protocol='x': presets stitch by task or match; showing task.
    This link asked for data='cifar': presets run on digits, mnist5k; showing digits.
    This link asked for seeds='50': model seeds are 1 to 5, so the page starts at 1.
    >>> read_preset_link({"seeds": "²"}).seeds, read_preset_link({"seeds": "9" * 5000}).notes[0][-70:-50]
    (1, '… (5,000 characters)')
    """
    notes = []
    protocol, scale, seeds = params.get("protocol", "task"), params.get("data", "digits"), params.get("seeds", "1")
    if protocol not in PROTOCOLS:
        notes.append(f"This link asked for protocol={_quoted(protocol)}: presets stitch by {' or '.join(PROTOCOLS)}; "
                     "showing task.")  # fmt: skip
        protocol = "task"
    if scale not in SCALES:
        notes.append(f"This link asked for data={_quoted(scale)}: presets run on {', '.join(SCALES)}; showing digits.")
        scale = "digits"
    # ASCII digits only (not "²"), and at most three of them (int() of 5,000 digits raises)
    if not (seeds.isascii() and seeds.isdigit() and len(seeds) <= 3 and 1 <= int(seeds) <= MAX_SEEDS):
        notes.append(f"This link asked for seeds={_quoted(seeds)}: model seeds are 1 to {MAX_SEEDS}, so the page "
                     "starts at 1.")  # fmt: skip
        seeds = "1"
    return PresetLink(protocol, scale, int(seeds), notes)


def shown_preset(name: str, protocol: str, scale: str) -> tuple[Preset, str | None]:
    """Preset ``name`` as the page shows it: with ``protocol`` (an Oxford preset) on ``scale`` where it runs
    there, and a note when it runs on digits only; StitchError for a name that is no preset.

    >>> preset, note = shown_preset("label-noise", "match", "mnist5k")
    >>> preset.dataset, preset.protocol, note.endswith("runs on digits only: showing it on digits.")
    ('digits', None, True)
    >>> shown_preset("inheritance", "match", "digits")[0].protocol
    'match'
    """
    preset = get_preset(name)
    if preset.protocol is not None:
        preset = get_preset(name, protocol=protocol)
    if scale not in preset_scales(name):
        return preset, f"{preset.title} runs on digits only: showing it on digits."
    return get_preset(name, protocol=preset.protocol, dataset=scale), None


def preset_link(preset: Preset, seeds: int) -> dict[str, str]:
    """The ``?preset=`` link of ``preset`` as shown (its protocol and data where not the default) from ``seeds``
    model seeds: what :func:`read_preset_link` reads back.

    >>> preset_link(get_preset("inheritance", protocol="match"), 1)
    {'preset': 'inheritance', 'protocol': 'match'}
    """
    return {"preset": preset.name, **({"protocol": "match"} if preset.protocol == "match" else {}),
            **({"data": preset.dataset} if preset.dataset != "digits" else {}),
            **({"seeds": str(seeds)} if seeds > 1 else {})}  # fmt: skip


def preset_jobs(preset: Preset, seeds: int) -> list[tuple[str, Any]]:
    """The (kind, spec) jobs that run ``preset`` from ``seeds`` model seeds, in the order they run: every
    seed's models, then every seed's sweeps (seed 0's are the preset's own).

    >>> jobs = preset_jobs(get_preset("kernel-size"), 2)
    >>> [kind for kind, _ in jobs].count("zoo"), [kind for kind, _ in jobs].count("sweep")
    (4, 12)
    """
    seeded = [seeded_preset(preset.name, k, preset.protocol, preset.dataset) for k in range(seeds)]
    return [("zoo", r) for p in seeded for r in p.recipes] + [("sweep", s) for p in seeded for s in p.sweeps]


_ADAPTER_FIELDS = [f for f in SWEEP_FIELDS if f.name.startswith("adapter.")]


def adapter_choice(values: Mapping[str, Any]) -> str | None:
    """The :data:`SWEEP_ADAPTERS` label whose adapter and epochs a sweep form's ``values`` hold (by link key,
    as :func:`stitchcore.params.form_values` gives a stored sweep's), or None: none of them.

    >>> from stitchcore.experiments.sweep import SweepSpec
    >>> from stitchcore.params import form_values
    >>> spec = SweepSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", adapter=AdapterSpec(init="lstsq"), epochs=0)
    >>> adapter_choice(form_values("sweep", spec))
    'least-squares match, fitted only (label-free)'
    >>> adapter_choice({**form_values("sweep", spec), "epochs": 3}) is None
    True
    """
    for label, (adapter, epochs) in SWEEP_ADAPTERS.items():
        if values.get("epochs") == epochs and all(
                values.get(f.key) == f.form_value(getattr(adapter, f.name.partition(".")[2])) for f in _ADAPTER_FIELDS):
            return label
    return None
