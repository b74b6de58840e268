"""The event history file: size-based rotation and sequence numbers that continue across
restarts (symphony_tui/scheduler/history/event_file.py)."""

from __future__ import annotations

import json

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.scheduler.history.event_file import RotatingJsonl, last_seq_in
from symphony_tui.scheduler.history.eventlog import EventHistory


def event(n: int) -> AgentEvent:
    return AgentEvent(kind=EventKind.TURN_STARTED, message=f"event {n}", issue_id="i-1")


def seqs(path) -> list[int]:
    return [json.loads(line)["seq"] for line in path.read_text().splitlines() if line]


def test_sequence_numbers_continue_after_a_restart(tmp_path):
    path = tmp_path / "events.jsonl"
    first = EventHistory(jsonl_path=path)
    assert [first.append(event(n)).seq for n in range(3)] == [1, 2, 3]
    first.close()
    second = EventHistory(jsonl_path=path)
    assert second.last_seq == 3
    assert second.append(event(4)).seq == 4
    second.close()
    assert seqs(path) == [1, 2, 3, 4]


def test_a_torn_last_line_does_not_reset_the_numbering(tmp_path):
    path = tmp_path / "events.jsonl"
    log = EventHistory(jsonl_path=path)
    for n in range(2):
        log.append(event(n))
    log.close()
    with path.open("a") as f:
        f.write('{"kind": "notice", "seq": 9')  # the process died mid-write
    assert last_seq_in(path) == 2
    assert EventHistory(jsonl_path=path).append(event(3)).seq == 3


def test_the_file_rotates_by_size_and_keeps_the_newest_backups(tmp_path):
    path = tmp_path / "events.jsonl"
    line = json.dumps({"seq": 0, "pad": "x" * 80})
    file = RotatingJsonl(path, max_bytes=300, backups=2)
    for n in range(1, 13):
        file.write(line.replace('"seq": 0', f'"seq": {n}'))
    file.close()
    backups = sorted(p.name for p in tmp_path.iterdir())
    assert backups == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"]
    assert all(p.stat().st_size <= 300 for p in tmp_path.iterdir())
    current, one, two = (seqs(tmp_path / name) for name in backups)
    assert current[-1] == 12 and one[-1] == current[0] - 1 and two[-1] == one[0] - 1
    # right after a rotation the current file may be empty: the newest backup numbers on
    (tmp_path / "events.jsonl").write_text("")
    assert RotatingJsonl(path, max_bytes=300, backups=2).last_seq == one[-1]


def test_an_unwritable_history_is_dropped_and_the_log_goes_on(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    log = EventHistory(jsonl_path=blocker / "events.jsonl")
    assert log.append(event(1)).seq == 1
    assert "event file unavailable" in caplog.text


def test_a_reopened_history_holds_its_newest_events_within_the_ring_budget(tmp_path):
    path = tmp_path / "events.jsonl"
    first = EventHistory(jsonl_path=path)
    for n in range(10):
        first.append(event(n))
    first.append(AgentEvent(kind=EventKind.TOKEN_USAGE, message="quiet", issue_id="i-1"))
    first.close()
    with path.open("a") as f:
        f.write("not an event\n")
    again = EventHistory(jsonl_path=path, ring_size=4)
    assert [e.message for e in again.since(0)] == [f"event {n}" for n in range(6, 10)]
    assert again.completed_before == []
    assert again.append(event(11)).seq == 12
    assert [e.seq for e in again.since(9)] == [10, 12]
