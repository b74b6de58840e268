"""``symphony-tui ps`` and ``stop`` against API notes in a private folder, and a second
console that cannot attach to the project's scheduler saying why."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys

import pytest

from symphony_tui.api import announce
from symphony_tui.schedulers_command import run_ps, run_stop


def note_for(directory, pid: int, project: str, port: int | None = 9) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{pid}.json").write_text(
        json.dumps(
            {
                "pid": pid,
                "host": "127.0.0.1",
                "port": port,
                "project": project,
                "workflow": f"/work/{project}/WORKFLOW.md",
                "started_at": "2026-01-01T00:00:00+00:00",
            }
        )
    )


def _sleep():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


sleeper = pytest.fixture(_sleep)
other_sleeper = pytest.fixture(_sleep)


def test_ps_lists_live_schedulers_only_and_marks_what_did_not_answer(tmp_path, sleeper):
    notes = tmp_path / "api"
    note_for(notes, sleeper.pid, "local:/work/alpha/issues.yaml")
    note_for(notes, 2**22 + 12345, "local:/work/gone/issues.yaml")  # no such process
    out = io.StringIO()
    assert run_ps(out=out, directory=notes) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["PROJECT", "PID", "SINCE", "RUNNING", "APPROVALS", "API"]
    assert len(lines) == 2 and "alpha" in lines[1] and "gone" not in out.getvalue()
    assert lines[1].split()[-3:] == ["?", "?", "http://127.0.0.1:9"]  # port 9 answers nothing
    out = io.StringIO()
    run_ps(as_json=True, out=out, directory=notes)
    row = json.loads(out.getvalue())
    assert row["pid"] == sleeper.pid and row["running"] is None


def test_stop_by_project_sends_the_graceful_signal_and_waits(tmp_path, sleeper):
    notes = tmp_path / "api"
    note_for(notes, sleeper.pid, "local:/work/alpha/issues.yaml")
    err = io.StringIO()
    assert run_stop("alpha", directory=notes, err=err, timeout=20) == 0
    assert sleeper.wait(timeout=5) == -15  # SIGTERM: the scheduler's graceful stop
    assert f"stopped the scheduler of local:/work/alpha/issues.yaml (pid {sleeper.pid})" in (
        err.getvalue()
    )


def test_stop_refuses_what_it_cannot_name_exactly(tmp_path, sleeper, other_sleeper, monkeypatch):
    notes = tmp_path / "api"
    note_for(notes, sleeper.pid, "local:/work/alpha/issues.yaml")
    note_for(notes, other_sleeper.pid, "local:/home/alpha/issues.yaml")
    err = io.StringIO()
    assert run_stop("nothing-like-it", directory=notes, err=err) == 1
    assert run_stop("alpha", directory=notes, err=err) == 1  # two match: none is stopped
    assert "matches several schedulers" in err.getvalue()
    assert sleeper.poll() is None and other_sleeper.poll() is None
    monkeypatch.chdir(tmp_path)  # no WORKFLOW.md here
    assert run_stop(None, directory=notes, err=err) == 1
    assert "no WORKFLOW.md here" in err.getvalue()


def test_stop_with_a_workflow_file_that_is_not_there_stops_nothing(tmp_path, sleeper, monkeypatch):
    """``stop WORKFLOW.md`` in a folder without one must not stop some other project whose
    workflow file has the same name."""
    notes = tmp_path / "api"
    note_for(notes, sleeper.pid, "local:/work/alpha/issues.yaml")
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    assert run_stop("WORKFLOW.md", directory=notes, err=err) == 1
    assert run_stop("WORKFLOW", directory=notes, err=err) == 1
    assert sleeper.poll() is None
    assert f"no workflow file at {tmp_path / 'WORKFLOW.md'}" in err.getvalue()
    assert "no running scheduler matches 'WORKFLOW'" in err.getvalue()
    assert run_stop("/work/alpha/WORKFLOW.md", directory=notes, err=err, timeout=20) == 1
    assert sleeper.poll() is None  # that path does not exist here either: nothing is stopped


def test_stop_by_the_workflow_path_in_the_note(tmp_path, sleeper):
    notes = tmp_path / "api"
    note_for(notes, sleeper.pid, "local:/work/alpha/issues.yaml")
    workflow = tmp_path / "alpha" / "WORKFLOW.md"
    workflow.parent.mkdir()
    workflow.write_text("---\ntracker:\n  kind: local\n  path: issues.yaml\n---\nhi\n")
    note = json.loads((notes / f"{sleeper.pid}.json").read_text())
    note["workflow"] = str(workflow)
    (notes / f"{sleeper.pid}.json").write_text(json.dumps(note))
    err = io.StringIO()
    assert run_stop(str(workflow), directory=notes, err=err, timeout=20) == 0, err.getvalue()
    assert sleeper.wait(timeout=5) == -15


def test_stop_by_the_folder_holding_the_workflow(tmp_path, sleeper):
    """``stop ~/fleet-try/web``: a folder names its WORKFLOW.md, as for ``fleet``."""
    notes = tmp_path / "api"
    note_for(notes, sleeper.pid, "local:/work/alpha/issues.yaml")
    workflow = tmp_path / "alpha" / "WORKFLOW.md"
    workflow.parent.mkdir()
    workflow.write_text("---\ntracker:\n  kind: local\n  path: issues.yaml\n---\nhi\n")
    note = json.loads((notes / f"{sleeper.pid}.json").read_text())
    note["workflow"] = str(workflow)
    (notes / f"{sleeper.pid}.json").write_text(json.dumps(note))
    err = io.StringIO()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_stop(str(empty), directory=notes, err=err) == 1  # no WORKFLOW.md in it
    assert f"no workflow file at {empty / 'WORKFLOW.md'}" in err.getvalue()
    assert sleeper.poll() is None
    assert run_stop(str(workflow.parent), directory=notes, err=err, timeout=20) == 0, err.getvalue()
    assert sleeper.wait(timeout=5) == -15


def test_stop_names_a_workflow_whose_project_nobody_runs(tmp_path):
    (tmp_path / "issues.yaml").write_text("issues: []\n")
    (tmp_path / "WORKFLOW.md").write_text(
        "---\ntracker:\n  kind: local\n  path: issues.yaml\nworkspace:\n  root: ws\n---\nhi\n"
    )
    err = io.StringIO()
    assert run_stop(str(tmp_path / "WORKFLOW.md"), err=err) == 1
    assert "no scheduler runs local:" in err.getvalue()


def test_a_second_console_that_cannot_attach_says_why(tmp_path, monkeypatch):
    from symphony_tui.cli import _AlreadyRunning, _attach_to_running
    from symphony_tui.console.starting import StartFailed

    monkeypatch.setattr(announce, "default_dir", lambda: tmp_path / "api")
    locked = _AlreadyRunning("project_locked: another scheduler (pid 1 on h)", {"pid": 1})
    with pytest.raises(StartFailed) as raised:
        asyncio.run(_attach_to_running(locked, [], tmp_path / "WORKFLOW.md"))
    assert str(raised.value).startswith("project_locked: another scheduler")
    assert "serves no API this user can attach to" in str(raised.value)


def test_ps_lists_a_headless_scheduler_without_an_api_too(tmp_path, sleeper):
    notes = tmp_path / "api"
    note_for(notes, sleeper.pid, "local:/work/beta/issues.yaml", port=None)
    out = io.StringIO()
    run_ps(out=out, directory=notes)
    assert out.getvalue().splitlines()[1].split()[-3:] == ["?", "?", "-"]


def test_the_attached_notice_says_since_when_in_local_time():
    from datetime import UTC, datetime, timedelta

    from symphony_tui.cli import _since

    now = datetime.now(UTC).replace(microsecond=0)
    local = now.astimezone()
    assert _since(now.isoformat()) == f" since {local:%H:%M}"
    earlier = (now - timedelta(days=3)).astimezone()
    assert _since((now - timedelta(days=3)).isoformat()) == f" since {earlier:%Y-%m-%d %H:%M}"
    assert _since(None) == "" and _since("yesterday") == ""


def test_stop_reason_names_what_stopped_the_scheduler(tmp_path):
    """A stop request left by ``symphony-tui stop`` is read once; a bare signal is named."""
    from symphony_tui.scheduler.audit import local_operator
    from symphony_tui.schedulers_command import stop_command_from, stop_reason

    notes = tmp_path / "api"
    assert stop_reason("SIGTERM", notes) == "stopped by SIGTERM"
    announce.request_stop(notes, os.getpid(), "ann@box")
    assert stop_reason("SIGTERM", notes) == "stopped by `symphony-tui stop` from ann@box"
    assert stop_reason("SIGTERM", notes) == "stopped by SIGTERM"  # told once
    assert stop_reason("SIGINT", notes) == "stopped by SIGINT"
    stop_command_from("bob@laptop via api 127.0.0.1:4000")
    assert stop_reason("SIGTERM", notes) == (
        "stopped by an attached console's stop (bob@laptop via api 127.0.0.1:4000)"
    )
    assert local_operator()  # `stop` names this user: see the end-to-end test below


def test_symphony_tui_stop_is_named_in_the_stopping_frame_and_the_log(tmp_path):
    """``symphony-tui stop`` of a headless scheduler: the event stream's last frame and the
    scheduler's log say who stopped it, not a bare signal."""
    import threading

    import httpx

    from symphony_tui.scheduler.audit import local_operator
    from tests.conformance.conftest import child_env, cli, write_project
    from tests.helpers import until_blocking

    project = write_project(tmp_path / "project", [])
    env = child_env(XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path / "home"))
    logs = tmp_path / "logs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "symphony_tui.cli", "--headless", "--port", "0", "--log-dir", logs],
        cwd=project.folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    frames: list[str] = []
    try:
        notes = tmp_path / "state" / "symphony-tui" / "api"
        note = until_blocking(
            lambda: next(iter(announce.live_notes(notes)), None), 60.0, what="the API note"
        )
        token = announce.read_token(note)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        opened = threading.Event()

        def read_stream() -> None:
            url = f"http://127.0.0.1:{note['port']}/api/v1/stream"
            with httpx.stream("GET", url, headers=headers, timeout=60) as response:
                opened.set()
                frames.extend(response.iter_lines())

        reader = threading.Thread(target=read_stream, daemon=True)
        reader.start()
        assert opened.wait(30)
        stopped = cli("stop", "WORKFLOW.md", cwd=project.folder, env=env)
        assert stopped.returncode == 0, stopped.stderr
        reader.join(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    said = f"stopped by `symphony-tui stop` from {local_operator()}"
    data = frames[frames.index("event: stopping") + 1].removeprefix("data: ")
    assert json.loads(data)["reason"] == said
    log = (logs / "symphony.log").read_text()
    assert "scheduler stopping" in log and said in log
    assert not list(notes.glob("*.stop"))  # the request was read and removed


def test_doctor_names_the_running_scheduler_and_its_api(tmp_path, monkeypatch, sleeper):
    from symphony_tui.doctor import _running_scheduler

    notes = tmp_path / "api"
    monkeypatch.setattr(announce, "default_dir", lambda: notes)
    note_for(notes, sleeper.pid, "local:/work/alpha/issues.yaml", port=4711)
    owner = {"pid": sleeper.pid, "host": "box", "started_at": "2026-01-01T07:18:00+00:00"}
    assert _running_scheduler(owner) == (
        f"this project's scheduler runs (pid {sleeper.pid} on box since 2026-01-01 07:18:00 "
        "UTC, API http://127.0.0.1:4711): `symphony-tui WORKFLOW.md` attaches to it, "
        "`symphony-tui stop` ends it"
    )
    assert "its owner not recorded yet" in _running_scheduler({})


def test_a_console_waits_for_a_scheduler_that_is_still_starting(tmp_path, monkeypatch):
    """Two consoles started at once: the one that lost the lock finds the winner still
    building (its lock's record, then its API note, not written yet) and waits for its
    note instead of failing; a lock given up meanwhile is said as such."""
    from symphony_tui.cli import _AlreadyRunning, _owner_note
    from symphony_tui.console.starting import StartFailed
    from symphony_tui.scheduler.project_lock import ProjectLock

    notes = tmp_path / "api"
    monkeypatch.setattr(announce, "default_dir", lambda: notes)
    lock = ProjectLock.acquire("local:/work/race/issues.yaml", tmp_path / "locks")

    async def race() -> tuple[object, dict | None]:
        async def api_up() -> None:
            await asyncio.sleep(0.3)
            announce.write(notes, host="127.0.0.1", port=4711, token=True)

        up = asyncio.ensure_future(api_up())
        found = await _owner_note(_AlreadyRunning("project_locked: x", {}, lock.path))
        await up
        return found

    pid, note = asyncio.run(race())
    assert pid == os.getpid() and note is not None and note["port"] == 4711
    lock.release()
    with pytest.raises(StartFailed, match="it stopped before this console attached"):
        asyncio.run(_owner_note(_AlreadyRunning("project_locked: x", {}, lock.path)))


def test_stop_takes_a_whole_name_never_a_piece_of_one(tmp_path, sleeper):
    """A stop ends agents: ``eb`` must not find ``web``; the project as ``ps`` prints it
    and the folder's name do."""
    notes = tmp_path / "api"
    note_for(notes, sleeper.pid, "local:/work/web/issues.yaml")
    err = io.StringIO()
    for piece in ("eb", "we", "web/issues", "issues", "work"):
        assert run_stop(piece, directory=notes, err=err) == 1, piece
    assert sleeper.poll() is None
    assert "no running scheduler matches 'eb'" in err.getvalue()
    assert run_stop("local:/work/web/issues.yaml", directory=notes, err=err, timeout=20) == 0
    assert sleeper.wait(timeout=5) == -15
