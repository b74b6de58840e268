"""The part folder on frames recorded from the real server (1.18.33; ``frames/``): one
session with a text turn, an accepted ``bash`` call, a rejection with a message and an
abort while a permission was pending. Live frames and the message list (what a reconcile
reads) must report the same things, each once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from symphony_tui.agents.opencode.normalize import PartFolder, step_usage
from symphony_tui.agents.opencode.session import error_reason, session_of
from symphony_tui.domain import EventKind, TokenUsage

FRAMES = Path(__file__).parent / "frames"


def live_events() -> list[dict]:
    return [json.loads(line) for line in (FRAMES / "turns.sse.jsonl").read_text().splitlines()]


def message_list() -> list[dict]:
    return json.loads((FRAMES / "turns.messages.json").read_text())


def fold_live(folder: PartFolder) -> list:
    out = []
    for e in live_events():
        props = e["properties"]
        if e["type"] == "message.updated":
            folder.message(props["info"])
        elif e["type"] == "message.part.updated":
            out += folder.part(props["part"])
        elif e["type"] == "message.part.delta":
            d = folder.delta(props)
            out += [d] if d else []
    return out


def fold_list(folder: PartFolder) -> list:
    out = []
    for m in message_list():
        folder.message(m["info"])
        for p in m["parts"]:
            out += folder.part(p)
    return out


def finals(events) -> list[tuple]:
    streamed = (EventKind.MESSAGE_DELTA, EventKind.COMMAND_OUTPUT)
    return [(e.kind, e.payload.item_id, e.message) for e in events if e.kind not in streamed]


def test_live_frames_give_messages_commands_and_usage():
    folder = PartFolder()
    events = fold_live(folder)
    kinds = Counter(e.kind for e in events)
    messages = [e.message for e in events if e.kind is EventKind.MESSAGE]
    assert messages[0] == "Hello from the fake model. You said: hello there"
    assert "NO WAY use ls" in messages[-1]
    assert kinds[EventKind.COMMAND_STARTED] == 3  # accepted, rejected, aborted
    done = [e for e in events if e.kind is EventKind.COMMAND_COMPLETED]
    assert [d.payload.exit_code for d in done] == [0, None, None]
    assert done[0].payload.output == "hi-from-shell\n"
    assert done[1].payload.status == "failed" and "NO WAY use ls" in done[1].payload.error
    assert done[2].payload.error == "Tool execution aborted"
    # The user's prompt is not agent output.
    assert not any("SHELL:" in e.message for e in events if e.kind is EventKind.MESSAGE)
    deltas = "".join(e.message for e in events if e.kind is EventKind.MESSAGE_DELTA)
    assert deltas == "".join(messages)


def test_the_message_list_reports_the_same_once_and_nothing_after_live():
    live = PartFolder()
    from_live = finals(fold_live(live))
    assert fold_list(live) == []  # a reconcile after live delivery adds nothing
    listed = PartFolder()
    assert sorted(finals(fold_list(listed)), key=str) == sorted(from_live, key=str)
    assert listed.usage() == live.usage()


def test_usage_is_the_sum_of_step_finish_parts_in_domain_terms():
    folder = PartFolder()
    fold_list(folder)
    steps = [p for m in message_list() for p in m["parts"] if p["type"] == "step-finish"]
    assert len(steps) == 5  # the aborted answer never finished its step
    # First step: prompt 120 (100 uncached + 20 cache read), completion 12.
    assert step_usage(steps[0]) == TokenUsage(
        input_tokens=120, cached_input_tokens=20, output_tokens=12, total_tokens=132
    )
    # Reasoning is inside output in the domain, beside it on the wire.
    assert step_usage(steps[1]).output_tokens == 17 and step_usage(steps[1]).reasoning_tokens == 3
    total = folder.usage()
    assert total.total_tokens == sum(step_usage(s).total_tokens for s in steps)
    assert total.cost_usd is None  # cost 0 is not reported


def test_a_repeated_part_update_reports_nothing_new():
    folder = PartFolder()
    part = next(
        p
        for m in message_list()
        for p in m["parts"]
        if p["type"] == "tool" and p["state"]["status"] == "completed"
    )
    first = folder.part(part)
    assert [e.kind for e in first] == [
        EventKind.COMMAND_STARTED,
        EventKind.COMMAND_OUTPUT,
        EventKind.COMMAND_COMPLETED,
    ]
    assert folder.part(part) == []
    running = {**part, "state": {**part["state"], "status": "running"}}
    assert folder.part(running) == []  # a stale update after the end


def test_malformed_parts_are_ignored():
    folder = PartFolder()
    assert folder.part({"type": "tool"}) == []
    assert folder.part({"id": "prt_x", "type": "tool", "state": "nonsense"}) == []
    assert folder.delta({"partID": 3, "delta": None}) is None


def test_errors_read_as_one_line_and_events_name_their_session():
    err = {"name": "UnknownError", "data": {"message": "Model not found:\n nope/zzz\x1b[31m"}}
    assert error_reason(err) == "UnknownError: Model not found: nope/zzz"
    assert error_reason({"name": "MessageAbortedError"}) == "MessageAbortedError"
    assert session_of({"part": {"sessionID": "ses_a"}}) == "ses_a"
    assert session_of({"info": {"sessionID": "ses_b"}}) == "ses_b"
    assert session_of({}) is None


def test_step_usage_derives_the_count_a_part_omits():
    def step(**tokens):
        return {"type": "step-finish", "tokens": tokens}

    # total is optional in StepFinishPart: input + output when it is missing...
    u = step_usage(step(input=100, output=10, reasoning=2, cache={"read": 20, "write": 0}))
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (120, 12, 132)
    # ... and as reported when present, which also gives a missing side.
    assert step_usage(step(input=100, output=10, total=111)).total_tokens == 111
    u = step_usage(step(output=10, reasoning=2, total=132, cache={"read": 20}))
    assert (u.input_tokens, u.output_tokens, u.cached_input_tokens) == (120, 12, 20)
    u = step_usage(step(input=100, total=132, cache={"read": 20}))
    assert (u.input_tokens, u.output_tokens) == (120, 12)
