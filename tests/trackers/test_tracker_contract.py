"""The tracker contract every adapter keeps (spec §11.1-§11.4): a published compact profile,
error forms that map to the portable categories, and an explicit ``dispatchable``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from symphony_tui.config.settings import resolve_settings
from symphony_tui.trackers.asana.tracker import AsanaTracker
from symphony_tui.trackers.base import (
    ADAPTER_CATEGORIES,
    PORTABLE_CATEGORIES,
    TrackerError,
    TrackerProfile,
    keep_wellformed,
)
from symphony_tui.trackers.github.tracker import GitHubTracker
from symphony_tui.trackers.gitlab.tracker import GitLabTracker
from symphony_tui.trackers.jira.tracker import JiraTracker
from symphony_tui.trackers.linear.normalize import normalize_issue
from symphony_tui.trackers.linear.tracker import LinearTracker
from symphony_tui.trackers.local import LocalTracker
from symphony_tui_testing.memory_tracker import MemoryTracker

REPO = Path(__file__).resolve().parents[2]
ADAPTERS = {
    "linear": LinearTracker,
    "github": GitHubTracker,
    "local": LocalTracker,
    "jira": JiraTracker,
    "gitlab": GitLabTracker,
    "asana": AsanaTracker,
}
RAISED = re.compile(r"TrackerError\(\s*\"([a-z_]+)\"")


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_each_adapter_publishes_its_profile_in_the_docs(kind: str) -> None:
    cls = ADAPTERS[kind]
    profile = cls.profile
    assert isinstance(profile, TrackerProfile) and cls.kind == profile.kind == kind
    for field in ("config", "scope", "identity", "normalization", "agent_tools", "errors"):
        assert len(getattr(profile, field)) > 20, f"{kind}: profile.{field} says nothing"
    docs = (REPO / "docs" / "trackers.md").read_text(encoding="utf-8")
    assert profile.markdown() in docs, (
        f"docs/trackers.md lacks the current {kind} profile; paste:\n{profile.markdown()}"
    )


def _adapter_sources(kind: str) -> list[Path]:
    folder = REPO / "symphony_tui" / "trackers"
    return [folder / "local.py"] if kind == "local" else sorted((folder / kind).glob("*.py"))


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_every_error_form_an_adapter_raises_maps_to_a_portable_category(kind: str) -> None:
    profile = ADAPTERS[kind].profile
    raised = {c for path in _adapter_sources(kind) for c in RAISED.findall(path.read_text())}
    assert raised, kind
    for category in raised:
        assert category in PORTABLE_CATEGORIES or category in ADAPTER_CATEGORIES, category
        portable = TrackerError(category, "x").portable
        assert portable in PORTABLE_CATEGORIES
        # The profile documents the mapping of each of its forms (§11.4).
        assert f"`{category}`" in profile.errors, f"{kind} profile omits {category}"
        assert f"`{portable}`" in profile.errors or category == portable


def test_the_portable_categories_are_the_specs() -> None:
    assert PORTABLE_CATEGORIES == (
        "unsupported_tracker_kind",
        "invalid_tracker_config",
        "missing_tracker_secret",
        "tracker_request",
        "tracker_status",
        "tracker_response",
        "tracker_pagination",
        "tracker_rate_limited",
    )
    assert set(ADAPTER_CATEGORIES.values()) <= set(PORTABLE_CATEGORIES)
    assert TrackerError("rate_limited", "slow down").portable == "tracker_rate_limited"
    assert TrackerError("tracker_status", "503").portable == "tracker_status"


def test_linear_sets_dispatchable_explicitly() -> None:
    node = {
        "id": "i-1",
        "identifier": "P-1",
        "title": "t",
        "state": {"name": "Todo"},
        "assignee": {"id": "u-2"},
        "inverseRelations": {"nodes": [{"type": "blocks", "issue": {"state": {"name": "Done"}}}]},
    }
    free = normalize_issue(node, is_terminal=lambda s: s == "Done")
    assert "dispatchable" in free.model_fields_set and free.dispatchable
    assert free.assignee_id == "u-2" and free.native_ref is None
    assert not normalize_issue(node, is_terminal=lambda s: False).dispatchable  # open blocker
    assert not normalize_issue(node, is_terminal=lambda s: s == "Done", assignee="u-9").dispatchable


async def test_local_sets_dispatchable_explicitly(tmp_path: Path) -> None:
    path = tmp_path / "issues.yaml"
    path.write_text("issues:\n  - {id: a, identifier: A-1, title: t, state: Todo}\n")
    settings = resolve_settings({"tracker": {"kind": "local", "path": str(path)}}, tmp_path, {})
    (issue,) = await LocalTracker(lambda: settings).fetch_candidate_issues()
    assert "dispatchable" in issue.model_fields_set and issue.dispatchable


def test_state_list_reads_keep_the_wellformed_and_log_the_rest(caplog) -> None:
    def normalize(record):
        if record == "bad":
            raise TrackerError("tracker_response", "record lacks title")
        if record == "skip":
            return None
        return record

    assert keep_wellformed(["a", "bad", "skip", "b"], normalize, kind="x") == ["a", "b"]
    assert [r.getMessage() for r in caplog.records] == [
        "tracker record omitted kind=x reason=record lacks title"
    ]

    def refused(record):
        raise TrackerError("tracker_status", "503")

    with pytest.raises(TrackerError):  # a failed request is no malformed record
        keep_wellformed(["a"], refused, kind="x")


async def test_an_empty_id_refresh_makes_no_call() -> None:
    tracker = MemoryTracker()
    assert await tracker.fetch_issues_by_ids([]) == []
    assert tracker.calls == []
