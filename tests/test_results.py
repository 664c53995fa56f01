"""Record logs survive a kill in mid-write: a torn last line is ignored, then cut before the next append."""

import json

from accessibility.results import RecordLog


def test_torn_last_line_is_ignored_then_cut(tmp_path):
    log = RecordLog(tmp_path / "runs.jsonl")
    log.append({"key": "a", "n": 1})
    log.append({"key": "b", "n": 2})
    with log.path.open("a") as f:
        f.write('{"key": "c", "n": ')                       # a kill in mid-write
    assert [r["key"] for r in RecordLog(log.path)] == ["a", "b"]
    resumed = RecordLog(log.path)
    resumed.append({"key": "c", "n": 3})
    lines = log.path.read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["a", "b", "c"]
    resumed.append({"key": "d", "n": 4})                    # an intact tail is left alone
    assert [r["n"] for r in RecordLog(log.path)] == [1, 2, 3, 4]
