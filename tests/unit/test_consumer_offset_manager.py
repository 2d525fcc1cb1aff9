"""ConsumerOffsetManager (commit, query, the file) and the QUERY_CONSUMER_OFFSET answer rule."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aiorocketmq.broker.offset import ConsumerOffsetManager, query_offset_answer
from tests.helpers import capture_logs


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        self.now += 1
        return self.now


def manager(tmp_path: Path) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(tmp_path, now_ms=Clock())


def test_commit_and_query(tmp_path: Path) -> None:
    m = manager(tmp_path)
    assert m.query_offset("G", "T", 0) == -1
    m.commit_offset("10.0.0.1:1", "G", "T", 0, 42)
    m.commit_offset("10.0.0.1:1", "G", "T", 3, 7)
    assert m.query_offset("G", "T", 0) == 42
    assert m.query_offset("G", "T", 1) == -1
    assert m.query_offset("H", "T", 0) == -1
    assert m.offset_table == {"T@G": {0: 42, 3: 7}}
    assert m.query_offset_table("G", "T") == {0: 42, 3: 7}


def test_commit_is_a_plain_put_and_a_lower_offset_logs_notifyme(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit_offset("h:1", "G", "T", 0, 100)
    with capture_logs() as logs:
        m.commit_offset("h:1", "G", "T", 0, 120)
    assert logs == []
    with capture_logs() as logs:
        m.commit_offset("h:2", "G", "T", 0, 90)
    assert m.query_offset("G", "T", 0) == 90  # stored anyway: not monotonic
    assert len(logs) == 1
    entry = logs[0]
    assert entry["event"].startswith("[NOTIFYME]")
    assert entry["log_level"] == "warning"
    assert (entry["key"], entry["queue_id"]) == ("T@G", 0)
    assert (entry["request_offset"], entry["store_offset"]) == (90, 120)
    assert entry["client_host"] == "h:2"


def test_persist_load_round_trip(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit_offset("h", "G", "T", 0, 5)
    m.commit_offset("h", "G", "T", 1, 6)
    m.commit_offset("h", "H", "%RETRY%H", 0, 1)
    m.persist()

    path = tmp_path / "config" / "consumerOffset.json"
    assert m.config_file_path == path
    data = json.loads(path.read_text())
    assert data["offsetTable"] == {"%RETRY%H@H": {"0": 1}, "T@G": {"0": 5, "1": 6}}
    assert data["dataVersion"]["counter"] == 3
    assert data["dataVersion"]["timestamp"] > 1_000

    loaded = ConsumerOffsetManager(tmp_path)
    assert loaded.load() is True
    assert loaded.offset_table == m.offset_table
    assert loaded.data_version == m.data_version


def test_persist_is_atomic_and_keeps_the_previous_file_as_bak(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit_offset("h", "G", "T", 0, 1)
    m.persist()
    first = m.config_file_path.read_text()
    m.commit_offset("h", "G", "T", 0, 2)
    m.persist()

    names = sorted(p.name for p in m.config_file_path.parent.iterdir())
    assert names == ["consumerOffset.json", "consumerOffset.json.bak"]  # no temporary left
    bak = m.config_file_path.with_name("consumerOffset.json.bak")
    assert bak.read_text() == first
    assert json.loads(m.config_file_path.read_text())["offsetTable"] == {"T@G": {"0": 2}}


def test_a_crash_before_the_rename_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = manager(tmp_path)
    m.commit_offset("h", "G", "T", 0, 1)
    m.persist()
    before = m.config_file_path.read_text()

    real_replace = os.replace

    def crash_on_main_rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == m.config_file_path:
            raise OSError("power cut")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_main_rename)
    m.commit_offset("h", "G", "T", 0, 2)
    with pytest.raises(OSError):
        m.persist()
    monkeypatch.undo()

    assert m.config_file_path.read_text() == before
    reloaded = ConsumerOffsetManager(tmp_path)
    assert reloaded.load() is True
    assert reloaded.query_offset("G", "T", 0) == 1


def test_load_falls_back_to_bak_when_the_file_is_corrupt(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit_offset("h", "G", "T", 0, 1)
    m.persist()
    m.commit_offset("h", "G", "T", 0, 2)
    m.persist()
    m.config_file_path.write_text('{"offsetTable": {"T@G": {"0": ')  # torn write

    reloaded = ConsumerOffsetManager(tmp_path)
    with capture_logs() as logs:
        assert reloaded.load() is True
    assert reloaded.query_offset("G", "T", 0) == 1
    assert any("try to load backup file" in e["event"] for e in logs)


def test_load_with_no_file_is_an_empty_store(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(tmp_path)
    assert m.load() is True
    assert m.offset_table == {}


def test_load_fails_when_file_and_bak_are_both_unreadable(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(tmp_path)
    m.config_file_path.parent.mkdir(parents=True)
    m.config_file_path.write_text("not json")
    m.config_file_path.with_name("consumerOffset.json.bak").write_text('{"offsetTable": 3}')
    assert m.load() is False


def test_load_reads_rocketmqs_own_file_with_bare_integer_keys(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(tmp_path)
    m.config_file_path.parent.mkdir(parents=True)
    m.config_file_path.write_text(
        '{\n\t"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1700000000000},\n'
        '\t"offsetTable":{\n\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:249,'
        "2:251,3:250\n\t\t}\n\t}\n}"
    )
    assert m.load() is True
    assert m.query_offset("please_rename_unique_group_name_4", "TopicTest", 2) == 251
    assert m.data_version.counter == 7


def test_which_topic_which_group_and_remove(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit_offset("h", "G", "T1", 0, 1)
    m.commit_offset("h", "G", "T2", 0, 1)
    m.commit_offset("h", "H", "T1", 0, 1)
    m.commit_pull_offset("h", "G", "T1", 0, 9)
    assert m.which_topic_by_consumer("G") == {"T1", "T2"}
    assert m.which_group_by_topic("T1") == {"G", "H"}
    assert m.which_group_by_topic("nope") == set()

    assert sorted(m.remove_offset("G")) == ["T1@G", "T2@G"]
    assert m.which_topic_by_consumer("G") == set()
    assert m.pull_offset_table == {}
    assert m.which_group_by_topic("T1") == {"H"}


def test_pull_offset_falls_back_to_committed(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.commit_offset("h", "G", "T", 0, 10)
    assert m.query_pull_offset("G", "T", 0) == 10
    m.commit_pull_offset("h", "G", "T", 0, 15)
    assert m.query_pull_offset("G", "T", 0) == 15
    assert m.query_pull_offset("G", "T", 1) == -1
    m.persist()
    assert "pullOffsetTable" not in json.loads(m.config_file_path.read_text())


# ---- QUERY_CONSUMER_OFFSET: the "zero if young" rule -------------------------------------


@pytest.mark.parametrize(
    ("stored", "set_zero", "min_offset", "answer"),
    [
        (42, False, 100, 42),  # a stored offset wins, whatever else holds
        (0, False, 5, 0),
        (-1, False, 0, None),  # the client asked not to get zero
        (-1, True, 0, 0),  # a young queue, empty or not: a new group reads from the start
        (-1, True, -1, 0),
        (-1, True, 10, None),  # the head was deleted: the client's ConsumeFromWhere decides
    ],
)
def test_query_offset_answer(stored: int, set_zero: bool, min_offset: int, answer: int | None) -> None:
    assert query_offset_answer(stored, set_zero, min_offset) == answer
