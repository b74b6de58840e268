"""Spec §6.3 / §17.1: dispatch preflight validation (tracker kind, credentials, agent)."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.config.settings import resolve_settings
from symphony_tui.config.validate import SUPPORTED_TRACKERS, validate_dispatch


def settings(raw: dict, tmp_path: Path, env: dict | None = None):
    return resolve_settings(raw, tmp_path, env or {})


def test_valid_linear_config_passes(tmp_path: Path) -> None:
    s = settings({"tracker": {"kind": "linear", "api_key": "k", "project_slug": "p"}}, tmp_path)
    assert validate_dispatch(s) == []


def test_tracker_kind_must_be_present(tmp_path: Path) -> None:
    problems = validate_dispatch(settings({}, tmp_path))
    assert len(problems) == 1 and problems[0].startswith("missing_tracker_kind:")


def test_tracker_kind_validation_enforces_supported_kinds(tmp_path: Path) -> None:
    problems = validate_dispatch(settings({"tracker": {"kind": "youtrack"}}, tmp_path))
    assert problems == [
        "unsupported_tracker_kind: tracker.kind 'youtrack' is not supported (use one of: "
        + ", ".join(SUPPORTED_TRACKERS)
        + ")"
    ]
    assert {"linear", "local", "github", "jira", "gitlab", "asana"} <= set(SUPPORTED_TRACKERS)


def test_linear_needs_api_key_after_var_resolution_and_project_slug(tmp_path: Path) -> None:
    s = settings({"tracker": {"kind": "linear", "api_key": "$EMPTY"}}, tmp_path, {"EMPTY": ""})
    problems = validate_dispatch(s)
    assert [p.split(":")[0] for p in problems] == [
        "missing_tracker_api_key",
        "missing_tracker_project_slug",
    ]


def test_local_tracker_needs_an_existing_file(tmp_path: Path) -> None:
    missing = validate_dispatch(settings({"tracker": {"kind": "local"}}, tmp_path))
    assert missing == ["local_tracker_file: tracker.path is not set for tracker.kind local"]
    absent = validate_dispatch(
        settings({"tracker": {"kind": "local", "path": "issues.yaml"}}, tmp_path)
    )
    assert len(absent) == 1 and "is not a file" in absent[0]
    (tmp_path / "issues.yaml").write_text("issues: []\n")
    assert (
        validate_dispatch(settings({"tracker": {"kind": "local", "path": "issues.yaml"}}, tmp_path))
        == []
    )


def test_codex_command_must_be_non_empty(tmp_path: Path) -> None:
    s = settings(
        {
            "tracker": {"kind": "linear", "api_key": "k", "project_slug": "p"},
            "codex": {"command": "   "},
        },
        tmp_path,
    )
    assert validate_dispatch(s) == ["invalid_agent_config: codex.command is empty"]


def test_openhands_and_opencode_need_a_base_url_or_command(tmp_path: Path) -> None:
    base = {"tracker": {"kind": "linear", "api_key": "k", "project_slug": "p"}}
    for backend in ("openhands", "opencode"):
        bad = settings({**base, "agent": {"backend": backend}}, tmp_path)
        assert len(validate_dispatch(bad)) == 1
        assert backend in validate_dispatch(bad)[0]
        url = settings(
            {**base, "agent": {"backend": backend}, backend: {"base_url": "http://127.0.0.1:1"}},
            tmp_path,
        )
        assert validate_dispatch(url) == []
        cmd = settings(
            {**base, "agent": {"backend": backend}, backend: {"command": "serve"}}, tmp_path
        )
        assert validate_dispatch(cmd) == []
