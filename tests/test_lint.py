"""The code passes ``ruff check`` with the configuration in ``pyproject.toml`` (CI runs this test)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What is linted: the package, the tests, the benchmarks and the book's twin writer.
PATHS = ("accessibility", "tests", "benchmarks", "book/sync.py")


def test_ruff_check_is_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *PATHS], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert "No module named ruff" not in done.stderr, "install the test extra: pip install -e '.[test]'"
    assert done.returncode == 0, done.stdout + done.stderr
