"""The console's bell and desktop notifications (console/attention.py)."""

from __future__ import annotations

from symphony_tui.config.settings import NotifySettings
from symphony_tui.console.attention import ConsoleAttention, desktop_escape, desktop_protocol
from symphony_tui.scheduler.attention import Alert
from tests.console.helpers import SIZE, settle
from tests.console.sample import COMMAND_APPROVAL

ALERT = Alert("approval", "ABC-1", "ABC-1: approval needed", "run; make deploy")


def test_the_terminal_decides_the_escape_and_unknown_ones_get_none():
    assert desktop_protocol("auto", {"TERM_PROGRAM": "iTerm.app"}) == "osc9"
    assert desktop_protocol("auto", {"TERM_PROGRAM": "WezTerm"}) == "osc9"
    assert desktop_protocol("auto", {"TERM": "xterm-256color", "VTE_VERSION": "7600"}) == "osc777"
    assert desktop_protocol("auto", {"TERM": "foot"}) == "osc777"
    assert desktop_protocol("auto", {"TERM": "xterm-256color"}) is None
    assert desktop_protocol("auto", {"TERM_PROGRAM": "tmux", "TERM": "tmux-256color"}) is None
    assert desktop_protocol("osc777", {}) == "osc777"
    assert desktop_protocol("off", {"TERM_PROGRAM": "iTerm.app"}) is None


def test_the_escapes_carry_one_clean_line():
    assert desktop_escape("osc9", ALERT) == (
        "\x1b]9;symphony: ABC-1: approval needed: run; make deploy\x07"
    )
    assert desktop_escape("osc777", ALERT) == (
        "\x1b]777;notify;symphony: ABC-1: approval needed;run, make deploy\x07"
    )
    evil = Alert("approval", "X", "X\x07\x1b]9;x", "a\x1b\\b\x9c")
    for protocol in ("osc9", "osc777"):
        body = desktop_escape(protocol, evil)[4:-1]
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in body), protocol


def _attention(settings: NotifySettings, environ: dict):
    calls: list[str] = []
    attention = ConsoleAttention(
        lambda: settings,
        bell=lambda: calls.append("bell"),
        write=calls.append,
        environ=environ,
    )
    return attention, calls


def test_bell_and_desktop_per_kind(port):
    snapshot = port.current
    attention, calls = _attention(NotifySettings(), {"TERM_PROGRAM": "WezTerm"})
    attention.on_snapshot(snapshot)
    kinds = sorted(a.kind for a in attention.shown)
    # the sample has an approval and a question pending, and a retry on its third failure
    assert kinds == ["approval", "failed", "question"]
    assert calls.count("bell") == 1  # once per snapshot
    assert sum(c.startswith("\x1b]9;") for c in calls) == 3
    attention.on_snapshot(port.update())
    assert len(attention.shown) == 3  # nothing new

    quiet, calls = _attention(
        NotifySettings(bell=["question"], desktop=[]), {"TERM_PROGRAM": "WezTerm"}
    )
    quiet.on_snapshot(snapshot)
    assert calls == ["bell"] and [a.kind for a in quiet.shown] == ["question"]
    unknown, calls = _attention(NotifySettings(bell=[]), {"TERM": "xterm"})
    unknown.on_snapshot(snapshot)
    assert calls == [] and unknown.shown == []


async def test_the_console_acts_on_a_new_approval(port, make_app):
    port.update(approvals=(), retrying=())
    app = make_app(port, notify=NotifySettings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.attention.shown == []
        port.update(approvals=(COMMAND_APPROVAL,))
        await settle(pilot)
        await pilot.pause(0.3)
        (alert,) = app.attention.shown
        assert alert.kind == "approval" and alert.issue_identifier == "DEMO-1"
