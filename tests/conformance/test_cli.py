"""Spec §17.7 (CLI and host lifecycle), one scheduler per project, and ``doctor``.

Every test runs the real command line in a child process (``python -m symphony_tui.cli``)
on a throwaway local-tracker project whose agent is the bundled demo agent driven through
the real codex backend, so a run really starts, works and stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import child_env, cli, issue, write_project

STARTED = "scheduler starting"


# What headless mode says about itself on start (where it runs and logs), not an error.
INFO_PREFIXES = ("symphony-tui: running ", "symphony-tui: HTTP API on ", "symphony-tui: demo copy")


def one_line(stderr: str) -> str:
    lines = [
        line for line in stderr.splitlines() if line.strip() and not line.startswith(INFO_PREFIXES)
    ]
    assert len(lines) == 1, f"expected one error line, got: {stderr!r}"
    assert "Traceback" not in stderr
    return lines[0]


def start_headless(project_dir: Path, log_dir: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "symphony_tui.cli",
            "--headless",
            "--log-dir",
            str(log_dir),
            *list(extra),
        ],
        cwd=project_dir,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def wait_for_log(log_file: Path, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Wait until the child's log file holds ``text`` (the child announces itself there)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log_file.is_file() and text in log_file.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.returncode} {proc.stderr.read()}")
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {log_file}")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_cli_accepts_an_optional_positional_workflow_path(tmp_path):
    project = write_project(tmp_path / "project", [issue(1)])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = cli(
        "--headless", "--exit-when-idle", "--log-dir", str(tmp_path / "logs"),
        str(project.workflow), cwd=elsewhere,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "state: Done" in project.issues_file.read_text()
    assert (project.workspaces / "CONF-1").is_dir()
    assert not (elsewhere / "ws").exists()


def test_cli_uses_workflow_md_in_the_cwd_when_no_path_is_given(tmp_path):
    project = write_project(tmp_path / "project", [issue(1)])
    done = cli(
        "--headless", "--exit-when-idle", "--log-dir", str(tmp_path / "logs"), cwd=project.folder
    )
    assert done.returncode == 0, done.stderr
    assert "state: Done" in project.issues_file.read_text()


def test_cli_errors_on_nonexistent_explicit_path_or_missing_default_workflow_md(tmp_path):
    explicit = cli("--headless", str(tmp_path / "nope.md"), cwd=tmp_path)
    assert explicit.returncode != 0
    assert "missing_workflow_file" in one_line(explicit.stderr)
    assert "nope.md" in explicit.stderr
    default = cli("--headless", cwd=tmp_path)
    assert default.returncode != 0
    assert "missing_workflow_file" in one_line(default.stderr)
    assert "WORKFLOW.md" in default.stderr
    doctor = cli("doctor", cwd=tmp_path)
    assert doctor.returncode != 0 and "[FAIL] workflow" in doctor.stdout


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("tracker:\n  kind: redmine\n", "unsupported_tracker_kind"),
        ("tracker:\n  kind: linear\n", "missing_tracker_api_key"),
        ("tracker:\n  kind: local\n  path: gone.yaml\n", "local_tracker_file"),
        ("tracker: [not, a, map]\n", "invalid_settings"),
        ("tracker:\n  kind: local\n  path: [\n", "workflow_parse_error"),
        ("polling:\n  interval_ms: soon\n", "polling.interval_ms"),
    ],
)
def test_cli_surfaces_startup_failure_cleanly(tmp_path, front, expected):
    (tmp_path / "WORKFLOW.md").write_text(f"---\n{front}---\nprompt\n")
    done = cli("--headless", "--log-dir", str(tmp_path / "logs"), cwd=tmp_path)
    assert done.returncode == 1
    assert expected in one_line(done.stderr)


def test_cli_exits_with_success_when_it_starts_and_shuts_down_normally(tmp_path):
    # an issue that waits for an operator's approval keeps its worker running until SIGTERM
    project = write_project(
        tmp_path / "project",
        [issue(1, description="[demo: approval]")],
        front="agent:\n  approvals: operator\n",
    )
    log_dir = tmp_path / "logs"
    proc = start_headless(project.folder, log_dir)
    wait_for_log(log_dir / "symphony.log", "approval", proc)
    code, out, err = stop(proc, signal.SIGTERM)
    assert code == 0, err
    final = json.loads(out.strip().splitlines()[-1])  # the final state line
    assert final["counts"]["running"] == 0 and final["running"] == []
    log = (log_dir / "symphony.log").read_text()
    assert "scheduler stopping" in log and "stopped by SIGTERM" in log


def test_cli_exits_nonzero_when_startup_fails_or_the_host_exits_abnormally(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "WORKFLOW.md").write_text("---\ntracker:\n  kind: jira\n---\nprompt\n")
    failed = cli("--headless", "--log-dir", str(tmp_path / "logs"), cwd=tmp_path)
    assert failed.returncode == 1 and "startup failed" in one_line(failed.stderr)

    # An unexpected crash of the running host: one line and a non-zero exit, no traceback.
    import symphony_tui.headless as headless
    from symphony_tui import cli as cli_module

    async def crash(runtime, **_kwargs):
        raise RuntimeError("host crashed")

    monkeypatch.setattr(headless, "run_headless", crash)
    project = write_project(tmp_path / "project", [])
    code = cli_module.main(
        ["--headless", "--no-lock", "--log-dir", str(tmp_path / "logs"), str(project.workflow)]
    )
    assert code == 1
    line = one_line(capsys.readouterr().err)
    assert "scheduler failed" in line and "host crashed" in line


def test_the_console_without_a_terminal_refuses_at_once(tmp_path):
    # Textual reads stdin and draws on stderr: piped, it would draw into the pipe and spin
    # with its agents running. Nothing starts: no lock, no log, no workspace.
    project = write_project(tmp_path / "project", [issue(1)])
    done = cli("--log-dir", str(tmp_path / "logs"), cwd=project.folder, timeout=30)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert "needs a terminal" in line and "stdin, stdout and stderr are not a TTY" in line
    assert "--headless" in line
    assert not (tmp_path / "logs").exists()
    attach = cli("attach", "http://127.0.0.1:9", cwd=tmp_path, timeout=30)
    assert attach.returncode == 1 and "needs a terminal" in one_line(attach.stderr)


def test_the_console_with_only_stdout_piped_refuses_too(tmp_path):
    # keys and stderr on a terminal, stdout into a pipe: Textual spun in a resize loop
    import pty

    project = write_project(tmp_path / "project", [issue(1)])
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "symphony_tui.cli", "--log-dir", str(tmp_path / "logs")],
        cwd=project.folder,
        env=child_env(),
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        start_new_session=True,  # a regression spins and ignores SIGTERM: kill its group
    )
    os.close(follower)
    try:
        out, _ = proc.communicate(timeout=30)
        said = b""
        with contextlib.suppress(OSError):  # EIO once the child's side is closed
            while chunk := os.read(leader, 4096):
                said += chunk
    finally:
        os.close(leader)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1 and out == b""
    assert b"needs a terminal (stdout is not a TTY)" in said
    assert not (tmp_path / "logs").exists()


def test_exit_when_idle_without_headless_is_an_error(tmp_path):
    project = write_project(tmp_path / "project", [issue(1)])
    for args in (("--exit-when-idle",), ("demo", "--exit-when-idle")):
        done = cli(*args, cwd=project.folder, timeout=30)
        assert done.returncode == 1
        assert "--exit-when-idle needs --headless" in one_line(done.stderr)


def test_second_scheduler_on_the_same_project_refuses_and_names_the_owner(tmp_path):
    project = write_project(tmp_path / "project", [])
    first_logs = tmp_path / "logs-1"
    first = start_headless(project.folder, first_logs)
    try:
        wait_for_log(first_logs / "symphony.log", STARTED, first)
        # another account's HOME (and so another platformdirs state folder): still refused
        other_home = tmp_path / "other-home"
        other_home.mkdir()
        second = cli(
            "--headless",
            "--log-dir",
            str(tmp_path / "logs-2"),
            cwd=project.folder,
            env=child_env(HOME=str(other_home)),
        )
        assert second.returncode == 1
        line = one_line(second.stderr)
        assert "project_locked" in line
        assert f"pid {first.pid}" in line and socket.gethostname() in line
        doctor = cli("doctor", cwd=project.folder, env=child_env(HOME=str(other_home)))
        # a running scheduler is not a failure: the console attaches to it
        assert doctor.returncode == 0, doctor.stdout
        line = next(x for x in doctor.stdout.splitlines() if "project lock" in x)
        assert line.startswith("[ok  ] project lock: this project's scheduler runs")
        assert f"pid {first.pid} on {socket.gethostname()} since 20" in line
        assert "API not this user's" in line  # another HOME: not its note
    finally:
        code, _, err = stop(first)
    assert code == 0, err


def test_second_scheduler_with_another_tmpdir_is_refused(tmp_path):
    # The project-lock folder follows $TMPDIR (per-session on macOS, private under
    # systemd's PrivateTmp), so a second scheduler with another TMPDIR finds a free project
    # lock and would run the same issues in the same workspaces. The workspace-root lock
    # refuses it.
    project = write_project(tmp_path / "project", [])
    first_logs = tmp_path / "logs-1"
    first = start_headless(project.folder, first_logs)
    try:
        wait_for_log(first_logs / "symphony.log", STARTED, first)
        other_tmp = tmp_path / "other-tmp"
        other_tmp.mkdir()
        env = child_env(TMPDIR=str(other_tmp))
        env.pop("SYMPHONY_LOCK_DIR", None)
        second = cli(
            "--headless", "--log-dir", str(tmp_path / "logs-2"), cwd=project.folder, env=env
        )
        assert second.returncode == 1
        line = one_line(second.stderr)
        assert "project_locked" in line and "workspace root" in line
        assert f"pid {first.pid}" in line and socket.gethostname() in line
    finally:
        code, _, err = stop(first)
    assert code == 0, err


def test_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    project = write_project(tmp_path / "project", [issue(1)])
    logs = tmp_path / "logs"
    dead = start_headless(project.folder, logs, "--exit-when-idle")
    wait_for_log(logs / "symphony.log", STARTED, dead)
    dead.kill()  # SIGKILL: no cleanup, the lock file stays behind
    dead.communicate(timeout=30)
    next_one = cli("--headless", "--exit-when-idle", "--log-dir", str(logs), cwd=project.folder)
    assert next_one.returncode == 0, next_one.stderr
    assert "state: Done" in project.issues_file.read_text()


def test_doctor_prints_each_check_and_passes_on_a_good_workflow(tmp_path):
    project = write_project(tmp_path / "project", [issue(1)])
    done = cli("doctor", cwd=project.folder)
    assert done.returncode == 0, done.stdout + done.stderr
    names = ["workflow", "dispatch settings", "workspace root", "agent command",
             "project lock", "tracker"]  # fmt: skip
    for name in names:
        assert f"[ok  ] {name}:" in done.stdout
    assert f"all {len(names)} checks passed" in done.stdout
    assert "local: 1 candidate issues" in done.stdout


def test_doctor_exits_nonzero_and_names_each_failing_check(tmp_path):
    project = write_project(
        tmp_path / "project",
        [],
        front="agent:\n  backend: codex\ncodex:\n  command: no-such-agent-binary app-server\n",
    )
    project.issues_file.unlink()
    done = cli("doctor", str(project.workflow), cwd=tmp_path)
    assert done.returncode == 1
    assert "[ok  ] workflow:" in done.stdout
    assert "[FAIL] dispatch settings: local_tracker_file" in done.stdout
    assert "[FAIL] agent command: 'no-such-agent-binary' not found" in done.stdout
    assert "checks failed" in done.stdout


def test_a_prompt_with_an_unknown_variable_fails_doctor_and_start_up(tmp_path):
    # rendered for a sample issue when the workflow loads: not a failure of every run
    project = write_project(tmp_path / "project", [issue(1)])
    text = project.workflow.read_text()
    project.workflow.write_text(text + "\n{{ issue.titel }}\n")
    line = len(text.splitlines()) + 2
    done = cli("doctor", cwd=project.folder)
    assert done.returncode == 1
    expected = f"template_render_error: issue.titel is undefined (line {line})"
    assert f"[FAIL] workflow: {expected}" in done.stdout
    start = cli("--headless", "--exit-when-idle", cwd=project.folder, timeout=60)
    assert start.returncode == 1 and expected in one_line(start.stderr)
    assert not (project.folder / "ws").exists()


def test_symphony_tui_entry_point_is_installed_and_runs(tmp_path):
    from shutil import which

    exe = which("symphony-tui") or str(Path(sys.executable).parent / "symphony-tui")
    if not os.access(exe, os.X_OK):
        pytest.fail("the symphony-tui entry point is not installed (pip install -e .)")
    done = subprocess.run(
        [exe, "--headless", str(tmp_path / "missing.md")],
        capture_output=True, text=True, env=child_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "missing_workflow_file" in one_line(done.stderr)


def test_headless_names_unread_settings_on_stderr_and_doctor_prints_no_bare_log_line(tmp_path):
    # A mistyped key is the operator's to fix: headless has no console to show it in, so
    # it goes on stderr once, with the did-you-mean; doctor reports it in its own words only.
    project = write_project(tmp_path / "project", [issue(1)], front="agnet:\n  max_turns: 3\n")
    done = cli(
        "--headless", "--exit-when-idle", "--log-dir", str(tmp_path / "logs"), cwd=project.folder
    )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "agnet.max_turns" in line]
    assert warned == [
        "symphony-tui: warning: unknown setting agnet.max_turns is ignored (nothing reads it); "
        "did you mean agent.max_turns?"
    ]
    doctor = cli("doctor", cwd=project.folder, timeout=60)
    assert "workflow setting ignored" not in doctor.stdout + doctor.stderr
    assert "did you mean agent.max_turns?" in doctor.stdout


def test_ctrl_c_during_start_up_is_one_line_and_exit_130(monkeypatch, capsys):
    """Ctrl-C while the command line is still loading (before the console or headless
    mode installs its own handling) ends it with one line, not a traceback."""
    from symphony_tui import cli

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", interrupted)
    assert cli.main(["demo"]) == 130
    assert capsys.readouterr().err == "symphony-tui: interrupted\n"


def test_python_dash_m_symphony_tui_is_the_same_command_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "symphony_tui", "--version"],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("symphony-tui ")
