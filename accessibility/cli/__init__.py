"""Command-line entry point: ``accessibility <command> ...`` (also ``python -m accessibility``).

Each command lives in its own module ``accessibility.cli.<command>`` with four functions:
``add_arguments(parser)``, ``check(args)``, ``run(args, checked) -> dict`` and ``text(result) -> str``;
the flags they share are defined once in :mod:`accessibility.cli._common`, and command modules import
none of each other. ``check`` validates every flag and combination (the save folder included) before
a model loads or anything is written, and returns what ``run`` needs; a refused command has done
nothing and left nothing on disk. This module adds the common ``--json`` flag, prints the returned
mapping (one JSON object with ``--json``, else the command's aligned text summary with units) and
turns bad input into one line on stderr with exit status 2, never a traceback (Ctrl-C: one line,
exit status 130). Command modules import heavy libraries (torch, transformers) inside ``check`` and
``run`` so that ``accessibility bound`` never pays for them.

:func:`rerun` runs the command of a saved run again, in-process (a chapter's switch that regenerates a
run shipped with the package instead of reading it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import shlex
import sys
from pathlib import Path

from accessibility.checks import InputError
from accessibility.results import CURRENT_COMMAND, Run, load_run, to_json

#: Command name -> one-line help. Each has a module ``accessibility.cli.<name>``.
COMMANDS = {
    "bound": "upper bounds of Theorem 4.5 and Corollaries 4.6 / 4.10 for a width, vocabulary and precision",
    "geometry": "support of a model's final hidden states: radii, cosines, cone, box, ellipsoid and "
                "refined slopes",
    "cells": "decoder-cell shares of a model (argmax or Voronoi), their entropy H and the refined slope",
    "cram": "cram targets into m soft-prompt vectors: capacities, n_50(m), the linear law and the "
            "theory ratio",
    "copy": "train a model to copy strings: accuracy against length beyond training, copy_n50 with "
            "its interval",
}


#: A value that starts with ``-`` and reads as a number (``-1``, ``-0.5``, ``-1e-12``, ``-inf``) is a
#: value, not a flag; argparse's own pattern misses exponents.
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*(e[-+]?\d+)?|\.\d+(e[-+]?\d+)?|inf|infinity|nan)$", re.IGNORECASE)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help with the description's lines kept (examples one per line) and every flag's default shown,
    unless its help already says it or there is none to show."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if not action.option_strings or "default" in text or any(default is v for v in (None, False,
                                                                                          argparse.SUPPRESS)):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"{text} (default {shown.replace('%', '%%')})"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (and exit status 2), reads negative numbers
    in any notation as values and shows help as :class:`_Formatter` does."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, formatter_class=_Formatter, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _plain(doc: str) -> str:
    """A command module's docstring as help text: reST literals and ``::`` markers dropped."""
    return doc.strip().replace("``", "").replace("::\n", ":\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported (and its flags added), so that
    ``accessibility bound`` never pays for torch and ``accessibility --help`` stays instant."""
    parser = _Parser(prog="accessibility", description=__doc__.splitlines()[0])
    from accessibility import __version__

    parser.add_argument("--version", action="version", version=f"accessibility {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, help_text in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if name != command:
            continue
        module = importlib.import_module(f"accessibility.cli.{name}")
        cmd.description = _plain(module.__doc__ or help_text)
        module.add_arguments(cmd)
        cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        cmd.set_defaults(_check=module.check, _run=module.run, _text=module.text)
    return parser


def _torch_threads(n: int | None):
    """A command's ``--threads`` for its duration only (``main`` may run in-process); None: torch's."""
    if n is None:
        return contextlib.nullcontext()
    from accessibility.models import torch_threads

    return torch_threads(n)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(command).parse_args(argv)
    token = CURRENT_COMMAND.set(shlex.join(["accessibility", *argv]))
    try:
        checked = args._check(args)     # every flag, before a model loads or anything is written
        with _torch_threads(getattr(args, "threads", None)):
            result = args._run(args, checked)
    except InputError as err:
        print(f"accessibility {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        resumable = getattr(args, "_resumable", False)
        again = "; what it saved is kept, and the same command resumes it" if resumable else ""
        print(f"accessibility {args.command}: interrupted{again}", file=sys.stderr)
        return 130
    finally:
        CURRENT_COMMAND.reset(token)
    print(to_json(result) if args.json else args._text(result))
    return 0


#: Flags of a saved run's command that :func:`rerun` replaces: the run folder and the output format.
RERUN_DROPS = {"--save": 1, "--json": 0, "--progress": 0}


def rerun_argv(command: str, folder: str | os.PathLike, *, progress: bool = False) -> list[str]:
    """The arguments of ``main`` that run ``command`` (``accessibility <command> ...``) again into
    ``folder``: its ``--save`` replaced, ``--json`` dropped (the command prints its text summary),
    ``--progress`` added with ``progress``.

    >>> rerun_argv("accessibility cells --model toy --save runs/a --json", "tmp/b")
    ['cells', '--model', 'toy', '--save', 'tmp/b']
    >>> rerun_argv("accessibility geometry --save=runs/a --samples 8", "b", progress=True)
    ['geometry', '--samples', '8', '--save', 'b', '--progress']
    """
    words = shlex.split(command)
    if words[:1] != ["accessibility"] or len(words) < 2 or words[1] not in COMMANDS:
        raise InputError(f"not a command of this package: {command!r}")
    argv, skip = [], 0
    for word in words[1:]:
        if skip:
            skip -= 1
        elif word.split("=")[0] in RERUN_DROPS:
            skip = 0 if "=" in word else RERUN_DROPS[word]
        else:
            argv.append(word)
    return [*argv, "--save", str(folder), *(["--progress"] if progress else [])]


def rerun(run: str | os.PathLike, folder: str | os.PathLike | None = None, *, progress: bool = False) -> Run:
    """Run the command that made a saved run (a shipped run's name or a run folder) again, in-process,
    and read the new run back: what its shell command (``load_run(run).command``) does.

    The new run goes to ``folder``, by default ``<cache_dir()>/runs/<kind>-<config hash>``: a shipped
    run is never overwritten, and a resumable command (``cram``) killed on the way resumes there
    when called again. The command prints its text summary, as in a shell. Before any work, the
    command's config is checked to be the old run's (its hash): where the package's defaults have
    changed since, the command would make another run, and this raises instead.
    """
    from accessibility import cache_dir
    from accessibility.results import config_hash

    old = load_run(run)
    kind, digest = old.config["kind"], old.config["config_hash"]
    folder = Path(folder) if folder is not None else cache_dir() / "runs" / f"{kind}-{digest}"
    argv = rerun_argv(old.command, folder, progress=progress)
    command = argv[0]
    now = config_hash(importlib.import_module(f"accessibility.cli.{command}").run_config(
        build_parser(command).parse_args(argv)))
    if now != digest:
        raise InputError(f"`{old.command}` now makes a run of config hash {now}, not {digest}: the "
                         "package's defaults changed since the run was made")
    if main(argv) != 0:
        raise InputError(f"`{old.command}` was refused (the line above says why)")
    return load_run(folder)
