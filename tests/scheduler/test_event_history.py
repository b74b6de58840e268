"""The scheduler's event history file: typed payloads written versioned, old lines read."""

from __future__ import annotations

import json
import logging

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.events import EVENT_FORMAT
from symphony_tui.domain.payloads import CommandEnded, FileChange, FileEdit, HookResult
from symphony_tui.observability.redact import default_redactor, register_secret
from symphony_tui.scheduler.history.eventlog import EventHistory, read_history

# Written by the scheduler before payloads were typed (format 1).
V1_LINE = (
    '{"kind":"hook","message":"after_run: exit 2 in 5 ms","issue_id":"i1",'
    '"issue_identifier":"MT-1","session_id":null,"at":"2026-11-30T10:00:00Z","seq":4,'
    '"data":{"hook":"after_run","ok":false,"exit_code":2,"output":"lint failed\\n"}}'
)


def test_the_history_file_is_versioned_and_old_lines_still_load(tmp_path, caplog):
    path = tmp_path / "events.jsonl"
    path.write_text(V1_LINE + "\n" + "not json\n", encoding="utf-8")
    history = EventHistory(jsonl_path=path)
    ended = CommandEnded(item_id="c1", command="make", exit_code=1, output="boom")
    history.append(
        AgentEvent(kind=EventKind.COMMAND_COMPLETED, message="make (exit 1)", payload=ended),
        issue_id="i1",
    )
    history.close()
    written = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    assert written["v"] == EVENT_FORMAT and written["payload"]["type"] == "command_ended"

    with caplog.at_level(logging.WARNING):
        old, new = list(read_history(path))
    assert old.payload == HookResult(
        hook="after_run", ok=False, exit_code=2, output="lint failed\n"
    )
    assert (old.seq, old.issue_identifier) == (4, "MT-1")
    assert new.payload == ended and new.seq == old.seq + 1  # seq goes on across restarts
    assert any("events.jsonl:2: not an event" in r.getMessage() for r in caplog.records)


def test_secrets_in_payload_text_are_masked_and_clean_payloads_are_kept_as_built():
    register_secret("s3cr3t-value-123")
    try:
        history = EventHistory()
        leaky = FileChange(changes=(FileEdit(path="env", diff="+KEY=s3cr3t-value-123"),))
        out = history.append(AgentEvent(kind=EventKind.FILE_CHANGE, payload=leaky))
        assert isinstance(out.payload, FileChange)
        assert "s3cr3t-value-123" not in (out.payload.changes[0].diff or "")
        clean = CommandEnded(command="ls", exit_code=0, output="a\n")
        kept = history.append(AgentEvent(kind=EventKind.COMMAND_COMPLETED, payload=clean))
        assert kept.payload is clean
    finally:
        default_redactor().clear()
