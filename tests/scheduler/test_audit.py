"""The audit log (scheduler/audit.py): what is kept, rotation, reading back on start, and
every command through the port being audited with who and how it went."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from symphony_tui.domain.commands import Approve, Deny, PauseDispatch, Stop
from symphony_tui.scheduler.audit import AuditLog, describe, local_operator
from tests.scheduler.conftest import make_issue


def test_entries_are_written_kept_and_read_back(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, now=lambda: datetime(2026, 5, 1, tzinfo=UTC))
    log.record("stop", who="ann@box", issue="ABC-1", ok=False, message="not running\x1b[2J")
    log.close()
    line = json.loads(path.read_text().splitlines()[0])
    assert line["who"] == "ann@box" and line["what"] == "stop" and line["ok"] is False
    assert "\x1b" not in line["message"]  # one line, no escapes, before it is kept
    again = AuditLog(path)
    assert [(e.what, e.issue) for e in again.recent()] == [("stop", "ABC-1")]
    again.close()


def test_the_file_rotates_by_size(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=600, backups=2, keep=3)
    for n in range(30):
        log.record("refresh", who="ann@box", detail=f"n={n}")
    log.close()
    assert path.exists() and (tmp_path / "audit.jsonl.1").exists()
    assert (tmp_path / "audit.jsonl.2").exists() and not (tmp_path / "audit.jsonl.3").exists()
    assert path.stat().st_size <= 600
    assert [e.detail for e in log.recent()] == ["n=27", "n=28", "n=29"]
    assert log.recent(0) == []


def test_a_torn_line_is_skipped_on_start(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.record("pause_dispatch", who="ann@box")
    log.close()
    with path.open("a") as f:
        f.write('{"v": 1, "at": "2026-')
    assert [e.what for e in AuditLog(path).recent()] == ["pause_dispatch"]


def test_describe_names_the_issue_and_the_other_fields():
    assert describe(Stop(issue_id="ABC-1")) == ("ABC-1", "")
    issue, detail = describe(Deny(approval_id="ap-1", message="no"))
    assert issue is None and 'approval_id="ap-1"' in detail and 'message="no"' in detail
    assert "@" in local_operator()


async def test_every_command_sent_is_audited_with_its_result(make_harness):
    h = make_harness([make_issue(1)])
    await h.start()
    await h.settle()
    ok = await h.orch.send(PauseDispatch(paused=True))
    refused = await h.orch.send(Stop(issue_id="NOPE-9"), who="bob@far", via="api 10.0.0.2")
    entries = await h.orch.audit_entries()
    assert [(e.what, e.ok) for e in entries] == [("pause_dispatch", ok.ok), ("stop", False)]
    assert entries[0].who == local_operator() and entries[0].via == "console"
    assert entries[1].who == "bob@far" and entries[1].via == "api 10.0.0.2"
    assert entries[1].issue == "NOPE-9" and entries[1].message == refused.message
    noted = await h.orch.note_action("export", detail="events.txt", message="12 lines")
    assert noted.who == local_operator() and (await h.orch.audit_entries(1)) == [noted]


async def test_a_command_naming_an_issue_by_id_is_audited_by_its_identifier(make_harness):
    # The console's own actions (a shell, an export) name the identifier: commands too, so
    # one issue reads the same everywhere in the log.
    h = make_harness([make_issue(1)])
    await h.start()
    await h.settle()
    await h.orch.send(Stop(issue_id="id-1"))
    await h.orch.send(Stop(issue_id="ABC-1"))
    entries = await h.orch.audit_entries()
    assert [e.issue for e in entries[-2:]] == ["ABC-1", "ABC-1"]


async def test_an_approval_answered_is_audited_with_its_issue(make_harness):
    # Approve / Deny / Answer name an approval, not an issue: the entry still says whose
    # (the console's audit screen and GET /api/v1/audit share these entries).
    from tests.scheduler.test_approvals_and_tokens import make_asking_script

    h = make_harness(
        [make_issue(1)], script=make_asking_script([]), front="agent:\n  max_turns: 2\n"
    )
    await h.start()
    await h.settle()
    await h.orch.send(Approve(approval_id=h.orch.snapshot().approvals[0].id))
    await h.settle()
    await h.orch.send(Deny(approval_id=h.orch.snapshot().approvals[0].id), via="api 10.0.0.2")
    await h.orch.send(Approve(approval_id="ap-gone"))  # refused: nobody's approval
    entries = await h.orch.audit_entries()
    assert [(e.what, e.issue, e.ok) for e in entries[-3:]] == [
        ("approve", "ABC-1", True),
        ("deny", "ABC-1", True),
        ("approve", None, False),
    ]
