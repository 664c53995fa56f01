"""Results that survive interruption: config hashes, append-only record logs, run folders.

A long run (a cramming sweep, a Monte-Carlo estimate, a training run) writes one JSON record per
finished unit of work to a :class:`RecordLog` as soon as it is done. A killed run is resumed by
skipping the keys already in the log, so nothing is lost and nothing is done twice. Each run lives in
a folder named after the hash of the config that produced it, next to that config and the command.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path

import numpy as np


def _jsonable(obj):
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return None  # JSON has no inf/NaN
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, Path):
        return str(obj)
    return obj


def to_json(obj, **kwargs) -> str:
    """JSON text of dataclasses, numpy scalars/arrays, paths, mappings and sequences (inf, NaN -> null)."""
    return json.dumps(_jsonable(obj), **kwargs)


def config_hash(config, length: int = 12) -> str:
    """Stable short hash of a config (a dataclass or a mapping): sha256 of its canonical JSON.

    Key order does not matter; every value does.

    >>> config_hash({"m": 1, "lr": 0.1}) == config_hash({"lr": 0.1, "m": 1})
    True
    >>> config_hash({"m": 1}) == config_hash({"m": 2})
    False
    """
    text = to_json(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def write_json(path: str | os.PathLike, obj) -> Path:
    """Write ``obj`` as JSON atomically (temporary file, then rename): never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(to_json(obj, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def read_json(path: str | os.PathLike):
    return json.loads(Path(path).read_text())


class RecordLog:
    """Append-only JSON-lines log of finished work, keyed for resumption.

    Every record is a mapping with a ``"key"`` entry naming the unit of work it finishes. Appends are
    flushed and fsynced one record at a time. A line torn by a kill in mid-write is ignored when
    reading and cut off before the next append, so a resumed run neither loses nor duplicates work.

    >>> import tempfile, pathlib
    >>> log = RecordLog(pathlib.Path(tempfile.mkdtemp()) / "runs.jsonl")
    >>> log.append({"key": "a", "n": 3}); log.append({"key": "b", "n": 5})
    >>> sorted(log.keys()), [r["n"] for r in log]
    (['a', 'b'], [3, 5])
    >>> log.append({"key": "a", "n": 4})
    Traceback (most recent call last):
    ...
    KeyError: "record 'a' is already in ..."
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._keys: set[str] | None = None

    def __iter__(self) -> Iterator[dict]:
        if not self.path.exists():
            return
        with self.path.open() as f:
            for line in f:
                if line.endswith("\n"):
                    yield json.loads(line)

    def records(self) -> list[dict]:
        return list(self)

    def keys(self) -> set[str]:
        if self._keys is None:
            self._keys = {r["key"] for r in self}
        return self._keys

    def __contains__(self, key: str) -> bool:
        return key in self.keys()

    def append(self, record: Mapping) -> None:
        key = record["key"]
        if key in self.keys():
            raise KeyError(f"record {key!r} is already in {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_torn_tail()
        with self.path.open("a") as f:
            f.write(to_json(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.keys().add(key)

    def _drop_torn_tail(self) -> None:
        """Cut a torn last line; reads only the last byte unless the line is torn."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("r+b") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.seek(0)
                f.truncate(f.read().rfind(b"\n") + 1)


#: The ``accessibility ...`` command being run, set by :func:`accessibility.cli.main` (also when it
#: is called in-process), so that saved runs name the command rather than the Python process.
CURRENT_COMMAND: ContextVar[str | None] = ContextVar("accessibility_command", default=None)


def command_line() -> str:
    """The command that produced a result: the running ``accessibility`` command, else the program.

    >>> token = CURRENT_COMMAND.set("accessibility cram --m 1")
    >>> command_line()
    'accessibility cram --m 1'
    >>> CURRENT_COMMAND.reset(token)
    """
    return CURRENT_COMMAND.get() or shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])


def run_folder(out: str | os.PathLike, kind: str, config, command: str | None = None) -> Path:
    """Folder ``out/<kind>-<config hash>`` holding ``config.json`` (config, command, versions).

    Re-running the same config finds the same folder, which is how runs resume. ``command``
    defaults to :func:`command_line`.
    """
    folder = Path(out) / f"{kind}-{config_hash(config)}"
    meta = folder / "config.json"
    if not meta.exists():
        write_json(meta, {
            "kind": kind,
            "config": config,
            "config_hash": config_hash(config),
            "command": command or command_line(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "versions": _versions(),
        })
    return folder


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0]}
    for name in ("accessibility", "torch", "transformers", "numpy"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found
