"""``symphony-tui paths``: print where the files live (see :mod:`symphony_tui.paths`).

Without a WORKFLOW.md argument the one in the current folder is used when present; an
explicit path that does not load is a one-line error (exit 1). Creates nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from symphony_tui.paths import project_paths, project_rows, user_paths


def run_paths(
    workflow: str | None,
    *,
    as_json: bool = False,
    log_dir: Path | None = None,
    out: TextIO | None = None,
) -> int:
    from symphony_tui.config.errors import WorkflowError
    from symphony_tui.config.workflow import load_workflow
    from symphony_tui.paths import resolve_workflow_path
    from symphony_tui.scheduler.project_lock import project_key_for

    out = out or sys.stdout
    rows: list[tuple[str, Path | str]] = list(user_paths(log_dir))
    path = resolve_workflow_path(workflow)
    problem = None
    if workflow is not None or path.is_file():
        try:
            settings = load_workflow(path).settings
        except WorkflowError as exc:
            problem = str(exc)
        except OSError as exc:
            problem = f"missing_workflow_file: {path}: {exc.strerror or exc}"
        else:
            rows.append(("workflow", path.resolve()))
            project = project_paths(
                project_key_for(settings), settings.workspace_root, path.resolve(), log_dir
            )
            rows.extend(project_rows(project))
    if as_json:
        out.write(json.dumps({label.replace(" ", "_"): str(value) for label, value in rows}) + "\n")
    else:
        for label, value in rows:
            out.write(f"{label:<11} {value}\n")
    if problem:
        print(f"symphony-tui: paths: {problem}", file=sys.stderr)
        return 1
    return 0
