"""The local tracker (file format in ``trackers/local.py``) against the spec §17.3 tracker
bullets."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from symphony_tui.config.settings import Settings, resolve_settings
from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.trackers.local import LocalTracker

ISSUES = """\
# Demo issues: comments and layout must survive state moves.
issues:
  - id: a-1
    identifier: DEMO-1
    title: First issue
    description: |
      Multi-line
      description.
    priority: 2
    state: Todo   # waiting
    labels: [Docs, EASY]
    created_at: 2026-11-01T09:00:00Z

  - id: a-2
    identifier: DEMO-2
    title: Second issue
    state: in progress
    blocked_by: [DEMO-1, a-3, GONE-9]
    url: https://example.test/DEMO-2

  - {id: a-3, identifier: DEMO-3, title: "Flow style", state: Done, priority: null}

  - id: 4
    identifier: DEMO-4
    title: Backlog item
    state: "Backlog"
    updated_at: 2026-11-02T10:00:00Z
"""


def provider(tmp_path: Path, path: str = "issues.yaml", **tracker: object):
    settings = resolve_settings(
        {"tracker": {"kind": "local", "path": path, **tracker}}, tmp_path, {}
    )

    def get() -> Settings:
        return settings

    return get


@pytest.fixture
def issues_file(tmp_path: Path) -> Path:
    path = tmp_path / "issues.yaml"
    path.write_text(ISSUES, encoding="utf-8")
    return path


@pytest.fixture
def tracker(tmp_path: Path, issues_file: Path) -> LocalTracker:
    return LocalTracker(provider(tmp_path))


def test_local_tracker_implements_the_tracker_protocol(tracker: LocalTracker) -> None:
    assert isinstance(tracker, Tracker) and tracker.kind == "local"


async def test_candidate_issue_fetch_uses_active_states_in_file_order(tracker) -> None:
    got = await tracker.fetch_candidate_issues()
    assert [i.identifier for i in got] == ["DEMO-1", "DEMO-2"]  # "in progress" matches


async def test_candidates_follow_reloaded_active_states(tmp_path: Path, issues_file) -> None:
    t = LocalTracker(provider(tmp_path, active_states=["Backlog"]))
    assert [i.id for i in await t.fetch_candidate_issues()] == ["4"]


async def test_issue_fields_are_normalized(tracker) -> None:
    first, second, third, fourth = await tracker.fetch_issues_by_states(
        ["Todo", "In Progress", "Done", "Backlog"]
    )
    assert first.description == "Multi-line\ndescription.\n"
    assert first.priority == 2 and first.state == "Todo"
    assert first.created_at is not None and first.created_at.tzinfo is not None
    assert second.url == "https://example.test/DEMO-2" and second.priority is None
    assert third.title == "Flow style" and third.state == "Done"
    assert fourth.id == "4" and fourth.updated_at is not None


async def test_labels_are_normalized_to_lowercase(tracker) -> None:
    (first,) = await tracker.fetch_issues_by_ids(["a-1"])
    assert first.labels == ("docs", "easy")


async def test_blockers_resolve_by_identifier_or_id_from_the_same_file(tracker) -> None:
    (second,) = await tracker.fetch_issues_by_ids(["a-2"])
    refs = [(b.id, b.identifier, b.state) for b in second.blocked_by]
    assert refs == [("a-1", "DEMO-1", "Todo"), ("a-3", "DEMO-3", "Done"), (None, "GONE-9", None)]


async def test_empty_fetch_issues_by_states_returns_empty_without_reading(tmp_path: Path) -> None:
    t = LocalTracker(provider(tmp_path, path="missing.yaml"))
    assert await t.fetch_issues_by_states([]) == []
    with pytest.raises(TrackerError):
        await t.fetch_issues_by_states(["Todo"])


async def test_state_refresh_by_id_returns_only_present_ids_in_order(tracker) -> None:
    got = await tracker.fetch_issues_by_ids(["a-3", "nope", "a-1", "a-3"])
    assert [i.id for i in got] == ["a-3", "a-1"]
    assert await tracker.fetch_issues_by_ids([]) == []


async def test_edits_by_hand_show_up_on_the_next_call(tracker, issues_file: Path) -> None:
    assert len(await tracker.fetch_candidate_issues()) == 2
    issues_file.write_text(ISSUES.replace("state: Todo   # waiting", "state: Done"))
    assert [i.id for i in await tracker.fetch_candidate_issues()] == ["a-2"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("issues: [\n", "invalid YAML at line"),
        ("- just a list\n", "expected a map with an 'issues:' list"),
        ("issues: {a: 1}\n", "'issues' must be a list"),
        ("issues:\n  - 42\n", "issue #1 must be a map"),
        (
            "issues:\n  - id: x\n    identifier: X-1\n    state: Todo\n",
            "(X-1) is missing required field 'title'",
        ),
        (
            "issues:\n  - id: x\n    identifier: X-1\n    title: t\n    state: '  '\n",
            "missing required field 'state'",
        ),
        (
            "issues:\n  - {id: x, identifier: X-1, title: t, state: Todo}\n"
            "  - {id: x, identifier: X-2, title: u, state: Todo}\n",
            "issue #2 (X-2) repeats id 'x' of issue #1 (X-1)",
        ),
        (
            "issues:\n  - {id: x, identifier: X-1, title: t, state: Todo}\n"
            "  - {id: y, identifier: X-1, title: u, state: Todo}\n",
            "repeats identifier 'X-1'",
        ),
        (
            "issues:\n  - {id: x, identifier: X-1, title: t, state: Todo, priority: high}\n",
            "priority must be an integer",
        ),
        (
            "issues:\n  - {id: x, identifier: X-1, title: t, state: Todo, labels: [{a: 1}]}\n",
            "labels must be a list of names",
        ),
        (
            "issues:\n  - {id: x, identifier: X-1, title: t, state: Todo, created_at: soon}\n",
            "created_at",
        ),
    ],
)
async def test_bad_files_give_one_clear_line(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "issues.yaml").write_text(text)
    t = LocalTracker(provider(tmp_path))
    with pytest.raises(TrackerError) as info:
        await t.fetch_candidate_issues()
    err = info.value
    assert err.category == "local_tracker_file"
    assert needle in err.message, err.message
    assert "\n" not in str(err)


async def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TrackerError) as info:
        await LocalTracker(provider(tmp_path, path="nope.yaml")).fetch_candidate_issues()
    assert info.value.category == "local_tracker_file" and "file not found" in info.value.message


async def test_empty_file_and_empty_list_have_no_issues(tmp_path: Path) -> None:
    t = LocalTracker(provider(tmp_path))
    for text in ("", "issues:\n", "issues: []\n"):
        (tmp_path / "issues.yaml").write_text(text)
        assert await t.fetch_candidate_issues() == []


async def test_move_issue_changes_only_that_state_byte_for_byte(tracker, issues_file) -> None:
    moved = await tracker.move_issue("a-1", "In Progress")
    assert moved.state == "In Progress" and moved.identifier == "DEMO-1"
    assert issues_file.read_text() == ISSUES.replace(
        "state: Todo   # waiting", "state: In Progress   # waiting"
    )
    (again,) = await tracker.fetch_issues_by_ids(["a-1"])
    assert again.state == "In Progress"
    # Blockers see the new state too.
    (second,) = await tracker.fetch_issues_by_ids(["a-2"])
    assert second.blocked_by[0].state == "In Progress"


async def test_move_issue_in_flow_style_and_quoted_values(tracker, issues_file) -> None:
    await tracker.move_issue("a-3", "Todo")
    await tracker.move_issue("4", "Human Review")
    text = issues_file.read_text()
    assert '{id: a-3, identifier: DEMO-3, title: "Flow style", state: Todo, priority: null}' in text
    assert "state: Human Review\n" in text


async def test_move_issue_bumps_an_existing_updated_at(tracker, issues_file) -> None:
    before = (await tracker.fetch_issues_by_ids(["4"]))[0].updated_at
    moved = await tracker.move_issue("4", "Todo")
    assert moved.updated_at is not None and before is not None and moved.updated_at > before
    assert "updated_at: 2026-11-02T10:00:00Z" not in issues_file.read_text()
    # An issue without updated_at does not get one.
    await tracker.move_issue("a-2", "Done")
    assert issues_file.read_text().count("updated_at") == 1


@pytest.mark.parametrize(
    "state", ["Yes", "null", "Done: really", "#1 priority", " 'q' ", "ünïcode"]
)
async def test_move_issue_quotes_states_that_need_it(tracker, issues_file, state: str) -> None:
    moved = await tracker.move_issue("a-1", state)
    assert moved.state == state.strip()
    assert "# waiting" in issues_file.read_text()


async def test_blank_state_is_an_error_and_unknown_states_are_accepted(tracker) -> None:
    with pytest.raises(TrackerError):
        await tracker.move_issue("a-1", "  ")
    assert (await tracker.move_issue("a-1", "Someday Maybe")).state == "Someday Maybe"


async def test_move_of_an_unknown_issue_is_an_error(tracker, issues_file) -> None:
    with pytest.raises(TrackerError) as info:
        await tracker.move_issue("zzz", "Done")
    assert "no issue with id 'zzz'" in info.value.message
    assert issues_file.read_text() == ISSUES


async def test_move_refuses_to_break_anchors(tmp_path: Path) -> None:
    text = (
        "issues:\n  - {id: a, identifier: A-1, title: t, state: &todo Todo}\n"
        "  - {id: b, identifier: B-1, title: u, state: *todo}\n"
    )
    (tmp_path / "issues.yaml").write_text(text)
    t = LocalTracker(provider(tmp_path))
    with pytest.raises(TrackerError) as info:
        await t.move_issue("b", "Done")
    assert "safely" in info.value.message
    assert (tmp_path / "issues.yaml").read_text() == text


async def test_move_keeps_crlf_bom_mode_and_symlinks(tmp_path: Path) -> None:
    real = tmp_path / "data" / "real.yaml"
    real.parent.mkdir()
    real.write_bytes(
        b"\xef\xbb\xbfissues:\r\n  - id: a\r\n    identifier: A-1\r\n    title: t\r\n    state: Todo\r\n"
    )
    os.chmod(real, 0o640)
    os.symlink(real, tmp_path / "issues.yaml")
    t = LocalTracker(provider(tmp_path))
    await t.move_issue("a", "Done")
    assert (tmp_path / "issues.yaml").is_symlink()
    assert real.read_bytes() == (
        b"\xef\xbb\xbfissues:\r\n  - id: a\r\n    identifier: A-1\r\n    title: t\r\n    state: Done\r\n"
    )
    assert os.stat(real).st_mode & 0o777 == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.yaml"]


async def test_concurrent_moves_in_one_process_are_serialized(tmp_path: Path) -> None:
    lines = ["issues:"]
    for n in range(20):
        lines.append(f"  - {{id: i{n}, identifier: I-{n}, title: t{n}, state: Todo}}")
    (tmp_path / "issues.yaml").write_text("\n".join(lines) + "\n")
    trackers = [LocalTracker(provider(tmp_path)) for _ in range(2)]
    await asyncio.gather(*(trackers[n % 2].move_issue(f"i{n}", "Done") for n in range(20)))
    done = await trackers[0].fetch_issues_by_states(["Done"])
    assert len(done) == 20


async def test_concurrent_moves_from_two_processes_lose_nothing(tmp_path: Path) -> None:
    lines = ["issues:"]
    for n in range(30):
        lines.append(f"  - id: i{n}\n    identifier: I-{n}\n    title: t{n}\n    state: Todo")
    (tmp_path / "issues.yaml").write_text("\n".join(lines) + "\n")
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from symphony_tui.config.settings import resolve_settings\n"
        "from symphony_tui.trackers.local import LocalTracker\n"
        "root = Path(sys.argv[1]); ids = sys.argv[2:]\n"
        "s = resolve_settings({'tracker': {'kind': 'local', 'path': 'issues.yaml'}}, root, {})\n"
        "t = LocalTracker(lambda: s)\n"
        "async def main():\n"
        "    for i in ids:\n"
        "        await t.move_issue(i, 'Done')\n"
        "asyncio.run(main())\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path), *[f"i{n}" for n in range(k, 30, 2)]]
        )
        for k in (0, 1)
    ]
    for p in procs:
        assert p.wait(timeout=60) == 0
    done = await LocalTracker(provider(tmp_path)).fetch_issues_by_states(["Done"])
    assert len(done) == 30


async def test_aclose_is_harmless(tracker) -> None:
    await tracker.aclose()
    assert len(await tracker.fetch_candidate_issues()) == 2


def test_move_never_overwrites_an_edit_made_by_a_writer_without_the_lock(tmp_path, monkeypatch):
    """A person appending to issues.yaml while the agent moves an issue loses nothing: the
    replace checks the file is still what was read, and re-applies the move otherwise."""
    import asyncio

    from symphony_tui.trackers import local as local_module
    from symphony_tui.workspaces import atomic

    path = tmp_path / "issues.yaml"
    path.write_text("issues:\n  - id: a\n    identifier: A-1\n    title: one\n    state: Todo\n")
    tracker = local_module.LocalTracker(provider(tmp_path))
    appended = "  - id: b\n    identifier: B-1\n    title: added by hand\n    state: Todo\n"
    real_write = atomic.atomic_write_bytes
    calls = {"n": 0}

    def write_racing_a_person(target, data, mode=None, *, expect=None):
        calls["n"] += 1
        if calls["n"] == 1:  # the person saves between our read and our replace
            with open(target, "a") as handle:
                handle.write(appended)
        return real_write(target, data, mode, expect=expect)

    monkeypatch.setattr(local_module, "atomic_write_bytes", write_racing_a_person)
    moved = asyncio.run(tracker.move_issue("a", "Done"))
    assert moved.state == "Done"
    text = path.read_text()
    assert "added by hand" in text and "state: Done" in text
    assert calls["n"] == 2


async def test_todo_issue_waits_for_non_terminal_blockers_through_dispatchable(tmp_path) -> None:
    path = tmp_path / "issues.yaml"
    path.write_text(
        "issues:\n"
        "  - {id: b-1, identifier: B-1, title: open blocker, state: In Progress}\n"
        "  - {id: b-2, identifier: B-2, title: done blocker, state: Done}\n"
        "  - {id: t-1, identifier: T-1, title: waits, state: Todo, blocked_by: [B-1]}\n"
        "  - {id: t-2, identifier: T-2, title: free, state: Todo, blocked_by: [B-2]}\n"
        "  - {id: t-3, identifier: T-3, title: unknown, state: Todo, blocked_by: [NOPE-1]}\n"
        "  - {id: p-1, identifier: P-1, title: started, state: In Progress, blocked_by: [B-1]}\n"
    )
    settings = resolve_settings({"tracker": {"kind": "local", "path": str(path)}}, tmp_path, env={})
    tracker = LocalTracker(lambda: settings)
    verdicts = {i.identifier: i.dispatchable for i in await tracker.fetch_candidate_issues()}
    assert verdicts == {"B-1": True, "T-1": False, "T-2": True, "T-3": False, "P-1": True}
    (refreshed,) = await tracker.fetch_issues_by_ids(["t-1"])
    assert refreshed.dispatchable is False
