"""Typed event payloads: the wire form is versioned and format-1 lines still load."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from symphony_tui.domain import AgentEvent, EventKind, TokenUsage
from symphony_tui.domain.events import EVENT_FORMAT
from symphony_tui.domain.payloads import (
    ApprovalAnswered,
    CommandEnded,
    FileChange,
    FileEdit,
    HookResult,
    ItemNote,
    NoteDelivered,
    Plan,
    PlanStep,
    RunEnded,
    ServerStatus,
    SessionStarted,
    TokenReport,
    TurnDiff,
    TurnEnded,
    plan_status,
)

# Lines as the scheduler wrote them before payloads were typed (format 1: no ``v``).
V1_TOKENS = (
    '{"kind":"token_usage","message":"tokens: 500 total (0 last)","issue_id":"i1",'
    '"issue_identifier":"MT-1","session_id":"th-1-tu-1","at":"2026-11-30T10:00:00Z",'
    '"seq":7,"data":{"usage":{"input_tokens":400,"cached_input_tokens":0,'
    '"output_tokens":100,"reasoning_tokens":0,"total_tokens":500,"cost_usd":null},'
    '"last":{"input_tokens":0,"cached_input_tokens":0,"output_tokens":0,'
    '"reasoning_tokens":0,"total_tokens":0,"cost_usd":null},"model_context_window":null,'
    '"turn_id":null,"attached":true}}'
)
V1_OPENHANDS_REJECTED = (
    '{"kind":"turn_cancelled","message":"rejected by operator: not that file",'
    '"issue_id":"i1","issue_identifier":"MT-1","session_id":"c1","at":null,"seq":9,'
    '"data":{"conversation_id":"c1","outcome":"rejected_by_operator",'
    '"reason":"not that file"}}'
)
V1_CODEX_FAILED = (
    '{"kind":"turn_failed","message":"turn tu-2 failed: boom","issue_id":"i1",'
    '"issue_identifier":"MT-1","session_id":null,"at":null,"seq":10,'
    '"data":{"turn_id":"tu-2","status":"failed","error":"boom"}}'
)
V1_PLAN = (
    '{"kind":"plan","message":"[inProgress] a","seq":3,'
    '"data":{"plan":[{"step":"a","status":"inProgress"},{"step":"b","status":"pending"}]}}'
)
V1_HOOK = (
    '{"kind":"hook","message":"before_run: exit 2 in 5 ms","issue_id":"i1","seq":4,'
    '"data":{"hook":"before_run","ok":false,"exit_code":2,"output":"lint failed\\n"}}'
)
V1_FILES = (
    '{"kind":"file_change","message":"editing a.py","seq":5,"data":{"event_id":"e9",'
    '"oh_kind":"ActionEvent","item_id":"e9","files":["a.py"],"command":"edit a.py"}}'
)


def test_a_format_1_token_line_loads_into_a_token_report():
    event = AgentEvent.model_validate_json(V1_TOKENS)
    assert (event.v, event.kind, event.seq, event.issue_identifier) == (
        EVENT_FORMAT,
        EventKind.TOKEN_USAGE,
        7,
        "MT-1",
    )
    assert isinstance(event.payload, TokenReport)
    assert event.payload.attached is True
    assert event.payload.usage == TokenUsage(input_tokens=400, output_tokens=100, total_tokens=500)


def test_format_1_turn_ends_of_every_backend_load_as_one_shape():
    rejected = AgentEvent.model_validate_json(V1_OPENHANDS_REJECTED).payload
    assert rejected == TurnEnded(
        status="failed", outcome="rejected_by_operator", rejection="not that file"
    )
    failed = AgentEvent.model_validate_json(V1_CODEX_FAILED).payload
    assert failed == TurnEnded(status="failed", outcome="failed", reason="boom", turn_id="tu-2")


def test_format_1_plans_hooks_and_file_lists_load_typed():
    plan = AgentEvent.model_validate_json(V1_PLAN).payload
    assert plan == Plan(
        steps=(PlanStep(step="a", status="in_progress"), PlanStep(step="b", status="pending"))
    )
    hook = AgentEvent.model_validate_json(V1_HOOK).payload
    assert hook == HookResult(hook="before_run", ok=False, exit_code=2, output="lint failed\n")
    files = AgentEvent.model_validate_json(V1_FILES).payload
    assert isinstance(files, FileChange) and files.paths == ["a.py"]
    assert (files.item_id, files.wire_id) == ("e9", "e9")


def test_a_format_1_payload_that_does_not_fit_loses_only_the_payload():
    line = '{"kind":"token_usage","message":"tokens","seq":2,"data":{"usage":"lots"}}'
    event = AgentEvent.model_validate_json(line)
    assert (event.kind, event.message, event.seq, event.payload) == (
        EventKind.TOKEN_USAGE,
        "tokens",
        2,
        None,
    )


def test_the_wire_form_carries_its_version_and_round_trips():
    event = AgentEvent(
        kind=EventKind.COMMAND_COMPLETED,
        message="ls (exit 0)",
        seq=3,
        payload=CommandEnded(item_id="c1", command="ls", exit_code=0, output="a\n"),
    )
    wire = json.loads(event.model_dump_json())
    assert wire["v"] == EVENT_FORMAT and wire["payload"]["type"] == "command_ended"
    assert AgentEvent.model_validate_json(event.model_dump_json()) == event


def test_payloads_are_frozen_and_a_wrong_shape_is_refused():
    note = NoteDelivered(turn_id="t")
    with pytest.raises(ValidationError):
        note.turn_id = "u"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="approval_id"):
        AgentEvent.model_validate(
            {"v": 2, "kind": "approval_resolved", "payload": {"type": "approval_answered"}}
        )
    ok = AgentEvent.model_validate(
        {
            "v": 2,
            "kind": "approval_resolved",
            "payload": {"type": "approval_answered", "approval_id": "a", "decision": "accept"},
        }
    )
    assert ok.payload == ApprovalAnswered(approval_id="a", decision="accept")


@pytest.mark.parametrize(
    ("status", "rejection", "by_operator", "outcome", "kind"),
    [
        ("completed", None, False, "completed", "turn_completed"),
        ("interrupted", None, False, "cancelled", "turn_cancelled"),
        ("interrupted", "no", True, "cancelled", "turn_cancelled"),
        ("failed", "no", True, "rejected_by_operator", "turn_cancelled"),
        ("failed", "no", False, "declined", "turn_failed"),
        ("failed", None, False, "failed", "turn_failed"),
    ],
)
def test_a_turn_end_has_one_outcome_and_kind_for_every_backend(
    status, rejection, by_operator, outcome, kind
):
    end = TurnEnded.of(status, "why", rejection=rejection, rejected_by_operator=by_operator)
    assert (end.outcome, end.kind_name, end.reason) == (outcome, kind, "why")


def test_plan_steps_use_backend_neutral_words():
    assert [plan_status(s) for s in ("inProgress", "in_progress", "completed", "x", None)] == [
        "in_progress",
        "in_progress",
        "completed",
        "pending",
        "pending",
    ]
    plan = Plan(steps=(PlanStep(step="a", status="completed"), PlanStep(step="b")))
    assert plan.progress == (1, "b")


def test_session_and_run_payloads_keep_their_ids():
    started = SessionStarted(thread_id="th", session_id="th", resumed=True, pending_approvals=1)
    event = AgentEvent(kind=EventKind.SESSION_STARTED, payload=started)
    assert AgentEvent.model_validate_json(event.model_dump_json()).payload == started
    ended = RunEnded(outcome="normal", status="succeeded")
    assert ended.error is None
    edit = FileChange(changes=(FileEdit(path="a"), FileEdit(path="a", diff="+x")))
    assert edit.paths == ["a"]


def test_format_1_notifications_load_by_what_they_carried():
    def load(data: str):
        return AgentEvent.model_validate_json(
            '{"kind":"notification","message":"m","data":' + data + "}"
        ).payload

    assert load('{"conversation_id":"c1","status":"running"}') == ServerStatus(status="running")
    assert load('{"diff":"+x"}') == TurnDiff(diff="+x")
    assert load('{"operator_note":true,"turn_id":"t1"}') == NoteDelivered(turn_id="t1")
    assert load('{"item_id":"w","item_type":"webSearch","status":"completed"}') == ItemNote(
        item_id="w", item_type="webSearch", status="completed"
    )
