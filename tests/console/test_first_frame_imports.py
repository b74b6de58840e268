"""What the console imports before its first frame (issue 11: launch to first frame).

The first frame is painted before the scheduler is built (console/starting.py), so the
console's modules must not pull in the layers only a running scheduler needs: pydantic and
the domain models, the workflow settings, the scheduler core, the other screens. A fresh
interpreter imports what ``symphony-tui`` imports to paint it and lists what came along.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: imported by ``symphony-tui`` up to the console's first frame (cli._console)
FIRST_FRAME = (
    "import symphony_tui.cli, symphony_tui.console.app, symphony_tui.console.starting, "
    "symphony_tui.observability.logs"
)

#: modules (and their submodules) that must wait until after the first frame
LATER = (
    "pydantic",
    "pydantic_core",
    "symphony_tui.config",
    "symphony_tui.agents",
    "symphony_tui.trackers",
    "symphony_tui.workspaces",
    "symphony_tui.api",
    "symphony_tui.scheduler.orchestrator",
    "symphony_tui.scheduler.eventlog",
    "symphony_tui.domain.events",
    "symphony_tui.domain.snapshot",
    "symphony_tui.domain.approvals",
    "symphony_tui.domain.commands",
    "symphony_tui.console.screens.worker",
    "symphony_tui.console.screens.recovered",
    "symphony_tui.console.screens.diff",
    "symphony_tui.console.screens.audit",
    "symphony_tui.console.screens.hosts",
    "symphony_tui.console.screens.approvals",
    "symphony_tui.console.screens.help",
    "rich.pretty",
    "httpx",
    "yaml",
    "liquid",
)


def _imported(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_the_first_frame_imports_none_of_what_a_running_scheduler_needs():
    modules = _imported(FIRST_FRAME)
    early = sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in LATER))
    assert early == []


def test_the_domain_package_loads_a_model_module_only_when_asked_for_one():
    modules = _imported("from symphony_tui.domain import ClaimState, EventKind, RunStatus")
    assert "symphony_tui.domain.kinds" in modules
    assert "pydantic" not in modules and "symphony_tui.domain.snapshot" not in modules
    modules = _imported("from symphony_tui.domain import Snapshot")
    assert "symphony_tui.domain.snapshot" in modules and "pydantic" in modules


def test_the_domain_package_exports_every_name_it_lists():
    import symphony_tui.domain as domain
    from symphony_tui.domain import kinds, run

    for name in domain.__all__:
        assert getattr(domain, name) is not None
    assert domain.EventKind is kinds.EventKind and run.RunStatus is kinds.RunStatus
    try:
        domain.NoSuchModel  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchModel" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
