"""What an LM run's summary says in words, for every face that shows one (the Language page's cards, the CLI's
text): how its adapters were trained and which embeddings its merges read, and its 95% intervals.

>>> training_words({"steps": 200})
'Adapter started from its init, trained 200 steps.'
>>> training_words({"start_from": "the least-squares fit", "held_out": {"converged": True, "stopped_at": 120,
...                 "best_step": 80, "loss": 1.5}})  # doctest: +NORMALIZE_WHITESPACE
'Adapter started from the least-squares fit; trained 120 steps (stopped: no held-out improvement), kept step 80
 (held-out train loss 1.5000; the validation text above was not looked at).'
"""

from __future__ import annotations

from typing import Any

from stitchcore.plots.penalty import interval_words

__all__ = ["data_words", "interval_note", "training_words"]

_EMBED = {"tied": "the embeddings tied to the head used (head B: B's wte, wpe)", "b": "B's embeddings"}


def training_words(s: dict[str, Any]) -> str:
    """How a stitch's (or a depth sweep's) adapters were trained, and which embeddings its merges read."""
    if s.get("mode") == "depth":
        embed = _EMBED.get(s.get("embed", "a"), "A's embeddings (whichever head)")
        stitched = [p for p in s["points"] if p.get("mode") == "stitch"]
        held = [p["held_out"] for p in stitched if p.get("held_out")]
        merged = any(p.get("mode") == "merge" for p in s["points"])
        words = " ".join(([f"Merges read {embed}."] if merged else []) + (["Stitches read A's embeddings."]
                                                                            if stitched else []))  # fmt: skip
        if held:
            stopped = sum(h["converged"] for h in held)
            words += (f" Adapters trained until the held-out train loss stopped improving ({stopped} of {len(held)} "
                      f"stopped before the cap; steps kept: {', '.join(str(h['best_step']) for h in held)}).")
        elif stitched:
            words += " Adapters trained a fixed number of steps (stored before training to convergence)."
        return words
    held = s.get("held_out")
    start = f"started from {s['start_from']}" if s.get("start_from") else "started from its init"
    if not held:
        return f"Adapter {start}, trained {s.get('steps')} steps."
    how = "stopped: no held-out improvement" if held["converged"] else "hit the step cap"
    return (f"Adapter {start}; trained {held['stopped_at']} steps ({how}), kept step {held['best_step']} "
            f"(held-out train loss {held['loss']:.4f}; the validation text above was not looked at).")


def interval_note(s: dict[str, Any], kind: str) -> str:
    """The run's 95% intervals in one sentence ("" for a run stored before intervals)."""
    base = s["base"]
    if not base["a"].get("loss_ci"):
        return ""
    n, joined = s["eval_tokens"] // s["block_size"], "merged" if kind == "merge" else "stitched"  # n: windows
    if kind == "lmdepth":
        return (f"Error bars: 95% intervals over the {n} validation windows (bootstrap); each penalty is paired with "
                "its base model's loss on the same windows.")
    return (f"95% intervals over the {n} validation windows (bootstrap): A [{interval_words(base['a']['loss_ci'], 'loss')}]"
            f" · B [{interval_words(base['b'].get('loss_ci'), 'loss')}] · {joined} "
            f"[{interval_words(s.get('loss_ci'), 'loss')}] · loss penalty "
            f"[{interval_words(s.get('loss_penalty_ci'), 'loss_penalty')}] (paired: the base and the {joined} "
            "model scored on the same windows)")


def data_words(s: dict[str, Any]) -> str:
    """What the losses were measured on."""
    return (f"{s['eval_tokens']:,} validation tokens of {s['text']} ({s['vocab']}) · context {s['block_size']} · "
            "loss in nats per token")
