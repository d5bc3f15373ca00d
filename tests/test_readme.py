"""README.md's "Command line" examples run as written, and every CLI verb is documented with help."""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PROG = ("python", "-m", "stitchcore")


def cli_section(text: str) -> str:
    """The README's "## Command line" section, up to the next level-2 heading."""
    match = re.search(r"^## Command line\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, "README.md has no '## Command line' section"
    return match.group(1)


def cli_examples(section: str) -> list[list[str]]:
    """Every ``python -m stitchcore ...`` line of the section's ```bash blocks, as argv after the program.

    >>> cli_examples("```bash\\npython -m stitchcore stitch --a A \\\\\\n    --b B  # note\\n```")
    [['stitch', '--a', 'A', '--b', 'B']]
    """
    examples = []
    for block in re.findall(r"^```bash\n(.*?)^```", section, flags=re.M | re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            words = shlex.split(line, comments=True)
            if tuple(words[:3]) == PROG:
                examples.append(words[3:])
    return examples


def readme_examples() -> list[list[str]]:
    """The examples of README.md's Command line section, in order."""
    return cli_examples(cli_section(README.read_text()))


def uses_zoo_gpt(argv: list[str]) -> bool:
    """Whether an example trains or reads the zoo GPTs: ~11 s per 2-epoch model, ~40 s per merge on 2 CPU cores."""
    return any(w == "gpt" or w.startswith("zoo:gpt-") for w in argv)


def run_in_order(examples: list[list[str]], store: Path, monkeypatch, capsys) -> None:
    """Run each example through ``main`` against ``store``, in order; each must exit 0 and print something."""
    from stitchcore.cli.main import main

    monkeypatch.setenv("STITCHLAB_STORE", str(store))
    timings = []
    for argv in examples:
        start = time.perf_counter()
        code = main(argv)
        out, err = capsys.readouterr()
        timings.append(f"{time.perf_counter() - start:7.1f} s  {shlex.join(argv)}")
        assert code == 0, f"{shlex.join(argv)} exited {code}: {err}"
        assert out.strip(), f"{shlex.join(argv)} printed nothing"
    print("\n".join(timings))  # shown with pytest -rP


def test_readme_cli_examples_parse():
    """Every example's verb and flags exist (the ones too slow to run here included)."""
    from stitchcore.cli.main import build_parser

    examples = readme_examples()
    assert len(examples) >= 5, examples
    for argv in examples:
        try:
            build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"README.md example does not parse: python -m stitchcore {shlex.join(argv)}")


def test_readme_cli_examples_run(tmp_path, monkeypatch, capsys):
    """The image examples, in order, against a fresh store (later ones use models earlier ones trained)."""
    examples = [argv for argv in readme_examples() if not uses_zoo_gpt(argv)]
    assert any(argv[0] == "stitch" for argv in examples), examples
    run_in_order(examples, tmp_path / "store", monkeypatch, capsys)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_readme_language_model_examples_run(tmp_path, monkeypatch, capsys):
    """The zoo GPT examples, in order (train two quick ones, then merge them over depth): ~1.5 min on 2 CPU cores.

    The suite runs single-threaded (conftest); these jobs are big enough that two threads pay,
    so they get them deliberately, as a user's shell would.
    """
    import torch

    examples = [argv for argv in readme_examples() if uses_zoo_gpt(argv)]
    assert [argv[0] for argv in examples] == ["zoo", "zoo", "merge"], examples
    threads = torch.get_num_threads()
    from tests.conftest import big_job_threads

    torch.set_num_threads(big_job_threads())
    monkeypatch.setenv("STITCHLAB_JOB_THREADS", str(big_job_threads()))  # the CLI's --threads default
    try:
        run_in_order(examples, tmp_path / "store", monkeypatch, capsys)
    finally:
        torch.set_num_threads(threads)


def _verbs() -> list[tuple[tuple[str, ...], str]]:
    """Every leaf verb of the parser with its one-line help: (("cuts",), "list the cut points ..."), ..."""
    import argparse

    from stitchcore.cli.main import build_parser

    def leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...], line: str):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return [(prefix, line)]
        helps = {a.dest: a.help or "" for a in subs[0]._choices_actions}
        return [leaf for name, sub in subs[0].choices.items()
                for leaf in leaves(sub, (*prefix, name), helps.get(name, ""))]

    return leaves(build_parser(), (), "")


def test_parser_verbs_are_the_commands():
    """Every verb the parser accepts has a command, and every command a verb."""
    from stitchcore.cli.main import COMMANDS

    assert {(v[0], v[1] if len(v) > 1 else None) for v, _ in _verbs()} == set(COMMANDS)


@pytest.mark.parametrize("verb, line", _verbs(), ids=[" ".join(v) for v, _ in _verbs()])
def test_every_verb_documented_or_has_help(verb, line, capsys):
    """As in sqlite-utils: each verb is in README.md's Command line, or says what it does in --help."""
    from stitchcore.cli.main import build_parser

    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*verb, "--help"])
    usage = capsys.readouterr().out
    assert exit_info.value.code == 0 and usage.startswith("usage: python -m stitchcore " + " ".join(verb))
    documented = re.search(rf"python -m stitchcore {' '.join(verb)}\b", cli_section(README.read_text()))
    assert documented or line.strip(), f"{' '.join(verb)}: not in README.md's Command line and no help= line"
