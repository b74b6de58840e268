"""Where symphony-tui keeps its files, computed without creating anything.

Folders follow the XDG base directory specification through ``platformdirs`` (on Linux:
``$XDG_CONFIG_HOME/symphony-tui``, ``$XDG_STATE_HOME/symphony-tui`` and its ``log`` folder,
defaulting to ``~/.config`` and ``~/.local/state``). Each tracker project (the key of
:func:`~symphony_tui.scheduler.project_lock.project_key_for`) has its own state folder for its
event history, so two projects never share one ``events.jsonl``. Lock files are host-wide
(``$SYMPHONY_LOCK_DIR``, default ``<tmp>/symphony-tui-locks``).

Used by ``symphony-tui paths``, ``doctor``, the console's help screen, the runtime and the
project lock. Imports only ``platformdirs`` and the utilities (nothing here creates a file).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from symphony_tui.observability.logs import LOG_FILE_NAME, default_log_dir, workflow_log_name

APP = "symphony-tui"
EVENTS_FILE_NAME = "events.jsonl"
AUDIT_FILE_NAME = "audit.jsonl"
#: Environment variables that move these folders (shown by ``paths`` and ``--help``).
PATH_ENV_VARS = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "SYMPHONY_LOCK_DIR")


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP))


def state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP))


def screenshots_dir() -> Path:
    """Where the console's palette "Screenshot" saves its SVG files (made on first use)."""
    return state_dir() / "screenshots"


def keymap_file() -> Path:
    """The console's key remapping file (TOML, ``binding_id = "key"``)."""
    return config_dir() / "keymap.toml"


def log_dir(given: Path | None = None) -> Path:
    """The log folder: ``given`` (``--log-dir``), else the user log folder."""
    return Path(given) if given is not None else default_log_dir()


def log_file(workflow: Path, given: Path | None = None) -> Path:
    """The log file of the scheduler of ``workflow``: ``symphony.log`` in the folder
    ``--log-dir`` gives it (``given``), else its own file in the user log folder that every
    scheduler of the user shares (``symphony-<folder>-<hash>.log``,
    :func:`~symphony_tui.observability.logs.workflow_log_name`; ``workflow`` is resolved)."""
    if given is not None:
        return Path(given) / LOG_FILE_NAME
    return default_log_dir() / workflow_log_name(Path(workflow).resolve())


def default_lock_dir() -> Path:
    """``$SYMPHONY_LOCK_DIR`` when set, else ``<system temp>/symphony-tui-locks``."""
    configured = os.environ.get("SYMPHONY_LOCK_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path(tempfile.gettempdir()) / "symphony-tui-locks"


def lock_file_for(project_key: str, lock_dir: Path | None = None) -> Path:
    """The lock file of ``project_key`` in ``lock_dir`` (default :func:`default_lock_dir`)."""
    directory = Path(lock_dir) if lock_dir is not None else default_lock_dir()
    digest = hashlib.sha256(project_key.encode("utf-8")).hexdigest()[:32]
    return directory / f"{digest}.lock"


def project_state_dir(project_key: str, base: Path | None = None) -> Path:
    """The state folder of one tracker project: ``<state>/projects/<name>-<hash>``, where
    ``name`` is a readable tail of the key (file-name safe) and ``hash`` 12 hex digits of
    its SHA-256, so different keys never share a folder."""
    digest = hashlib.sha256(project_key.encode("utf-8")).hexdigest()[:12]
    tail = re.split(r"[/#:\\]", project_key.rstrip("/#"))[-1]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", tail).strip("-.")[:40] or "project"
    return (base or state_dir()) / "projects" / f"{name}-{digest}"


def events_file(project_key: str, base: Path | None = None) -> Path:
    """The project's event history (JSONL, rotated by size; see the scheduler's event log)."""
    return project_state_dir(project_key, base) / EVENTS_FILE_NAME


def audit_file(project_key: str, base: Path | None = None) -> Path:
    """The project's audit log of operator actions (JSONL, rotated by size)."""
    return project_state_dir(project_key, base) / AUDIT_FILE_NAME


@dataclass(frozen=True)
class ProjectPaths:
    """The files one workflow's scheduler uses."""

    project_key: str
    log_file: Path
    events_file: Path
    lock_file: Path
    audit_file: Path
    workspace_root: Path


def project_paths(
    project_key: str, workspace_root: Path | str, workflow: Path, given_log_dir: Path | None = None
) -> ProjectPaths:
    """The paths of the project ``project_key`` (from ``project_key_for(settings)``) whose
    workflow file is ``workflow``; ``given_log_dir``: ``--log-dir``."""
    return ProjectPaths(
        project_key=project_key,
        log_file=log_file(workflow, given_log_dir),
        events_file=events_file(project_key),
        lock_file=lock_file_for(project_key),
        audit_file=audit_file(project_key),
        workspace_root=Path(workspace_root),
    )


def user_paths(given_log_dir: Path | None = None) -> list[tuple[str, Path]]:
    """``(label, path)`` rows for the folders every project shares."""
    return [
        ("config", config_dir()),
        ("keymap", keymap_file()),
        ("logs", log_dir(given_log_dir)),
        ("state", state_dir()),
        ("screenshots", screenshots_dir()),
        ("locks", default_lock_dir()),
    ]


def project_rows(paths: ProjectPaths) -> list[tuple[str, Path | str]]:
    return [
        ("project", paths.project_key),
        ("log", paths.log_file),
        ("events", paths.events_file),
        ("audit", paths.audit_file),
        ("lock file", paths.lock_file),
        ("workspaces", paths.workspace_root),
    ]


WORKFLOW_FILE_NAME = "WORKFLOW.md"


def workflow_in(path: Path) -> Path:
    """``path``, or the ``WORKFLOW.md`` in it when it is a folder (there or not: the caller
    says what is missing). A path that cannot be looked at is returned as it is."""
    try:
        return path / WORKFLOW_FILE_NAME if path.is_dir() else path
    except OSError:
        return path


def resolve_workflow_path(explicit: str | Path | None) -> Path:
    """The workflow file to use (spec §5.1): the explicit path when given (a folder names
    the ``WORKFLOW.md`` in it, as a fleet's target does), else ``WORKFLOW.md`` in the
    current working directory. Here rather than beside the loader (config/workflow.py) so
    that the CLI finds the file without importing YAML, pydantic and Liquid before the
    console's first frame."""
    if explicit:
        return workflow_in(Path(explicit).expanduser())
    return Path.cwd() / WORKFLOW_FILE_NAME
