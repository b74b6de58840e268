"""What the console imports before its first frame.

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
    "symphony_tui.scheduler.history.eventlog",
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


#: runs the real command line on a pseudo-terminal; at the first frame (when the console
#: would start building the scheduler) writes the imported modules to the file in argv[1]
AT_FIRST_FRAME = """
import json, os, sys
import symphony_tui.console.app
from symphony_tui.console.lifecycle import Lifecycle

def first_frame(self):
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
    os._exit(0)

Lifecycle.begin_start = first_frame
from symphony_tui.cli import main
main(sys.argv[2:])
"""


def test_the_command_line_paints_its_first_frame_before_importing_them(tmp_path):
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    import time

    (tmp_path / "issues.yaml").write_text("issues: []\n")
    (tmp_path / "WORKFLOW.md").write_text(
        "---\ntracker:\n  kind: local\n  path: issues.yaml\n---\nWork on it.\n"
    )
    found = tmp_path / "modules.json"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    argv = [sys.executable, "-c", AT_FIRST_FRAME, str(found), "WORKFLOW.md", "--no-lock"]
    argv += ["--log-dir", str(tmp_path / "logs")]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    modules = json.loads(found.read_text())
    assert "symphony_tui.console.screens.main" in modules
    early = sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in LATER))
    assert early == []
