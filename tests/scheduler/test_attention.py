"""What needs the operator (scheduler/attention.py): alerts from snapshot changes, and
``notify.command`` run with the facts in its environment."""

from __future__ import annotations

from datetime import UTC, datetime

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import ApprovalKind, ApprovalRequest, RetryRow, Snapshot
from symphony_tui.domain.snapshot import HostRow, RunningRow
from symphony_tui.scheduler.attention import AttentionWatch

from .conftest import make_issue

T = datetime(2026, 1, 1, tzinfo=UTC)


def snap(**fields) -> Snapshot:
    return Snapshot(generated_at=T, **fields)


def approval(n: int, kind=ApprovalKind.COMMAND, summary="run make deploy") -> ApprovalRequest:
    return ApprovalRequest(
        id=f"ap-{n}", issue_id="id-1", issue_identifier="ABC-1", kind=kind, summary=summary
    )


def retry(attempt: int, error: str | None = "turn failed") -> RetryRow:
    return RetryRow(
        issue_id="id-1", issue_identifier="ABC-1", attempt=attempt, due_at=T, error=error
    )


def test_a_new_approval_alerts_once_and_a_question_is_its_own_kind():
    watch = AttentionWatch(lambda: 3)
    (first,) = watch.alerts(snap(approvals=(approval(1),)))
    assert (first.kind, first.issue_identifier) == ("approval", "ABC-1")
    assert first.title == "ABC-1: approval needed" and first.message == "run make deploy"
    assert watch.alerts(snap(approvals=(approval(1),))) == []  # still the same one
    (question,) = watch.alerts(
        snap(approvals=(approval(1), approval(2, ApprovalKind.USER_INPUT, "which db?")))
    )
    assert question.kind == "question" and question.message == "which db?"
    assert watch.alerts(snap()) == []
    assert [a.kind for a in watch.alerts(snap(approvals=(approval(1),)))] == ["approval"]


def test_agent_text_in_an_alert_is_one_inert_line():
    watch = AttentionWatch(lambda: 3)
    evil = "rm -rf \x1b]9;pwned\x07 /\x1b[31m now\nand \x9b2J more"
    (alert,) = watch.alerts(snap(approvals=(approval(1, summary=evil),)))
    assert alert.message == "rm -rf / now and more"  # C1 CSI included
    for text in alert.environment().values():
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in text)


def test_failing_attempt_after_attempt_alerts_once_at_the_threshold():
    watch = AttentionWatch(lambda: 3)
    assert watch.alerts(snap(retrying=(retry(2),))) == []
    (alert,) = watch.alerts(snap(retrying=(retry(3),)))
    assert alert.kind == "failed" and alert.title == "ABC-1: failed 3 times in a row"
    assert watch.alerts(snap(retrying=(retry(4),))) == []  # still failing: said already
    assert watch.alerts(snap(retrying=(retry(1, error=None),))) == []  # a continuation
    assert [a.kind for a in watch.alerts(snap(retrying=(retry(5),)))] == ["failed"]


def test_the_tracker_becoming_unreachable_alerts_on_the_change_only():
    watch = AttentionWatch(lambda: 3)
    (alert,) = watch.alerts(snap(tracker_error="linear: 503 service unavailable"))
    assert alert.kind == "tracker" and alert.issue_identifier is None
    assert watch.alerts(snap(tracker_error="linear: 502 bad gateway")) == []
    assert watch.alerts(snap()) == []
    assert len(watch.alerts(snap(tracker_error="down again"))) == 1


def test_a_run_held_by_its_budget_alerts_once_per_hold():
    watch = AttentionWatch(lambda: 3)
    working = RunningRow(issue_id="id-1", issue_identifier="ABC-1", state="Todo")
    held = working.model_copy(update={"budget_reached": "61,200 of 50,000 tokens per issue"})
    assert watch.alerts(snap(running=(working,))) == []
    (alert,) = watch.alerts(snap(running=(held,)))
    assert (alert.kind, alert.issue_identifier) == ("budget", "ABC-1")
    assert alert.title == "ABC-1: held by its token budget"
    assert alert.message == "61,200 of 50,000 tokens per issue"
    assert watch.alerts(snap(running=(held,))) == []  # still the same hold
    assert watch.alerts(snap(running=(working,))) == []  # extended: goes on
    assert [a.kind for a in watch.alerts(snap(running=(held,)))] == ["budget"]  # held again


def test_a_worker_host_going_down_alerts_on_the_change_only():
    watch = AttentionWatch(lambda: 3)
    up = HostRow(name="build-1", up=True)
    down = HostRow(name="build-1", up=False, last_error="ssh: connect to host build-1: refused")
    assert watch.alerts(snap(hosts=(up,))) == []
    (alert,) = watch.alerts(snap(hosts=(down,)))
    assert alert.kind == "host" and alert.issue_identifier is None
    assert alert.title == "worker host build-1 down" and "refused" in alert.message
    assert watch.alerts(snap(hosts=(down,))) == []
    assert watch.alerts(snap(hosts=(up,))) == []
    assert len(watch.alerts(snap(hosts=(down,)))) == 1


async def test_notify_command_runs_with_the_alert_in_its_environment(make_harness, tmp_path):
    out = tmp_path / "notified.txt"

    async def asking(session, prompt, turn):
        await session.host.request_approval(
            ApprovalRequest(id="ap-1", issue_id="", kind=ApprovalKind.COMMAND, command="make x")
        )
        return TurnResult(TurnStatus.COMPLETED)

    front = (
        "agent:\n  max_turns: 1\n"
        "notify:\n"
        f'  command: \'printf "%s|%s|%s\\n" "$SYMPHONY_ALERT_KIND" "$SYMPHONY_ALERT_ISSUE"'
        f' "$SYMPHONY_ALERT_MESSAGE" >> {out}\'\n'
    )
    h = make_harness([make_issue(1)], script=asking, front=front)
    await h.start()
    await h.settle()
    await h.until(lambda: out.exists() and out.read_text().strip(), timeout=15)
    assert out.read_text().splitlines() == ["approval|ABC-1|make x"]
