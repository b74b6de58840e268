"""Units shared by the Jira, GitLab and Asana trackers: Atlassian Document Format to text,
Jira's timestamps and priorities, Asana's null assignee, the reset headers the REST client
reads (``Retry-After`` as seconds or an HTTP date, ``X-RateLimit-Reset`` as an ISO time,
``RateLimit-Reset`` as epoch seconds), and the tool's path checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from symphony_tui.trackers import rest
from symphony_tui.trackers.asana.normalize import normalize_task
from symphony_tui.trackers.jira.normalize import adf_text, parse_time, priority
from symphony_tui.trackers.rest_tool import parse_arguments

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_adf_becomes_lines_of_text() -> None:
    doc = {
        "type": "doc",
        "version": 1,
        "content": [
            {"type": "heading", "content": [{"type": "text", "text": "Goal"}]},
            {
                "type": "paragraph",
                "content": [
                    {"type": "text", "text": "Ask "},
                    {"type": "mention", "attrs": {"id": "1", "text": "@ana"}},
                    {"type": "hardBreak"},
                    {"type": "text", "text": "then ship"},
                ],
            },
            {
                "type": "bulletList",
                "content": [
                    {
                        "type": "listItem",
                        "content": [
                            {"type": "paragraph", "content": [{"type": "text", "text": "one"}]}
                        ],
                    },
                    {
                        "type": "listItem",
                        "content": [
                            {"type": "paragraph", "content": [{"type": "text", "text": "two"}]}
                        ],
                    },
                ],
            },
        ],
    }
    assert adf_text(doc) == "Goal\nAsk @ana\nthen ship\n- one\n- two"
    assert adf_text({"type": "doc", "content": []}) is None
    assert adf_text("  plain  ") == "plain"


def test_jira_times_and_priorities() -> None:
    assert parse_time("2026-03-01T12:00:00.000+0000") == NOW
    assert parse_time("2026-03-01T14:00:00.000+0200") == NOW
    assert parse_time("yesterday") is None
    assert [priority({"name": n}) for n in ("Highest", "high", "Medium", "Lowest", "P0")] == [
        1,
        2,
        3,
        4,
        None,
    ]


def test_an_unassigned_asana_task_says_null() -> None:
    raw = {
        "gid": "12",
        "name": "t",
        "assignee": None,
        "memberships": [{"project": {"gid": "9"}, "section": {"gid": "3", "name": "To do"}}],
    }
    issue = normalize_task(raw, "9", {}, "Done")
    assert issue.assignees == () and issue.state == "To do"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "30"}, NOW + timedelta(seconds=30)),
        ({"retry-after": "Sun, 01 Mar 2026 12:02:00 GMT"}, NOW + timedelta(minutes=2)),
        ({"x-ratelimit-reset": "2026-03-01T12:05:00Z"}, NOW + timedelta(minutes=5)),
        (
            {"ratelimit-reset": str(int((NOW + timedelta(seconds=90)).timestamp()))},
            NOW + timedelta(seconds=90),
        ),
        ({"retry-after": "0"}, NOW + rest.MIN_BACKOFF),
        ({}, NOW + rest.DEFAULT_BACKOFF),
        ({"retry-after": "soon"}, NOW + rest.DEFAULT_BACKOFF),
    ],
)
def test_when_a_refused_request_may_be_sent_again(headers: dict, expected: datetime) -> None:
    assert rest._retry_at(headers, NOW) == expected


def test_tool_paths_must_be_relative_and_without_dot_segments() -> None:
    ok = parse_arguments({"method": "get", "path": "/tasks/1", "params": {"a": 1}})
    assert ok == ("GET", "/tasks/1", {"a": 1}, None)
    for path in ("tasks/1", "https://x/tasks", "/tasks/%2e%2e/users", "/a/./b", "/a b"):
        result = parse_arguments({"method": "GET", "path": path})
        assert not isinstance(result, tuple), path


def test_the_reference_adapters_provider_keys_are_read_not_reported_unread() -> None:
    from symphony_tui.config.unread import unread_keys

    workflows = [
        {
            "kind": "jira",
            "provider": {"base_url": "u", "email": "e", "api_token": "$T", "project_key": "SD"},
        },
        {"kind": "gitlab", "provider": {"project_path": "g/p", "api_key": "$T", "api_url": "u"}},
        {"kind": "asana", "provider": {"project_gid": "1", "api_key": "$T", "endpoint": "u"}},
    ]
    for tracker in workflows:
        assert unread_keys({"tracker": tracker}) == [], tracker["kind"]


def test_a_did_you_mean_offers_only_the_kinds_own_keys() -> None:
    from symphony_tui.config.unread import unread_warnings

    github = {"tracker": {"kind": "github", "project_id": 3}}
    assert unread_warnings(github)[0].endswith("did you mean tracker.project?")
    asana = {"tracker": {"kind": "asana", "project_id": "1"}}
    assert unread_warnings(asana)[0].endswith("did you mean tracker.project_gid?")
    jira = {"tracker": {"kind": "jira", "provider": {"project_keys": "SD"}}}
    assert unread_warnings(jira)[0].endswith("did you mean tracker.provider.project_key?")
