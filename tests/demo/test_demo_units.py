"""Pure pieces of the demo agent: directives, pacing, approval rules, token accounting."""

from __future__ import annotations

from pathlib import Path

import pytest

from symphony_tui.demo.directives import Directives, parse_directives
from symphony_tui.demo.pacing import speed_from_env
from symphony_tui.demo.threads import DemoThread, TurnRecord, find_saved
from symphony_tui.demo.turn import _approval_needed, _chunks, _decision_word


def test_parse_directives() -> None:
    d = parse_directives("Fix it.\n[demo: approval, SLOW] and [Demo:two-turns] [demo: warp9]")
    assert d.known == {"approval", "slow", "two-turns"}
    assert d.unknown == ("warp9",)
    assert "approval" in d and "fail-once" not in d
    assert parse_directives("no tags [demo] [other: approval]") == Directives()
    merged = d.merged(parse_directives("[demo: fail-once, warp9, zap]"))
    assert merged.known == {"approval", "slow", "two-turns", "fail-once"}
    assert merged.unknown == ("warp9", "zap")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", 1.0), ("0", 0.0), ("2.5", 2.5), ("fast", 1.0), ("-1", 1.0), ("nan", 1.0)],
)
def test_speed_from_env(raw: str, expected: float) -> None:
    assert speed_from_env({"SYMPHONY_DEMO_SPEED": raw}) == expected


def test_approval_rules() -> None:
    assert _approval_needed("on-request", escalated=True)
    assert not _approval_needed("on-request", escalated=False)
    assert _approval_needed("untrusted", escalated=False)
    assert not _approval_needed("never", escalated=True)
    assert not _approval_needed({"granular": {"sandbox_approval": False}}, escalated=True)
    assert _approval_needed({"granular": {"sandbox_approval": True}}, escalated=True)


def test_decision_words() -> None:
    assert _decision_word({"decision": "acceptForSession"}) == "acceptForSession"
    assert _decision_word({"decision": {"acceptWithExecpolicyAmendment": {}}}) == "accept"
    assert _decision_word({"decision": "maybe"}) == "decline"
    assert _decision_word(None) == "decline"


def test_chunks_keep_every_character() -> None:
    text = "one two  three four five six seven"
    parts = _chunks(text)
    assert len(parts) > 1 and "".join(parts) == text


def test_token_accounting_is_cumulative(tmp_path: Path) -> None:
    thread = DemoThread(id="t1", cwd=tmp_path)
    first = thread.account(100, 20, 8)
    second = thread.account(10, 5, 0)
    assert first.cached == 0 and second.cached == 120  # the previous context is cached
    wire = thread.usage_wire(second)
    assert wire["total"]["totalTokens"] == 128 + (130 + 5)
    assert wire["total"]["inputTokens"] == 100 + 130
    assert wire["last"]["totalTokens"] == 135


def test_thread_round_trip_and_safe_lookup(tmp_path: Path) -> None:
    thread = DemoThread(id="abc", cwd=tmp_path, tools=("x",))
    thread.turns.append(TurnRecord(id="u1"))
    thread.account(50, 10, 0)
    thread.save()
    path = find_saved("abc", tmp_path)
    assert path is not None
    loaded = DemoThread.load(path)
    assert loaded.tools == ("x",) and loaded.total == thread.total
    assert loaded.turns[0].status == "interrupted"
    for bad in ("", "../abc", ".hidden", "a/b"):
        assert find_saved(bad, tmp_path) is None


def planned_seconds(directives: Directives, cwd: Path, monkeypatch) -> float:
    """Seconds of pauses a thread with ``directives`` plays over two turns at speed 1."""
    import asyncio

    from symphony_tui.demo.pacing import Pacer
    from symphony_tui.demo.turn import TurnScript

    total = 0.0

    async def pause(self, ms: float) -> None:
        nonlocal total
        total += ms * self.scale / 1000

    class Transport:
        def notify(self, method, params) -> None:
            pass

        async def request(self, method, params) -> dict:
            return {"contentItems": [], "success": True, "decision": "accept"}

    monkeypatch.setattr(Pacer, "pause", pause)
    thread = DemoThread(id="t", cwd=cwd, directives=directives)

    async def play() -> None:
        for n in (1, 2):
            record = TurnRecord(id=f"turn-{n}")
            thread.turns.append(record)
            await TurnScript(Transport(), thread, record, "p", directives, 1.0).run()  # type: ignore[arg-type]

    asyncio.run(play())
    return total


def test_the_demos_slow_issue_works_long_enough_to_try_the_interrupt_key(tmp_path, monkeypatch):
    import yaml

    demo = Path(__file__).parents[2] / "assets" / "demo" / "issues.yaml"
    issues = yaml.safe_load(demo.read_text())["issues"]
    slow = next(i for i in issues if "slow" in parse_directives(i["description"]))
    assert slow["identifier"] == "DEMO-5"
    seconds = planned_seconds(parse_directives(slow["description"]), tmp_path, monkeypatch)
    assert seconds >= 60  # at the default pace: time to find its row and press i
