"""The one naming rule of :mod:`stitchcore.cuts`: which module path names a cut, and how.

Both back ends (:mod:`stitchcore.cuts._fx` and :mod:`stitchcore.cuts._hooks`) and the
recorder (:mod:`stitchcore.cuts.record`) name cuts through these functions only, so a
cut has one spelling everywhere: in specs, caches, URLs and UI labels.

- A cut is named by the outermost module whose output it is (:func:`choose_name`);
  a positional ``nn.Sequential`` and ``nn.Identity`` are transparent and name nothing.
- Names inside another cut are dropped unless they are block-list items (:func:`drop_inner`).
- A module called at several cut points gets ``path``, ``path:1``, ``path:2`` ...
  (:func:`call_name`, read back by :func:`parse_call`).
- The other modules whose output is the very same tensor are the cut's aliases
  (:func:`aliases_of`): ``layer2`` (a stage) for ``layer2.1`` (its last block).  They are
  accepted wherever a cut name is, and resolved to the canonical name at once.

>>> from collections import OrderedDict
>>> from torch import nn
>>> model = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.ReLU()),
...                       nn.Sequential(OrderedDict(linear=nn.Linear(2, 2), relu=nn.ReLU())))
>>> choose_name(model, ["0.1", "0"])  # the positional Sequential "0" is transparent
'0.1'
>>> choose_name(model, ["1.relu", "1"])  # a Sequential with named children is a block
'1'
>>> call_name("blocks.0", 1), parse_call("blocks.0:1"), parse_call("layer2.1")
('blocks.0:1', ('blocks.0', 1), ('layer2.1', 0))
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from torch import nn

BLOCK_LISTS = ("blocks", "stages", "layers", "layer", "h")  # container names whose items are blocks


def call_name(path: str, call: int) -> str:
    """The cut name of the ``call``-th call (0-based) of module ``path``: ``path``, then ``path:1`` ..."""
    return path if call == 0 else f"{path}:{call}"


def parse_call(name: str) -> tuple[str, int]:
    """A cut name -> (module path, call index): ``'blocks.0:1'`` -> ``('blocks.0', 1)``.

    A name without a ``:k`` suffix (or with one that is not a number) is a path, call 0.
    """
    path, sep, call = name.rpartition(":")
    if sep and call.isdigit() and path:
        return path, int(call)
    return name, 0


def close_names(name: str, names: Sequence[str]) -> list[str]:
    """Up to three of ``names`` a person may have meant by ``name`` (for "close: ..." hints).

    Names inside ``name`` come first (``layer2`` -> ``layer2.0``, ``layer2.1``), then similar spellings.

    >>> close_names("layer2", ["layer1.0", "layer2.0", "layer2.1", "layer3.0"])
    ['layer2.0', 'layer2.1', 'layer3.0']
    """
    inside = [n for n in names if n.startswith(name + ".")]
    close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.5)
    return list(dict.fromkeys(inside[:1] + inside[-1:] + close))[:3]


def _is_transparent(module: nn.Module) -> bool:
    """A module that never names a cut: an Identity, or a plain ``nn.Sequential`` built from
    positional modules (``layer1``: its last item names the output).  A Sequential with named
    children (``fc1 = Sequential(OrderedDict(linear=..., relu=...))``) is a block and names it."""
    if isinstance(module, nn.Identity):
        return True
    return type(module) is nn.Sequential and all(k.isdigit() for k, _ in module.named_children())


def choose_name(model: nn.Module, names: Sequence[str]) -> str | None:
    """The canonical name among the modules whose output is one tensor: the outermost non-transparent one.

    ``names`` lists the modules in the order their calls returned (innermost first);
    e.g. ``["layer1.1.relu", "layer1.1", "layer1"]`` -> ``"layer1.1"`` because the
    positional ``nn.Sequential`` ``layer1`` is transparent.  None when every one is transparent.
    """
    kept = [n for n in names if n and not _is_transparent(model.get_submodule(n))]
    if not kept:
        return None
    return min(kept, key=lambda n: (n.count("."), names.index(n)))


def aliases_of(model: nn.Module, canonical: str, calls: Sequence[str], taken: set[str]) -> tuple[str, ...]:
    """The other names of the tensor that cut ``canonical`` is: ``calls`` lists the call names
    (``path`` or ``path:k``, innermost first) of every module returning it.  Drops the canonical
    module itself, ``nn.Identity`` and the names in ``taken`` (other cuts' names and aliases);
    outermost first.

    >>> net = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), nn.Linear(2, 2))
    >>> aliases_of(net, "0.1", ["0.1", "0"], set())
    ('0',)
    """
    path = parse_call(canonical)[0]
    out = []
    for name in calls:
        base = parse_call(name)[0]
        if not name or base == path or name in taken or name in out:
            continue
        if isinstance(model.get_submodule(base), nn.Identity):
            continue
        out.append(name)
    return tuple(sorted(out, key=lambda n: (n.count("."), -list(calls).index(n))))


def is_block_list_item(model: nn.Module, name: str) -> bool:
    """True for ``blocks.3``-like names: an item of a ModuleList, or of a plain Sequential that is
    named like a block list or holds two or more modules of one class (not ``downsample.0``).

    >>> net = nn.Module()
    >>> net.blocks = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    >>> net.downsample = nn.Sequential(nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2))
    >>> is_block_list_item(net, "blocks.1"), is_block_list_item(net, "downsample.0")
    (True, False)
    """
    if "." not in name:
        return True
    parent_name = name.rsplit(".", 1)[0]
    parent = model.get_submodule(parent_name)
    if type(parent) is nn.ModuleList:
        return True
    if type(parent) is not nn.Sequential:
        return False
    kinds = {type(m) for m in parent.children()}
    return parent_name.rsplit(".", 1)[-1] in BLOCK_LISTS or (len(parent) > 1 and len(kinds) == 1)


def drop_inner(model: nn.Module, names: list[str]) -> list[str]:
    """Keep block granularity: drop names inside another cut unless they are block-list items.

    ``blocks.1.0.conv_pw`` goes when ``blocks.1.0`` is a cut; ``layers.0.blocks.0`` stays
    inside ``layers.0`` because ``layers.0.blocks`` is a block list.
    """
    bare = {parse_call(n)[0] for n in names}
    out = []
    for n in names:
        base = parse_call(n)[0]
        inside = any(base.startswith(o + ".") for o in bare if o != base)
        if not inside or is_block_list_item(model, base):
            out.append(n)
    return out
