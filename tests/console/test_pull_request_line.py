"""The worker detail names the issue's pull request (state, checks, review decision,
mergeability), the same after the snapshot went through JSON to an attached console."""

from __future__ import annotations

from symphony_tui.console.screens.worker import worker_header
from symphony_tui.console.tones import Tones
from symphony_tui.domain import Snapshot
from symphony_tui.domain.pull_requests import PullCheck, PullRequestLink
from tests.console.sample import NOW, sample_snapshot


def test_worker_detail_shows_the_pull_request_line() -> None:
    snap = sample_snapshot()
    row = snap.running[0]
    link = PullRequestLink(
        number=41,
        url="https://github.com/octo/app/pull/41",
        state="OPEN",
        head_sha="abc",
        checks_sha="abc",
        mergeable="CONFLICTING",
        review_decision="CHANGES_REQUESTED",
        checks=(
            PullCheck(name="test", conclusion="FAILURE", job_id=1, workflow="CI"),
            PullCheck(name="lint", conclusion="SUCCESS"),
            PullCheck(name="e2e"),
        ),
    )
    snap = snap.model_copy(update={"pull_requests": {row.issue_identifier: link}})
    wire = Snapshot.model_validate_json(snap.model_dump_json())  # an attached console's copy
    for shown in (snap, wire):
        plain = worker_header(shown, row.issue_id, NOW, Tones()).plain
        line = next(x for x in plain.split("\n") if x.startswith("pull request"))
        assert line == (
            "pull request #41 open · checks 1 passed, 1 failed, 1 pending · changes requested"
            " · conflicts"
        )
    other = snap.running[1]
    assert "pull request" not in worker_header(snap, other.issue_id, NOW, Tones()).plain
