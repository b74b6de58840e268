"""Snapshot builds reuse the issue rows whose inputs did not change (a build on
every agent event must not redo 2,000 issue rows); the snapshot is the same as one built
without the cache."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.config.settings import resolve_settings
from symphony_tui.domain import ClaimState, RetryEntry
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.snapshots import IssueRowCache, build_snapshot
from symphony_tui.scheduler.usage.tokens import TokenLedger
from tests.scheduler.conftest import T0, make_issue


def _settings(tmp_path: Path):
    raw = {"tracker": {"kind": "local", "path": "issues.yaml"}, "workspace": {"root": "ws"}}
    return resolve_settings(raw, tmp_path, env={})


def _build(tmp_path, settings, known, running, *, held=(), completed=(), retries=(), cache=None):
    return build_snapshot(
        now=T0,
        now_mono=40.0,
        settings=settings,
        workflow_path=str(tmp_path / "WORKFLOW.md"),
        started_at=T0,
        known=known,
        running=running,
        retries=list(retries),
        held=set(held),
        completed=list(completed),
        ledger=TokenLedger(),
        ended_seconds=0.0,
        rate_limits=None,
        recovered=(),
        dispatch_paused=False,
        config_error=None,
        tracker_error=None,
        tracker_paused_until=None,
        last_poll_at=T0,
        next_poll_at=None,
        row_cache=cache,
    )


def _run(n: int) -> Run:
    return Run(
        issue=make_issue(n, state="In Progress"),
        attempt=None,
        backend="codex",
        started_at=T0,
        started_mono=0.0,
        last_event_mono=0.0,
    )


def test_unchanged_inputs_give_the_very_same_rows_and_each_change_shows(tmp_path):
    settings = _settings(tmp_path)
    known = {i.id: i for i in (make_issue(n, priority=5 - n) for n in range(1, 5))}
    running = {"id-2": _run(2)}
    cache = IssueRowCache()
    first = _build(tmp_path, settings, known, running, cache=cache)
    assert first.issues == _build(tmp_path, settings, known, running).issues
    again = _build(tmp_path, settings, known, running, cache=cache)
    # nothing the rows show changed: not one made again
    assert all(a is b for a, b in zip(first.issues, again.issues, strict=True))

    held = _build(tmp_path, settings, known, running, held={"id-4"}, cache=cache)
    row4 = next(r for r in held.issues if r.issue_id == "id-4")
    assert (row4.claim, row4.note) == (ClaimState.RELEASED, "held by operator")
    kept = [a is b for a, b in zip(first.issues, held.issues, strict=True)]
    assert kept.count(False) == 1  # only the held issue's row was made again

    known["id-1"] = make_issue(1, priority=9, state="Todo")  # the tracker changed it
    retry = RetryEntry(issue_id="id-3", identifier="ABC-3", attempt=1, due_at=T0, error="x")
    changed = _build(
        tmp_path, settings, known, running, completed=["ABC-4"], retries=[retry], cache=cache
    )
    plain = _build(tmp_path, settings, known, running, completed=["ABC-4"], retries=[retry])
    assert changed.issues == plain.issues  # the same as without a cache
    assert [r.identifier for r in changed.issues] == [r.identifier for r in plain.issues]
    claims = {r.identifier: (r.claim, r.note) for r in changed.issues}
    assert claims["ABC-3"] == (ClaimState.RETRY_QUEUED, "")
    assert claims["ABC-4"] == (ClaimState.UNCLAIMED, "completed")
    assert next(r for r in changed.issues if r.identifier == "ABC-1").priority == 9

    del running["id-2"]
    ended = _build(tmp_path, settings, known, running, cache=cache)
    assert next(r for r in ended.issues if r.identifier == "ABC-2").claim is (ClaimState.UNCLAIMED)
    other = _settings(tmp_path / "other")  # a reload: new settings, every row again
    reloaded = _build(tmp_path, other, known, running, cache=cache)
    assert all(a is not b for a, b in zip(ended.issues, reloaded.issues, strict=True))
    assert reloaded.issues == _build(tmp_path, other, known, running).issues
