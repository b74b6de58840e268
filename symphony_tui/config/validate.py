"""Dispatch preflight validation (spec §6.3).

Run at start-up (a failure fails start-up) and before every dispatch (a failure skips
dispatch for that tick; reconciliation still runs). Each problem is one line, prefixed
with the spec's error category where there is one (§11.4).
"""

from __future__ import annotations

from pathlib import Path

from symphony_tui.config.settings import Settings

SUPPORTED_TRACKERS = ("linear", "local")


def validate_dispatch(settings: Settings) -> list[str]:
    """Problems that prevent polling or launching workers; ``[]`` when dispatch may go on."""
    problems: list[str] = []
    tracker = settings.tracker
    kind = (tracker.kind or "").strip().lower()
    if not kind:
        problems.append(
            "missing_tracker_kind: tracker.kind is not set (use one of: "
            + ", ".join(SUPPORTED_TRACKERS)
            + ")"
        )
    elif kind not in SUPPORTED_TRACKERS:
        problems.append(
            f"unsupported_tracker_kind: tracker.kind {tracker.kind!r} is not supported "
            f"(use one of: {', '.join(SUPPORTED_TRACKERS)})"
        )
    elif kind == "linear":
        if not tracker.api_key:
            problems.append(
                "missing_tracker_api_key: tracker.api_key is empty "
                "(set it, or $LINEAR_API_KEY in the environment)"
            )
        if not tracker.project_slug:
            problems.append("missing_tracker_project_slug: tracker.project_slug is not set")
    elif kind == "local":
        if not tracker.path:
            problems.append("local_tracker_file: tracker.path is not set for tracker.kind local")
        elif not Path(tracker.path).is_file():
            problems.append(f"local_tracker_file: tracker.path {tracker.path} is not a file")

    backend = settings.agent.backend
    if backend == "codex" and not settings.codex.command.strip():
        problems.append("invalid_agent_config: codex.command is empty")
    elif backend == "openhands" and not (settings.openhands.base_url or settings.openhands.command):
        problems.append(
            "invalid_agent_config: agent.backend openhands needs openhands.base_url "
            "or openhands.command"
        )
    elif backend == "opencode" and not (settings.opencode.base_url or settings.opencode.command):
        problems.append(
            "invalid_agent_config: agent.backend opencode needs opencode.base_url "
            "or opencode.command"
        )
    return problems
