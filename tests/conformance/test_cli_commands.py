"""The command line's structure: subcommands, their ``--help``, ``paths``, the demo's
temporary folder, and each usage or start-up error as one line on stderr (spec §17.7)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from symphony_tui import cli as cli_module
from symphony_tui.cli import build_parser, main, normalize_argv

from .conftest import child_env, cli, issue, write_project


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    """``main(argv)`` in this process: (exit code, stdout, stderr); argparse's exits too."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def only_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got: {stderr!r}"
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["run"]),
        (["WORKFLOW.md"], ["run", "WORKFLOW.md"]),
        (["--headless", "WORKFLOW.md"], ["run", "--headless", "WORKFLOW.md"]),
        (["--headless", "demo"], ["demo", "--headless"]),
        (["--headless", "--exit-when-idle", "demo"], ["demo", "--headless", "--exit-when-idle"]),
        (["--log-dir", "demo", "x.md"], ["run", "--log-dir", "demo", "x.md"]),
        (["--port", "0", "doctor"], ["doctor", "--port", "0"]),
        (["doctor", "WORKFLOW.md"], ["doctor", "WORKFLOW.md"]),
        (["--help"], ["--help"]),
        (["--version"], ["--version"]),
        (["--", "demo"], ["run", "--", "demo"]),
    ],
)
def test_the_command_is_found_wherever_it_is_written_and_run_is_the_default(argv, expected):
    assert normalize_argv(argv, build_parser()) == expected


def test_headless_before_demo_runs_the_demo_and_removes_its_folder(tmp_path):
    done = cli(
        "--headless", "demo", "--exit-when-idle", "--log-dir", str(tmp_path / "logs"),
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    final = json.loads(done.stdout.strip().splitlines()[-1])
    assert final["counts"]["running"] == 0 and final["completed"]
    folder = Path(re.search(r"demo copy in (\S+)", done.stderr).group(1))
    assert not folder.exists()
    assert "demo folder kept" not in done.stderr


def test_demo_keep_leaves_the_folder_with_its_event_history(tmp_path):
    done = cli(
        "demo", "--headless", "--exit-when-idle", "--keep", "--log-dir", str(tmp_path / "logs"),
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    folder = Path(re.search(r"demo folder kept: (\S+)", done.stderr).group(1))
    try:
        assert (folder / "WORKFLOW.md").is_file()
        assert (folder / "events.jsonl").stat().st_size > 0
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def test_demo_copy_to_writes_a_project_that_passes_doctor_and_overwrites_nothing(tmp_path):
    folder = tmp_path / "try" / "api"
    done = cli("demo", "--copy-to", str(folder), cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"symphony-tui {folder / 'WORKFLOW.md'}" in done.stdout
    assert {p.name for p in folder.iterdir()} >= {"WORKFLOW.md", "issues.yaml"}
    checked = cli("doctor", str(folder / "WORKFLOW.md"), cwd=tmp_path, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (folder / "issues.yaml").write_text("issues: []\n")
    again = cli("demo", "--copy-to", str(folder), cwd=tmp_path, timeout=60)
    assert again.returncode == 1 and len(again.stderr.strip().splitlines()) == 1
    assert "already has WORKFLOW.md, issues.yaml, README.md" in again.stderr
    assert (folder / "issues.yaml").read_text() == "issues: []\n"
    # a repository's own README is never replaced
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("mine\n")
    refused = cli("demo", "--copy-to", str(repo), cwd=tmp_path, timeout=60)
    assert refused.returncode == 1 and "already has README.md" in refused.stderr
    assert (repo / "README.md").read_text() == "mine\n" and not (repo / "WORKFLOW.md").exists()
    # a path that cannot be made: one line naming it
    blocked = cli("demo", "--copy-to", str(repo / "README.md" / "x"), cwd=tmp_path, timeout=60)
    assert blocked.returncode == 1 and len(blocked.stderr.strip().splitlines()) == 1
    assert "cannot write the demo into" in blocked.stderr and "Errno" not in blocked.stderr


@pytest.mark.parametrize(
    ("command", "names"),
    [
        ("run", ["tracker.kind", "agent.backend", "server.port", "LINEAR_API_KEY",
                 "XDG_STATE_HOME", "--headless", "--exit-when-idle", "--no-lock"]),
        ("demo", ["SYMPHONY_DEMO_SPEED", "--keep", "--headless", "--copy-to"]),
        ("doctor", ["codex.command", "openhands.base_url", "--timeout", "LINEAR_API_KEY"]),
        ("attach", ["server.port", "url"]),
        ("fleet", ["ssh://", "--token-env", "--token-file", "fleet file", "name=NAME"]),
        ("paths", ["XDG_CONFIG_HOME", "SYMPHONY_LOCK_DIR", "--json"]),
    ],
)  # fmt: skip
def test_each_command_has_help_naming_its_settings_and_environment(capsys, command, names):
    code, out, _ = run_main(capsys, command, "--help")
    assert code == 0
    assert out.startswith(f"usage: symphony-tui {command}")
    for name in names:
        assert name in out, name


def test_fleet_help_says_list_exits_1_unless_every_project_is_live(capsys):
    code, out, _ = run_main(capsys, "fleet", "--help")
    words = " ".join(out.split())
    assert code == 0 and "exit 1 when any project is not live" in words
    assert "exit 0 when every project is live, 1 when none is found or any is not" in words


def test_every_workflow_argument_takes_the_folder_holding_it(tmp_path):
    from symphony_tui.paths import resolve_workflow_path

    project = write_project(tmp_path / "project", [issue(1)])
    assert resolve_workflow_path(str(project.folder)) == project.workflow
    assert resolve_workflow_path(str(project.workflow)) == project.workflow
    empty = tmp_path / "empty"
    empty.mkdir()  # nothing there: the file it would be, for the error to name
    assert resolve_workflow_path(str(empty)) == empty / "WORKFLOW.md"


def test_main_help_lists_the_commands_and_where_files_live(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    code, out, _ = run_main(capsys, "--help")
    assert code == 0
    for command in ("run", "demo", "doctor", "attach", "paths"):
        assert re.search(rf"^\s+{command}\s+\S", out, re.M), command
    assert str(tmp_path / "config" / "symphony-tui" / "keymap.toml") in out
    assert re.search(
        rf"^\s+logs\s+{re.escape(str(tmp_path / 'state' / 'symphony-tui' / 'log'))}$", out, re.M
    )


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["run", "--port", "x"], 2, "symphony-tui run: argument --port: 'x' is not a port number"),
        (["--port", "70000"], 2, "argument --port: 70000 is not a port number (0-65535)"),
        (["doctor", "--timeout", "0"], 2, "argument --timeout: 0 is not a positive number"),
        (["doctor", "--timeout", "soon"], 2, "'soon' is not a number of seconds"),
        (["run", "a.md", "b.md"], 2, "unrecognized arguments: b.md"),
        (["attach"], 2, "the following arguments are required: url"),
        (["attach", "http://127.0.0.1:9", "--ssh", "h"], 2, "give a URL or --ssh HOST, not both"),
        (["fleet", "gopher://x"], 2, "fleet: 'gopher://x': a target is a WORKFLOW.md path"),
        (["fleet", "--token-env", "A", "--token-file", "b"], 2, "not allowed with argument"),
        (["--log-level", "LOUD"], 2, "argument --log-level: invalid choice: 'LOUD'"),
        (["demo", "--no-lock"], 2, "symphony-tui demo: unrecognized arguments: --no-lock"),
        (["--exit-when-idle"], 1, "--exit-when-idle needs --headless"),
        (["--headless", "missing.md"], 1, "missing_workflow_file: missing.md does not exist"),
        (["--headless", "no-such-file"], 1, "missing_workflow_file: no-such-file does not exist"),
        (["doctr", "--headless"], 1, "doctr does not exist; did you mean `symphony-tui doctor`?"),
        (["paths", "missing.md"], 1, "symphony-tui: paths: missing_workflow_file"),
    ],
)
def test_each_usage_error_is_one_line_on_stderr(capsys, monkeypatch, tmp_path, argv, code, message):
    monkeypatch.chdir(tmp_path)
    got, _out, err = run_main(capsys, *argv)
    assert got == code
    assert message in only_line(err)


def test_a_folder_without_a_workflow_and_an_unwritable_log_dir_are_one_line(capsys, tmp_path):
    project = write_project(tmp_path / "project", [issue(1)])
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_main(capsys, "--headless", str(empty))
    expected = f"missing_workflow_file: {empty / 'WORKFLOW.md'} does not exist"
    assert code == 1 and expected in only_line(err)
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run_main(
        capsys, "--headless", "--log-dir", str(blocker / "logs"), str(project.workflow)
    )
    assert code == 1 and f"cannot write logs to {blocker / 'logs'}" in only_line(err)


def test_attach_without_a_terminal_does_not_suggest_headless(tmp_path):
    done = cli("attach", "http://127.0.0.1:9", cwd=tmp_path, timeout=30)
    assert done.returncode == 1
    line = only_line(done.stderr)
    assert line.startswith("symphony-tui: attach: the console needs a terminal")
    assert "--headless" not in line and "ssh -t" in line


def test_paths_prints_every_location_and_creates_nothing(tmp_path):
    project = write_project(tmp_path / "project", [issue(1)])
    env = child_env(
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        SYMPHONY_LOCK_DIR=str(tmp_path / "locks"),
    )
    done = cli("paths", cwd=project.folder, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = dict(re.split(r"\s{2,}|(?<=\S) (?=/)", line, maxsplit=1) for line in
                done.stdout.splitlines())  # fmt: skip
    state = tmp_path / "state" / "symphony-tui"
    assert rows["keymap"] == str(tmp_path / "config" / "symphony-tui" / "keymap.toml")
    assert rows["logs"] == str(state / "log")
    # this project's scheduler's own file in the folder every scheduler of the user shares
    assert re.fullmatch(
        re.escape(str(state / "log")) + r"/symphony-project-[0-9a-f]{8}\.log", rows["log"]
    )
    assert rows["locks"] == str(tmp_path / "locks")
    assert rows["workspaces"] == str(project.workspaces)
    assert rows["events"].startswith(str(state / "projects" / "issues.yaml-"))
    assert rows["events"].endswith("/events.jsonl")
    assert rows["lock file"].startswith(str(tmp_path / "locks"))
    as_json = cli("paths", "--json", str(project.workflow), cwd=tmp_path, env=env, timeout=60)
    assert json.loads(as_json.stdout)["events"] == rows["events"]
    # the folder holding it names it, as for `fleet` and `stop`
    by_folder = cli("paths", "--json", str(project.folder), cwd=tmp_path, env=env, timeout=60)
    assert json.loads(by_folder.stdout) == json.loads(as_json.stdout)
    assert not (tmp_path / "state").exists() and not (tmp_path / "config").exists()
    assert not (tmp_path / "locks").exists() and not project.workspaces.exists()


def test_two_projects_get_two_event_histories(tmp_path, monkeypatch):
    from symphony_tui.paths import events_file

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    a = events_file(f"local:{tmp_path}/a/issues.yaml")
    b = events_file(f"local:{tmp_path}/b/issues.yaml")
    linear = events_file("linear:https://api.linear.app/graphql#my-project")
    assert len({a, b, linear}) == 3
    assert linear.parent.name.startswith("my-project-")


def test_the_entry_point_module_marks_itself_for_argcomplete():
    # argcomplete's global completion only completes scripts whose module says so
    head = Path(cli_module.__file__).read_text(encoding="utf-8").splitlines()[0]
    assert head == "# PYTHON_ARGCOMPLETE_OK"


def test_completion_request_is_answered_by_argcomplete_when_installed(tmp_path):
    pytest.importorskip("argcomplete")
    env = child_env(_ARGCOMPLETE="1", COMP_LINE="symphony-tui do", COMP_POINT="15",
                    _ARGCOMPLETE_STDOUT_FILENAME=str(tmp_path / "out"))  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "symphony_tui.cli"], env=env, capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "doctor" in (tmp_path / "out").read_text()
