"""Pure mapping of codex payloads to domain values."""

from __future__ import annotations

from datetime import UTC, datetime

from symphony_tui.agents.codex import events as ev
from symphony_tui.domain import EventKind


def test_cap_marks_truncation():
    assert ev.cap("abc", 5) == "abc"
    out = ev.cap("x" * 10, 4)
    assert out.startswith("xxxx") and "truncated 6 characters" in out
    assert ev.cap(None) == ""


def test_command_output_keeps_its_end_from_a_line_start():
    lines = [f"line {i:04d}" for i in range(2000)]
    out = ev.cap_tail("\n".join(lines), 1000)
    assert out.endswith("line 1999")  # the end, where errors are
    body = out.split("\n")
    assert body[0].startswith("[... ") and body[0].endswith("characters cut]")
    assert all(line.startswith("line ") and len(line) == 9 for line in body[1:])  # whole lines
    assert ev.cap_tail("short", 1000) == "short" and ev.cap_tail(None) == ""


def test_token_usage_ignores_garbage():
    u = ev.token_usage({"inputTokens": 10, "outputTokens": "7", "totalTokens": -1})
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (10, 0, 0)
    assert ev.token_usage(None).is_zero


def test_rate_limits_null_payload_as_sent_with_a_custom_provider():
    raw = {
        "limitId": "codex",
        "limitName": None,
        "primary": None,
        "secondary": None,
        "credits": None,
        "planType": None,
    }
    rl = ev.rate_limits(raw)
    assert rl.source == "codex" and rl.limit_id == "codex"
    assert rl.primary is None and rl.has_credits is None and rl.raw == raw


def test_rate_limit_reset_in_seconds_or_milliseconds():
    secs = ev.rate_limits({"primary": {"resetsAt": 1_800_000_000}}).primary
    millis = ev.rate_limits({"secondary": {"resetsAt": 1_800_000_000_000}}).secondary
    expected = datetime.fromtimestamp(1_800_000_000, tz=UTC)
    assert secs.resets_at == expected and millis.resets_at == expected


def test_item_events_and_synthetic_close():
    cmd = {
        "type": "commandExecution",
        "id": "c",
        "command": "ls",
        "exitCode": 2,
        "status": "failed",
        "aggregatedOutput": "oops",
    }
    done = ev.item_event(cmd, "completed")
    assert done.kind == EventKind.COMMAND_COMPLETED
    assert done.payload.exit_code == 2 and done.payload.output == "oops"
    assert ev.item_event({"type": "agentMessage", "id": "m"}, "started") is None
    assert ev.item_event({"type": "userMessage", "id": "u"}, "completed") is None
    reasoning = ev.item_event({"type": "reasoning", "id": "r", "summary": ["a", "b"]}, "completed")
    assert reasoning.kind == EventKind.REASONING and reasoning.message == "a\nb"
    other = ev.item_event({"type": "webSearch", "id": "w"}, "completed")
    assert other.kind == EventKind.NOTIFICATION
    closed = ev.item_closed_event(
        {"type": "dynamicToolCall", "id": "t", "tool": "x"}, "interrupted"
    )
    assert closed.kind == EventKind.TOOL_CALL and closed.payload.status == "interrupted"


def test_plan_event():
    e = ev.plan_event({"explanation": "why", "plan": [{"step": "a", "status": "completed"}]})
    assert e.kind == EventKind.PLAN and e.message == "why\n[completed] a"


def test_token_usage_derives_the_count_a_report_omits():
    # A report with input and output but no total: the total is their sum, not 0.
    u = ev.token_usage({"inputTokens": 120, "cachedInputTokens": 20, "outputTokens": 30})
    assert (u.input_tokens, u.cached_input_tokens, u.output_tokens, u.total_tokens) == (
        120,
        20,
        30,
        150,
    )
    # Total and one side given: the other side follows.
    assert ev.token_usage({"totalTokens": 150, "outputTokens": 30}).input_tokens == 120
    assert ev.token_usage({"totalTokens": 150, "inputTokens": 120}).output_tokens == 30
    # A reported total is kept as reported.
    assert ev.token_usage({"inputTokens": 1, "outputTokens": 2, "totalTokens": 9}).total_tokens == 9
    assert ev.token_usage({"totalTokens": 5}).total_tokens == 5
