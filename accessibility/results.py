"""Results that survive interruption and can be read back: seeded streams, config hashes, record
logs and saved runs.

Each unit of work (a cramming target, an evaluation length) draws its randomness from its own stream
``(seed, *keys)`` (:func:`rng`, :func:`torch_generator`), so its result does not depend on the order in
which units run. A long run (a cramming sweep, a Monte-Carlo estimate, a training run) writes one JSON
record per finished unit to a :class:`RecordLog` as soon as it is done; a killed run is resumed by
skipping the keys already in the log, so nothing is lost and nothing is done twice.

Every command saves a run in one layout (:func:`save_run`, :func:`load_run`): a folder holding
``config.json`` (the config, its hash, the exact command that regenerates the folder and the package
versions), ``records.jsonl`` (the resumable record log, where a command keeps one) and
``summary.json``. Runs shipped with the package (:func:`shipped_runs`) load by name.

Work units that take long (a cramming search of an hour) also keep their state while in flight
(:class:`Inflight`, ``inflight.json`` beside the log): a killed run resumes them where they were,
not from their start. Ctrl-C and SIGTERM are held (:func:`held_signals`) until such work reaches a
point where it can save its state, so an interrupted run loses nothing.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from accessibility.checks import InputError

if TYPE_CHECKING:
    from importlib.abc import Traversable

    import torch


def rng(seed: int, *keys: int) -> np.random.Generator:
    """A numpy generator for the stream ``(seed, *keys)``; equal keys give equal draws.

    >>> bool(rng(0, 1, 5).integers(10**9) == rng(0, 1, 5).integers(10**9))
    True
    >>> bool(rng(0, 1, 5).integers(10**9) == rng(0, 1, 6).integers(10**9))
    False
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, keys)]))


def torch_generator(seed: int, *keys: int) -> torch.Generator:
    """A CPU torch generator for the stream ``(seed, *keys)``, seeded from the same
    :class:`numpy.random.SeedSequence` as :func:`rng` (which mixes the keys).

    >>> import torch
    >>> bool(torch.rand(1, generator=torch_generator(0, 2)) == torch.rand(1, generator=torch_generator(0, 2)))
    True
    """
    import torch

    state = np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1, np.uint64)[0]
    return torch.Generator().manual_seed(int(state))


class HeldSignals:
    """SIGINT and SIGTERM received while held (:func:`held_signals`): ``signal`` is the first one, or
    None; a second one stops at once."""

    def __init__(self):
        self.signal: int | None = None

    def __call__(self, signum, frame):
        if self.signal is not None:
            raise KeyboardInterrupt(f"stopped by a second {signal.Signals(signum).name}")
        self.signal = signum

    def stop(self) -> None:
        """Raise KeyboardInterrupt if a signal is held (call it once the state is saved)."""
        if self.signal is not None:
            raise KeyboardInterrupt(f"stopped by {signal.Signals(self.signal).name} at a saved point")


@contextlib.contextmanager
def held_signals():
    """Hold Ctrl-C (SIGINT) and SIGTERM while long work runs: the work polls ``held.signal`` at points
    where it can save its state, saves it and calls ``held.stop()``, so an interrupted run loses
    nothing. Outside the main thread (where Python cannot set handlers) the signals keep their
    handlers. A signal still held when the block ends raises KeyboardInterrupt there; the previous
    handlers are restored in every case."""
    held = HeldSignals()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    before = {sig: signal.signal(sig, held) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield held
    finally:
        for sig, handler in before.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    held.stop()


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
    The file is parsed once, on first use; appends keep the parsed records up to date.

    ``omit`` names fields left out of appended records (e.g. large vectors a saved run need not
    keep); with ``timed``, each appended record gets ``"seconds"``, the wall-clock time since the
    previous append by this log (or since it was created), so that summing them over a run gives
    the compute time of its work, across resumed sessions.

    A unit of work that is later extended (a search given more probes) is appended again with
    ``replace=True``: the file keeps both lines (nothing is lost), and reading keeps, per key, the
    record with the most ``steps`` (:func:`latest`), the extended one.

    >>> import tempfile, pathlib
    >>> log = RecordLog(pathlib.Path(tempfile.mkdtemp()) / "runs.jsonl", omit=("big",))
    >>> log.append({"key": "a", "n": 3, "big": [0.0] * 9})
    {'key': 'a', 'n': 3}
    >>> _ = log.append({"key": "b", "n": 5})
    >>> sorted(log.keys()), [r["n"] for r in log], "big" in RecordLog(log.path).records()[0]
    (['a', 'b'], [3, 5], False)
    >>> log.append({"key": "a", "n": 4})
    Traceback (most recent call last):
    ...
    KeyError: "record 'a' is already in ..."
    >>> _ = log.append({"key": "a", "n": 4, "steps": 9}, replace=True)
    >>> [r["n"] for r in RecordLog(log.path)], len(log.path.read_text().splitlines())
    ([4, 5], 3)
    """

    def __init__(self, path: str | os.PathLike, *, omit: tuple[str, ...] = (), timed: bool = False):
        self.path = Path(path)
        self.omit = tuple(omit)
        self.timed = timed
        self._records: list[dict] | None = None
        self._keys: set[str] = set()
        self._clock = time.perf_counter()

    def pending_seconds(self) -> float:
        """Wall-clock seconds since the previous append (or since the log was created): the time
        the next record will carry when timed."""
        return time.perf_counter() - self._clock

    def carry(self, seconds: float) -> None:
        """Count ``seconds`` more in the next record's time (work done on it by an earlier, killed
        process: see :class:`Inflight`)."""
        self._clock -= seconds

    def _load(self) -> list[dict]:
        if self._records is None:
            self._records = latest(_parse_log(self.path)) if self.path.exists() else []
            self._keys = {r["key"] for r in self._records}
        return self._records

    def __iter__(self) -> Iterator[dict]:
        return iter(list(self._load()))

    def records(self) -> list[dict]:
        return list(self._load())

    def keys(self) -> set[str]:
        self._load()
        return self._keys

    def __contains__(self, key: str) -> bool:
        return key in self.keys()

    def append(self, record: Mapping, replace: bool = False) -> dict:
        """Write ``record`` (less the omitted fields, plus ``seconds`` when timed); return it as a
        later read returns it. A key already in the log is an error unless ``replace`` (an extended
        unit of work, which must carry more ``steps`` than the record it replaces)."""
        key = record["key"]
        if key in self.keys() and not replace:
            raise KeyError(f"record {key!r} is already in {self.path}")
        record = {k: v for k, v in record.items() if k not in self.omit}
        if self.timed:
            now = time.perf_counter()
            record["seconds"], self._clock = now - self._clock, now
        line = to_json(record, sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_torn_tail()
        with self.path.open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._records = latest([*self._records, json.loads(line)])   # what a later read returns
        self._keys.add(key)
        return next(r for r in self._records if r["key"] == key)

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
    """Folder ``out/<kind>-<config hash>`` holding ``config.json`` (a cache of work keyed by its
    config, such as trained copy models; saved runs use :func:`save_run`).

    Re-running the same config finds the same folder. ``command`` defaults to :func:`command_line`.
    """
    folder = Path(out) / f"{kind}-{config_hash(config)}"
    if not (folder / CONFIG_FILE).exists():
        write_json(folder / CONFIG_FILE, run_meta(kind, config, command))
    return folder


# --- saved runs: one layout for every command --------------------------------------------------

#: The files of a saved run: the config with its command and versions, the record log (resumable;
#: absent when a command has no records) and the summary.
CONFIG_FILE, RECORDS_FILE, SUMMARY_FILE = "config.json", "records.jsonl", "summary.json"
#: The state of a process's unfinished work units (:class:`Inflight`), one file per process as the logs.
INFLIGHT_FILE = "inflight.json"
#: Where runs shipped with the package live (under ``accessibility/data``), one folder per run name.
SHIPPED_RUNS = "runs"
#: Default parent of a command's run folders: ``results/<command>/<config hash>``.
RESULTS_DIR = "results"


@dataclass(frozen=True)
class Run:
    """A saved run, as :func:`load_run` reads it.

    Attributes
    ----------
    folder : where it lives (a path, or a package resource for a shipped run).
    config : ``config.json``: ``kind`` (the command), ``config`` (what determines the results),
        ``config_hash``, ``command`` (the command line that regenerates the folder), ``versions``
        and ``created``.
    records : the lines of ``records.jsonl`` ([] when the command keeps none).
    summary : ``summary.json`` (None while the run is unfinished).
    """

    folder: Path | Traversable
    config: dict
    records: list[dict]
    summary: dict | None

    @property
    def command(self) -> str:
        return self.config["command"]


def run_meta(kind: str, config, command: str | None = None) -> dict:
    """The ``config.json`` of a run: kind, config, its hash, the command, the versions, the machine,
    the time."""
    return {"kind": kind, "config": json.loads(to_json(config)), "config_hash": config_hash(config),
            "command": command or command_line(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "versions": _versions(), "machines": [machine()]}


#: What ``machines`` in a run's ``config.json`` lists first for a folder written before machines were
#: recorded.
UNRECORDED = "(earlier machines not recorded)"


def machine() -> str:
    """The kind of machine this process computes on, as far as it picks the kernels (and so the
    rounding) of a run: the architecture, the CPU model and, where torch is loaded, torch's CPU
    capability and the machine's first CUDA device (whether or not the run uses it). Two runs of the
    same code and command are bitwise alike only on the same kind of machine, so :func:`save_run`
    records it.

    >>> import platform
    >>> machine().startswith(platform.machine())
    True
    """
    import platform

    cpu = platform.processor()
    with contextlib.suppress(OSError):
        models = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = models[0].strip() if models else cpu
    parts = [platform.machine(), cpu]
    torch = sys.modules.get("torch")
    if torch is not None:
        parts.append(f"torch CPU {torch.backends.cpu.get_cpu_capability()}")
        if torch.cuda.is_available():
            parts.append(f"CUDA {torch.cuda.get_device_name()}")
    return ", ".join(filter(None, parts))


def default_folder(kind: str, config) -> Path:
    """``results/<kind>/<config hash>``: where a command saves a run unless told ``--save DIR``."""
    return Path(RESULTS_DIR) / kind / config_hash(config)


def check_run_folder(folder: str | os.PathLike, kind: str, config, name: str = "folder") -> Path:
    """``folder`` if a run of ``kind`` with ``config`` may be written there, else an
    :class:`~accessibility.checks.InputError` whose message starts with ``name`` and the folder.

    Allowed: a folder that does not exist yet and can be made (nothing is left behind by the test), an
    empty writable folder, or a folder holding this very run (same kind and config hash: it resumes or
    is redone). Refused: a file, a folder that cannot be written, a folder holding another run, and a
    folder holding anything without a ``config.json`` (somebody else's files are never overwritten).
    Called before any work, so that a refused run has done nothing and written nothing.
    """
    folder = Path(folder)
    where = f"{name} {folder}"
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{where} is a file, not a run folder; give a new or empty folder", name)
    if (folder / CONFIG_FILE).is_file():
        _same_run(folder, read_json(folder / CONFIG_FILE), kind, config_hash(config), name)
    elif folder.is_dir() and _contents(folder):
        raise InputError(f"{where} holds files but no {CONFIG_FILE} ({', '.join(_contents(folder)[:3])}): "
                         "not a saved run, and never overwritten; give a new or empty folder", name)
    parent = folder
    while not parent.is_dir():                   # the nearest folder that exists
        if parent.exists():
            raise InputError(f"{where} cannot be made: {parent} is a file", name)
        parent = parent.parent
    try:                                         # a real write, not permission bits (root passes those)
        os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".probe-"))
    except OSError as err:
        raise InputError(f"{where} cannot be written: {err.strerror} in {parent}", name) from None
    return folder


def _contents(folder: Path) -> list[str]:
    """The names in ``folder`` other than the temporary files of an atomic write in progress."""
    writing = lambda name: name.startswith(".") and name.endswith(".tmp")
    return sorted(p.name for p in folder.iterdir() if not writing(p.name))


def _same_run(folder: Path, old: Mapping, kind: str, digest: str, name: str = "folder") -> None:
    """Refuse a folder whose ``config.json`` (``old``) is another command's or another config's run."""
    if old.get("kind") != kind or old.get("config_hash") != digest:
        raise InputError(f"{name} {folder} holds another run ({old.get('kind')}, config hash "
                         f"{old.get('config_hash')}; this one is {kind}, {digest}): save to another folder",
                         name)


def save_run(folder: str | os.PathLike, config: Mapping, records=(), summary=None) -> Path:
    """Write a run into ``folder``: ``config.json``, ``records.jsonl`` and ``summary.json``.

    ``config`` is a mapping with at least ``kind`` and ``config``; the other entries of
    :func:`run_meta` (hash, command, versions, time) are filled in where missing. A folder is written
    only by its own run: one holding a run of another kind or config, or files without a
    ``config.json``, is refused (:class:`~accessibility.checks.InputError`; :func:`check_run_folder`
    says so before any work), so that a resumed run never mixes results and nothing else is
    overwritten. Saving again into a folder keeps its ``created`` time; when the command differs (a
    sweep extended to more m or targets), ``commands`` lists every command that wrote to the folder,
    in order, and ``command`` is the one that wrote the summary (the last one while there is none).
    ``machines`` lists every kind of machine (:func:`machine`) that wrote to it, in the order of their
    first write (after :data:`UNRECORDED` in a folder written before machines were recorded).
    ``records`` (when given) replace ``records.jsonl``; none leave an existing log alone (resumable
    commands append to it while they run). ``summary`` (a mapping or a dataclass) is written when given.
    """
    folder = Path(folder)
    meta = {**run_meta(config["kind"], config["config"]), **config}
    meta["config_hash"] = config_hash(config["config"])
    path = folder / CONFIG_FILE
    if path.exists():
        old = read_json(path)
        _same_run(folder, old, meta["kind"], meta["config_hash"])
        commands = old.get("commands", [old["command"]])
        commands += [meta["command"]] if meta["command"] != commands[-1] else []
        kept = summary is None and (folder / SUMMARY_FILE).exists()   # the summary's command stays
        machines = old.get("machines", [UNRECORDED])
        machines += [m for m in meta["machines"] if m not in machines]
        meta.update(created=old["created"], machines=machines,
                    **({"command": old["command"]} if kept else {}),
                    **({"commands": commands} if len(commands) > 1 else {}))
    elif folder.is_dir() and _contents(folder):
        raise InputError(f"{folder} holds files but no {CONFIG_FILE}: not a saved run, and never overwritten")
    write_json(path, meta)
    records = list(records)
    if records:
        lines = "".join(to_json(r, sort_keys=True) + "\n" for r in records)
        tmp = folder / f".{RECORDS_FILE}.{os.getpid()}.tmp"
        tmp.write_text(lines)
        os.replace(tmp, folder / RECORDS_FILE)
    if summary is not None:
        write_json(folder / SUMMARY_FILE, summary)
    return folder


def records_file(folder: str | os.PathLike, rank: int = 0, world: int = 1, name: str = RECORDS_FILE) -> Path:
    """The record log of one process of a run: ``records.jsonl``, or ``records-rank<r>.jsonl`` for
    rank r of a run split over ``world`` > 1 processes (each writes its own; readers merge them);
    ``name`` another per-process file (:data:`INFLIGHT_FILE`).

    >>> records_file("run").name, records_file("run", 1, 2).name
    ('records.jsonl', 'records-rank1.jsonl')
    >>> records_file("run", 1, 2, INFLIGHT_FILE).name
    'inflight-rank1.json'
    """
    stem, dot, ext = name.partition(".")
    return Path(folder) / (name if world == 1 else f"{stem}-rank{rank}{dot}{ext}")


def process_files(folder, name: str = RECORDS_FILE) -> list:
    """Every process's ``name`` file in ``folder`` (a path or a shipped resource), as
    :func:`records_file` names them (``name`` and ``<stem>-rank<r>.<ext>``; nothing else), by name.

    >>> folder = Path(tempfile.mkdtemp())
    >>> for file in ("records.jsonl", "records-rank1.jsonl", "records-old.jsonl", "inflight-rank0.json"):
    ...     _ = (folder / file).write_text("")
    >>> [p.name for p in process_files(folder)], [p.name for p in process_files(folder, INFLIGHT_FILE)]
    (['records-rank1.jsonl', 'records.jsonl'], ['inflight-rank0.json'])
    """
    folder = Path(folder) if isinstance(folder, (str, os.PathLike)) else folder
    stem, dot, ext = name.partition(".")
    own = re.compile(rf"{re.escape(stem)}(-rank\d+)?{re.escape(dot + ext)}")
    return sorted((p for p in folder.iterdir() if own.fullmatch(p.name)), key=lambda p: p.name) \
        if folder.is_dir() else []


def latest(records) -> list[dict]:
    """One record per key, in the order keys first appear: the one with the most ``steps`` (a unit of
    work extended after it was first written), the first of equals.

    >>> latest([{"key": "a", "steps": 5}, {"key": "b"}, {"key": "a", "steps": 9},
    ...         {"key": "a", "steps": 9, "x": 1}])
    [{'key': 'a', 'steps': 9}, {'key': 'b'}]
    """
    found: dict[str, dict] = {}
    for record in records:
        old = found.get(record["key"])
        if old is None or record.get("steps", 0) > old.get("steps", 0):
            found[record["key"]] = record
    return list(found.values())


def read_records(folder) -> list[dict]:
    """Every record of a run folder (a path or a shipped resource): ``records.jsonl`` and each
    rank's log, merged by key (:func:`latest`: an extended record replaces the one it extends,
    whichever log holds it); torn last lines are ignored."""
    return latest(record for log in process_files(folder) for record in _parse_log(log))


def _parse_log(log) -> list[dict]:
    """The complete records of one log file (a path or a shipped resource); a torn last line, one
    without its newline, is not a record."""
    return [json.loads(line) for line in log.read_text().splitlines(keepends=True) if line.endswith("\n")]


class Inflight:
    """The state of one process's unfinished work units, so that a killed run resumes each where it
    was instead of from its start.

    :meth:`save` rewrites the process's file (``inflight.json``, or ``inflight-rank<r>.json`` for
    rank r, as :func:`records_file` names logs) atomically with ``{key: state}``. A state is a mapping
    of JSON values and numpy arrays (stored exactly, as the base64 of their bytes) with an integer
    ``progress`` that grows as the unit advances. :meth:`states` reads the files of every process of
    the run folder and keeps, per key, the state with the largest ``progress`` (a unit taken over by
    another rank leaves its old file behind), less the keys given as done. With a timed ``log``, the
    file also holds the seconds since the log's last append, and a new Inflight carries its own file's
    seconds into the log (:meth:`RecordLog.carry`), so time spent before a kill stays in the records.
    :meth:`clear` removes the file once the process has no unit in flight, and the other processes'
    files whose every unit is done.

    >>> import tempfile
    >>> box = Inflight(tempfile.mkdtemp(), rank=1, world=2)
    >>> box.save({"a": {"progress": 3, "x": np.arange(3, dtype=np.float32)}, "b": {"progress": 1}})
    >>> state = box.states(done={"b"})
    >>> box.path.name, list(state), state["a"]["x"].dtype, state["a"]["x"].tolist()
    ('inflight-rank1.json', ['a'], dtype('float32'), [0.0, 1.0, 2.0])
    >>> box.clear(); box.states()
    {}
    """

    def __init__(self, folder: str | os.PathLike, rank: int = 0, world: int = 1,
                 log: RecordLog | None = None):
        self.folder = Path(folder)
        self.path = records_file(folder, rank, world, INFLIGHT_FILE)
        self.log = log if log is not None and log.timed else None
        if self.log is not None and self.path.is_file():
            self.log.carry(read_json(self.path).get("seconds") or 0.0)

    def _files(self) -> list[Path]:
        return process_files(self.folder, INFLIGHT_FILE)

    def save(self, states: Mapping[str, Mapping]) -> None:
        seconds = self.log.pending_seconds() if self.log is not None else None
        write_json(self.path, {"seconds": seconds, "states": {k: _pack(v) for k, v in states.items()}})

    def states(self, done=()) -> dict[str, dict]:
        found: dict[str, dict] = {}
        for path in self._files():
            for key, state in read_json(path)["states"].items():
                if key not in done and state["progress"] > found.get(key, {"progress": -1})["progress"]:
                    found[key] = state
        return {key: _unpack(state) for key, state in found.items()}

    def clear(self, done=()) -> None:
        self.path.unlink(missing_ok=True)
        for path in self._files():
            if set(read_json(path)["states"]) <= set(done):
                path.unlink(missing_ok=True)


def _pack(state: Mapping) -> dict:
    """Numpy arrays of ``state`` as ``{"dtype", "shape", "base64"}`` (exact), other values as they are."""
    return {k: {"dtype": v.dtype.str, "shape": list(v.shape),
                "base64": base64.b64encode(v.tobytes()).decode()} if isinstance(v, np.ndarray) else v
            for k, v in state.items()}


def _unpack(state: Mapping) -> dict:
    return {k: np.frombuffer(base64.b64decode(v["base64"]), dtype=v["dtype"]).reshape(v["shape"]).copy()
            if isinstance(v, dict) and "base64" in v else v for k, v in state.items()}


def _runs_root() -> Traversable:
    from accessibility import data_file

    return data_file(SHIPPED_RUNS)


def shipped_runs(*, unfinished: bool = False) -> tuple[str, ...]:
    """Names of the finished runs shipped with the package (``load_run(name)`` reads them); with
    ``unfinished=True``, those shipped part-done instead: their records so far but no summary yet
    (``load_run(name, unfinished=True)`` reads them; their command resumes them).

    >>> "geometry-smollm2-135m" in shipped_runs(), "geometry-smollm2-135m" in shipped_runs(unfinished=True)
    (True, False)
    """
    root = _runs_root()
    return tuple(sorted(p.name for p in root.iterdir() if p.joinpath(CONFIG_FILE).is_file()
                        and p.joinpath(SUMMARY_FILE).is_file() != unfinished))


def shipped_summary(name: str) -> dict | None:
    """The summary of the shipped run ``name``, or None where this version of the package does not ship
    it (a chapter then says so instead of failing).

    >>> shipped_summary("geometry-smollm2-135m")["model"], shipped_summary("no-such-run")
    ('smollm2-135m', None)
    """
    return load_run(name).summary if name in shipped_runs() else None


def load_run(folder_or_name: str | os.PathLike, *, unfinished: bool = False) -> Run:
    """Read a saved run: a folder written by a command's ``--save``, or a shipped run by name.

    An existing folder wins; otherwise a bare name is looked up among the shipped runs. A run that is
    missing is an :class:`~accessibility.checks.InputError` that names it and the command that makes
    it; so is an unfinished one (no summary yet) unless ``unfinished=True``, which reads its records so
    far with ``summary`` None.

    >>> run = load_run("geometry-smollm2-135m")
    >>> run.config["kind"], run.records, run.summary["model"]
    ('geometry', [], 'smollm2-135m')
    """
    folder = _find_run(folder_or_name)
    config = json.loads(folder.joinpath(CONFIG_FILE).read_text())
    summary_file = folder.joinpath(SUMMARY_FILE)
    if not summary_file.is_file():
        if unfinished:
            return Run(folder, config, read_records(folder), None)
        raise InputError(f"run {folder_or_name!r} is unfinished (no {SUMMARY_FILE}); finish it with "
                         f"`{config['command']}`")
    return Run(folder, config, read_records(folder), json.loads(summary_file.read_text()))


def _find_run(folder_or_name) -> Path | Traversable:
    path = Path(folder_or_name)
    if (path / CONFIG_FILE).is_file():
        return path
    name = str(folder_or_name)
    shipped = _runs_root().joinpath(name)
    if os.sep not in name and "/" not in name and shipped.joinpath(CONFIG_FILE).is_file():
        return shipped
    if path.is_dir():
        raise InputError(f"{path} is not a saved run (no {CONFIG_FILE}); a command writes one with "
                         f"--save {path}")
    kind = name.split("-")[0] if "-" in name else "<command>"
    raise InputError(f"no saved run {name!r}: not a folder, and not a shipped run "
                     f"({', '.join(shipped_runs())}); `accessibility {kind} ... --save {name}` writes it")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0]}
    for name in ("accessibility", "torch", "transformers", "numpy"):
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found
