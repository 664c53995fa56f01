"""Mutation testing of the derivation checker: how many mutants of accessibility/derivations.py the
tests kill, and why each survivor is harmless.

Not run in CI: about an hour on two busy cores with one child (1000 mutants). Needs mutmut 3
(``pip install "mutmut>=3.8"``, a benchmark-only tool, not a dependency of the package). From the
repository root::

    python benchmarks/mutation_derivations.py [--max-children 2] [--keep DIR]

It copies the package, tests/test_derivations.py and tests/conftest.py to a scratch folder and runs
mutmut there on ``accessibility/derivations.py`` alone. The test suite of a mutant is
tests/test_derivations.py plus the module's doctests (those of them that run the mutated function).
Each mutant runs in a fresh process forked from a server that has only collected the tests, so no
derivation cached by another run hides a mutant (the derivations are ``functools.cache``-d). mutmut
mutates the undecorated functions: the checker (``_Chain`` and its numeric and SymPy helpers) and the
helpers that turn evidence into points; the cached derivations themselves are not mutated.

mutmut runs, for each mutant, only the tests it recorded calling the mutated function; with cached
derivations those are the tests that happened to build each derivation first, not the ones that
inspect its result. So every mutant that survives that first pass is run again against the whole
suite (the mutant applied to a copy of the source, ``python -m pytest -x``): it is killed if any test
fails.

It prints the score, killed / mutants, where a mutant that makes the tests time out counts as killed
(it sent the checker into a loop or a far larger search), and every survivor with its diff and the
reason it is harmless, from :data:`HARMLESS`. A survivor that no reason matches is printed as
UNEXPLAINED, and the script exits with status 1; so does a score below :data:`REQUIRED_SCORE`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "accessibility/derivations.py"
#: The score the checker's tests must reach (killed mutants / all mutants).
REQUIRED_SCORE = 0.90
#: mutmut's exit codes (mutmut.stats.status_by_exit_code): killed, and timed out.
KILLED, TIMEOUTS = {1, 3}, {24, -24, 36, 152, 255}
CONFIG = """
[tool.mutmut]
source_paths = ["accessibility"]
only_mutate = ["{target}"]
pytest_add_cli_args_test_selection = ["tests/test_derivations.py", "{target}"]
pytest_add_cli_args = ["-p", "no:cacheprovider", "--doctest-modules"]
process_isolation = "forkserver"

[tool.pytest.ini_options]
doctest_optionflags = ["NORMALIZE_WHITESPACE", "ELLIPSIS", "NUMBER"]
"""
#: Why a surviving mutant is harmless: (regular expression matched against the mutant's changed lines,
#: reason). The first match wins.
HARMLESS = [
    (r'def (simplify|negate|log|exp)\(self, reason: str = "',
     "the default reason text of a step, shown in the book beside the relation; not part of its check"),
    (r"TOLERANCE \* \(2 \+ abs\(value|TOLERANCE / \(1 \+ abs\(value|nint\(value\)\) < TOLERANCE",
     "the tolerance of 'is an integer': a value computed from integers in 40 digits is far closer to one, a "
     "fraction far from one, under either tolerance"),
    (r"slack = TOLERANCE \* \(2 \+|a < b \+ slack|abs\(a - b\) < slack",
     "the numeric comparisons' tolerance, or whether its boundary itself passes: they differ only for values "
     "exactly at the tolerance"),
    (r"nstr\(_mp\(v\), (7|)\)",
     "the digits a point is printed with in an error message"),
    (r"default_rng\(None\)",
     "the seed of the points a substituted value is checked at (never stored): another seed draws other "
     "points of the same domain"),
    (r"points = None if \(substitutions\) and False",
     "with a substitution the lemma's own points are reused; they assign only the lemma's variables, "
     "which the instance no longer contains, so its symbols are drawn from their domains either way"),
    (r"rng\.integers\([4-9]\)|rng\.integers\(None\)",
     "how far past n(δ) the evidence of the hypothesis n >= n(δ) puts n: any integer at or past it holds"),
    (r"len\(step\.latex\(\)\) < LONG_LATEX",
     "a relation of exactly LONG_LATEX characters set on one line or on two (none has that length)"),
    (r"powsimp\(sympy\.simplify\(self\.rhs\), (force=None|force=False|)\)",
     "powsimp with or without force writes the simplified side the same way for these positive symbols (the "
     "doctests and the rendered chains are unchanged)"),
    (r"\*\* rng\.uniform\(0, \)|uniform\(1, DECADES|\(11\) \*\*|11 \*\* rng|DECADES\[1\]\)\) \+ 1",
     "the spread of the random draws of an unbounded domain (which integers, which decades): they stay in "
     "the domain"),
    (r"rng\.uniform\(1 - EDGE\)|rng\.uniform\(EDGE, \)",
     "the spread of the random draws of a bounded interval: they stay inside it"),
    (r"range\(4\)|low \+ 2, low|low \+ 1 \* EDGE|low \+ 2 / EDGE|EDGE / width|width / 3",
     "which interior values the edge grid adds beside its ends"),
    (r"sympy\.N\(value, (None|)\)|isinstance\(value, sympy\.Basic\)\) or True",
     "a number converted to mpmath through sympy.N at 15 rather than 40 digits, or a float through it too: "
     "the same value to far within the tolerance"),
    (r'value = ""',
     "an undefined value marked by another placeholder, which the comparisons refuse the same way"),
    (r'getattr\(rel, "rel_op", \)',
     "getattr without its default: every step's relation is a SymPy relational, which has rel_op"),
    (r"sympy\.(Eq|Le)\(lhs, rhs, evaluate=None\)",
     "evaluate=None for evaluate=False: SymPy's relationals read only its truth, so both leave the step "
     "unevaluated (the test of _rel fails for evaluate=True)"),
    (r'getattr\(domain, "left_open", None\)',
     "None for False as the default of left_open: only its truth is read, and both are false"),
]


def _prepare(scratch: Path) -> None:
    """The package, the derivation tests and the conftest, and mutmut's configuration."""
    shutil.copytree(ROOT / "accessibility", scratch / "accessibility",
                    ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copytree(ROOT / "accessibility" / "data", scratch / "accessibility" / "data")
    (scratch / "tests").mkdir()
    for name in ("test_derivations.py", "conftest.py"):
        shutil.copy(ROOT / "tests" / name, scratch / "tests" / name)
    (scratch / "pyproject.toml").write_text(CONFIG.format(target=TARGET))


def _mutmut(scratch: Path, *args: str, capture: bool = False) -> str:
    done = subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=scratch, check=True,
                          capture_output=capture, text=True)
    return done.stdout if capture else ""


def _changed_lines(diff: str) -> str:
    lines = diff.splitlines()
    return "\n".join(line for line in lines if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def _reason(diff: str) -> str | None:
    changed = _changed_lines(diff)
    return next((why for pattern, why in HARMLESS if re.search(pattern, changed)), None)


def _killed_by_the_whole_suite(scratch: Path, name: str) -> bool:
    """Apply one mutant to the scratch copy's source and run every test of the selection on it."""
    source = scratch / TARGET
    original = source.read_text()
    try:
        _mutmut(scratch, "apply", name)
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                               "--doctest-modules", "tests/test_derivations.py", TARGET], cwd=scratch,
                              capture_output=True, text=True, env=_scratch_env(scratch))
        return done.returncode != 0
    finally:
        source.write_text(original)


def _scratch_env(scratch: Path) -> dict:
    import os

    return {**os.environ, "PYTHONPATH": str(scratch)}


def report(scratch: Path) -> int:
    """Confirm the first pass's survivors against the whole suite, then print the score and the
    survivors; 0 when every survivor is explained and the score is met."""
    codes = json.loads((scratch / "mutants" / (TARGET + ".meta")).read_text())["exit_code_by_key"]
    timeouts = [k for k, c in codes.items() if c in TIMEOUTS]
    first_pass = [k for k, c in codes.items() if c not in KILLED and c not in TIMEOUTS]
    second_pass = [k for k in first_pass if _killed_by_the_whole_suite(scratch, k)]
    survivors = [k for k in first_pass if k not in second_pass]
    score = 1 - len(survivors) / len(codes)
    print(f"mutants of {TARGET}: {len(codes)}; killed {len(codes) - len(survivors)} ({len(timeouts)} by a "
          f"timeout, {len(second_pass)} only by a test mutmut did not select); survived {len(survivors)}; "
          f"score {score:.1%}")
    unexplained = 0
    for name in survivors:
        diff = _mutmut(scratch, "show", name, capture=True)
        why = _reason(diff)
        unexplained += why is None
        print(f"\n{name} [{'status ' + str(codes[name]) if codes[name] else 'survived'}]\n"
              f"{_changed_lines(diff)}\n  -> {why or 'UNEXPLAINED'}")
    return int(unexplained > 0 or score < REQUIRED_SCORE)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-children", type=int, default=2, help="mutants run in parallel")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary one)")
    parser.add_argument("--report-only", action="store_true", help="report on the run already in --keep")
    args = parser.parse_args(argv)
    if args.report_only:
        return report(args.keep)
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="mutation-derivations-"))
    scratch.mkdir(parents=True, exist_ok=True)
    _prepare(scratch)
    _mutmut(scratch, "run", "--max-children", str(args.max_children))
    status = report(scratch)
    if args.keep is None:
        shutil.rmtree(scratch)
    return status


if __name__ == "__main__":
    sys.exit(main())
