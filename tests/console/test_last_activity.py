"""One "last activity" for the worker row and the worker detail: both show the
end of the rolling agent text, its newest words, never its head."""

from __future__ import annotations

from symphony_tui.console.screens.worker import worker_header
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.workers import worker_rows
from tests.console.sample import NOW, ago, sample_snapshot

OLD = "old words streamed forty seconds ago " * 8
NEWEST = "and these are the newest words"


def streaming():
    snap = sample_snapshot()
    row = snap.running[1].model_copy(
        update={
            "last_event": "message_delta",
            "last_message": (OLD + NEWEST)[-400:],
            "last_event_at": ago(1),
        }
    )
    return snap.model_copy(update={"running": (snap.running[0], row)}), row


def test_worker_row_shows_the_newest_text_in_its_column_width():
    snap, row = streaming()
    for width in (16, 40, 70):
        cells = dict(worker_rows(snap, NOW, Tones(), last_width=width))[row.issue_id]
        last = cells[-1].plain
        assert len(last) <= width
        assert "…" in last
        prefix = "" if width < 24 else "message_delta: "
        assert last == prefix + "…" + (OLD + NEWEST)[-(width - len(prefix) - 1) :]


def test_worker_detail_shows_the_same_activity_longer():
    snap, row = streaming()
    header = worker_header(snap, row.issue_id, NOW, Tones()).plain
    last = next(line for line in header.split("\n") if line.startswith("last "))
    assert last.startswith("last 1s ago  message_delta: …")
    assert last.endswith(NEWEST)
    assert len(last) > 100  # more of the newest text than a row has room for


def test_a_failed_run_says_why_on_its_row_and_in_its_detail():
    # The attempt failed (its worker still runs after_run): the status and the error,
    # not the last agent event from before the failure.
    from symphony_tui.domain import RunStatus

    snap = sample_snapshot()
    row = snap.running[1].model_copy(
        update={
            "status": RunStatus.FAILED,
            "error": "launch_failed: codex exited with status 127",
            "last_event": "session_started",
        }
    )
    snap = snap.model_copy(update={"running": (snap.running[0], row)})
    cells = dict(worker_rows(snap, NOW, Tones(), last_width=70))[row.issue_id]
    assert "failed" in cells[2].plain
    assert cells[-1].plain == "error: launch_failed: codex exited with status 127"
    header = worker_header(snap, row.issue_id, NOW, Tones()).plain
    assert "failed launch_failed: codex exited with status 127" in header.split("\n")
