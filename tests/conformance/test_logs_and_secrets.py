"""Spec §17.6 / §13 / §15.3 through real runs: ``key=value`` log lines with ``issue_id``,
``issue_identifier`` and ``session_id`` in the platformdirs log folder, and a registered
API key that never reaches the log file, the event file, the state output or the screen."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from symphony_tui.config.store import WorkflowStore
from symphony_tui.domain import AgentEvent, ApprovalKind, ApprovalRequest, EventKind
from symphony_tui.observability.logs import configure_logging
from symphony_tui.observability.redact import register_secret
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.memory_tracker import MemoryTracker
from symphony_tui_testing.scripted_backend import ScriptedBackend
from tests.scheduler.conftest import make_issue, write_workflow

from .conftest import child_env, cli, issue, write_project

# Not shaped like any known token: only registration can mask it.
SECRET = "conf7Hq2secretZx91w"


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def kv(line: str) -> dict[str, str]:
    return {m[0]: m[1].strip('"') for m in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line)}


def test_real_run_logs_key_value_lines_with_issue_and_session_context_and_no_secrets(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    project = write_project(
        tmp_path / "project",
        [issue(1)],
        # Hooks get the tracker key only when hooks.env asks for it.
        front=(
            'hooks:\n  before_run: echo "hook sees $CONF_TRACKER_KEY"\n'
            "  env:\n    CONF_TRACKER_KEY: $CONF_TRACKER_KEY\n"
        ),
    )
    text = project.workflow.read_text()
    project.workflow.write_text(
        text.replace("  path: issues.yaml\n", "  path: issues.yaml\n  api_key: $CONF_TRACKER_KEY\n")
    )
    done = cli(
        "--headless", "--exit-when-idle", cwd=project.folder,
        env=child_env(HOME=str(home), CONF_TRACKER_KEY=SECRET),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    log_dir = Path(platformdirs.user_log_dir("symphony-tui").replace(str(Path.home()), str(home)))
    # the scheduler's own file in the folder: named by its workflow's folder
    (log_file,) = log_dir.glob("symphony-*.log")
    assert re.fullmatch(r"symphony-project-[0-9a-f]{8}\.log", log_file.name), log_file.name
    lines = log_file.read_text().splitlines()
    records = [kv(line) for line in lines]
    assert all({"ts", "level", "logger", "msg"} <= set(r) for r in records)
    turn = [r for r in records if r["msg"] == "turn_completed"]
    assert turn, "no turn_completed line"
    assert turn[0]["issue_id"] == "c-1" and turn[0]["issue_identifier"] == "CONF-1"
    assert re.fullmatch(r"[0-9a-f-]{36}-[0-9a-f-]{36}", turn[0]["session_id"])
    ended = [r for r in records if r["msg"] == "run ended"]
    assert ended[0]["session_id"] == turn[0]["session_id"] and ended[0]["outcome"] == "normal"
    hook = [r for r in records if r["msg"] == "hook finished" and r.get("hook") == "before_run"]
    assert hook and hook[0]["issue_identifier"] == "CONF-1"
    # The key went through a hook's output and the whole run: it is nowhere.
    # each project has its own event history under the state folder (`symphony-tui paths`)
    state = home / ".local" / "state" / "symphony-tui"
    (events,) = state.glob("projects/*/events.jsonl")
    assert events.is_file()
    for where in (log_file.read_text(), events.read_text(), done.stdout, done.stderr):
        assert SECRET not in where
    assert "hook sees ***" in events.read_text()


def test_two_projects_schedulers_log_to_files_of_their_own_in_one_folder(tmp_path):
    """Each scheduler rotates its log file by size, which one file shared by two processes
    does not survive: each has its own, beside the others, even when their workflows'
    folders share a name, and ``paths`` names it."""
    home = tmp_path / "home"
    home.mkdir()
    env = child_env(HOME=str(home), XDG_STATE_HOME="", XDG_CONFIG_HOME="")
    projects = [write_project(tmp_path / side / "app", []) for side in ("a", "b")]
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "symphony_tui.cli", "--headless", "--exit-when-idle"],
            cwd=p.folder, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for p in projects
    ]  # fmt: skip
    said = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], said
    named = [cli("paths", "--json", cwd=p.folder, env=env) for p in projects]
    files = [Path(json.loads(done.stdout)["log"]) for done in named]
    assert files[0] != files[1] and files[0].parent == files[1].parent
    assert sorted(files[0].parent.iterdir()) == sorted(files)  # no shared symphony.log
    for run, path, (_, err) in zip(runs, files, said, strict=True):
        assert re.fullmatch(r"symphony-app-[0-9a-f]{8}\.log", path.name)
        assert f"log: {path}" in err  # what the scheduler says it writes
        pids = {kv(line)["pid"] for line in path.read_text().splitlines()}
        assert pids == {str(run.pid)}, pids


async def test_a_registered_api_key_never_reaches_logs_events_or_the_screen(
    tmp_path, monkeypatch, restore_logging
):
    from symphony_tui.console.app import SymphonyApp

    monkeypatch.setenv("CONF_TRACKER_KEY", SECRET)
    log_file = configure_logging(tmp_path / "logs")
    path = write_workflow(
        tmp_path,
        'hooks:\n  before_run: echo "marker-hook $CONF_TRACKER_KEY"\n',
        prompt="Work on {{ issue.identifier }}",
    )
    text = path.read_text()
    path.write_text(
        text.replace("  path: issues.yaml\n", "  path: issues.yaml\n  api_key: $CONF_TRACKER_KEY\n")
    )
    store = WorkflowStore(path)
    settings = store.load_initial().settings
    assert settings.tracker.api_key == SECRET
    register_secret(settings.tracker.api_key)  # what build_runtime does at start-up

    async def leak(session, prompt, turn):
        host = session.host
        host.emit(
            AgentEvent(kind=EventKind.COMMAND_STARTED, message=f"marker-cmd env | grep {SECRET}")
        )
        host.emit(AgentEvent(kind=EventKind.COMMAND_OUTPUT, message=f"KEY={SECRET}\n"))
        host.emit(AgentEvent(kind=EventKind.MESSAGE, message=f"marker-msg the key is {SECRET}"))
        await host.request_approval(
            ApprovalRequest(
                id="ap-1",
                issue_id="",
                kind=ApprovalKind.COMMAND,
                command=f"marker-approval deploy --key {SECRET}",
                summary=f"deploy with {SECRET}",
            )
        )
        return await session.wait_interrupt()

    backend = ScriptedBackend(leak)
    orch = Orchestrator(
        store,
        MemoryTracker([make_issue(1)]),
        WorkspaceManager(lambda: store.current.settings),
        lambda name: backend,
        event_log=EventHistory(jsonl_path=tmp_path / "events.jsonl"),
        watch_workflow=False,
    )
    app = SymphonyApp(orch, runner=orch.run, shutdown=orch.shutdown, cursor_blink=False)
    screens: dict[str, str] = {}
    async with app.run_test(size=(160, 45)) as pilot:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not orch.snapshot().approvals:
            assert loop.time() < deadline, "the scripted agent never asked"
            await pilot.pause(0.05)
        # streamed text repaints at most once a second (LIVE_TEXT_S): wait for it to show
        screens["main"] = app.export_screenshot()
        while "marker-msg" not in screens["main"] and loop.time() < deadline:
            await pilot.pause(0.1)
            screens["main"] = app.export_screenshot()
        await pilot.press("v")
        await pilot.pause(0.3)
        screens["approvals"] = app.export_screenshot()
        await pilot.press("escape")
        await pilot.press("2")
        await pilot.pause(0.2)
        await pilot.press("enter")
        await pilot.pause(0.5)
        screens["worker"] = app.export_screenshot()
        await orch.shutdown()
        app.exit()
    # Positive controls: the text around the key did reach each place.
    assert "marker-msg" in screens["main"] and "marker-approval" in screens["approvals"]
    assert "marker-cmd" in screens["worker"]
    files = {
        "log": log_file.read_text(),
        "events": (tmp_path / "events.jsonl").read_text(),
    }
    assert "marker-hook" in files["events"] and "marker-msg" in files["log"]
    for name, text in {**screens, **files}.items():
        assert SECRET not in text, f"the key reached the {name}"
        assert SECRET[4:14] not in text, f"part of the key reached the {name}"
    snapshot = orch.snapshot()
    assert SECRET not in json.dumps(snapshot.state_payload(), default=str)
