"""``symphony-tui doctor``: the agent really starts (within a timeout), nothing is created,
and the paths a run would use are printed."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from .conftest import child_env, cli, issue, write_project


def isolated_env(tmp_path):
    return child_env(
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        SYMPHONY_LOCK_DIR=str(tmp_path / "locks"),
    )


def test_doctor_creates_nothing_and_prints_the_paths_a_run_would_use(tmp_path):
    project = write_project(tmp_path / "project", [issue(1)])
    done = cli("doctor", cwd=project.folder, env=isolated_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        "follows the Symphony specification (openai/symphony SPEC.md) at 1f3219b, 2026-07-20"
    )
    assert f"[ok  ] workspace root: {project.workspaces} will be created" in done.stdout
    assert "answered initialize (symphony-tui/symphony-demo-agent" in done.stdout
    assert "paths a run would use:" in done.stdout
    events = str(tmp_path / "state" / "symphony-tui" / "projects" / "issues.yaml-")
    assert events in done.stdout and f"workspaces  {project.workspaces}" in done.stdout
    assert not project.workspaces.exists()
    for folder in ("state", "config", "locks"):
        assert not (tmp_path / folder).exists(), folder


def test_doctor_fails_an_agent_command_that_exits_instead_of_answering(tmp_path):
    # the program exists (python3), but what it runs is no app-server
    project = write_project(
        tmp_path / "project",
        [issue(1)],
        front="codex:\n  command: '\"${SYMPHONY_PYTHON}\" -m no_such_agent_module'\n",
    )
    done = cli("doctor", cwd=project.folder, env=isolated_env(tmp_path))
    assert done.returncode == 1
    line = next(x for x in done.stdout.splitlines() if x.startswith("[FAIL] agent command:"))
    assert "does not start" in line and "exited with code 1" in line
    assert "No module named no_such_agent_module" in line


def test_agents_get_the_schedulers_python_as_symphony_python_unless_it_is_set(tmp_path):
    """The demo agent line (``${SYMPHONY_PYTHON:-python3} -m symphony_tui.demo.agent``) must
    work after a venv install even when a login shell's ``python3`` lacks the package."""
    project = write_project(
        tmp_path / "project",
        [issue(1)],
        front="codex:\n  command: '\"${SYMPHONY_PYTHON:-false}\" -m symphony_tui.demo.agent'\n",
    )
    env = isolated_env(tmp_path)
    del env["SYMPHONY_PYTHON"]
    done = cli("doctor", cwd=project.folder, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "answered initialize (symphony-tui/symphony-demo-agent" in done.stdout
    env["SYMPHONY_PYTHON"] = "/nonexistent/python3"  # the operator's own choice wins
    done = cli("doctor", cwd=project.folder, env=env)
    assert done.returncode == 1 and "/nonexistent/python3" in done.stdout


def test_doctor_fails_an_agent_that_does_not_answer_within_the_timeout(tmp_path):
    project = write_project(tmp_path / "project", [issue(1)], front="codex:\n  command: sleep 30\n")
    done = cli("doctor", "--timeout", "1", cwd=project.folder, env=isolated_env(tmp_path))
    assert done.returncode == 1
    assert "[FAIL] agent command: codex: " in done.stdout
    assert "initialize got no response within 1000 ms" in done.stdout


class _Health(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            body = b"{}"
        elif self.path == "/global/health":
            body = json.dumps({"healthy": True, "version": "test"}).encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        pass


@pytest.fixture
def health_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("backend", ["openhands", "opencode"])
def test_doctor_asks_a_running_server_for_its_health(tmp_path, health_server, backend):
    healthy = write_project(
        tmp_path / "up",
        [issue(1)],
        front=f"agent:\n  backend: {backend}\n{backend}:\n  base_url: {health_server}\n",
    )
    done = cli("doctor", cwd=healthy.folder, env=isolated_env(tmp_path))
    assert done.returncode == 0, done.stdout
    assert f"[ok  ] agent command: {backend} server at {health_server}; server at" in done.stdout
    # nothing listens on port 9: refused at once, one line naming the health check
    down = write_project(
        tmp_path / "down",
        [issue(1)],
        front=f"agent:\n  backend: {backend}\n{backend}:\n  base_url: http://127.0.0.1:9\n",
    )
    done = cli("doctor", "--timeout", "5", cwd=down.folder, env=isolated_env(tmp_path))
    assert done.returncode == 1
    line = next(x for x in done.stdout.splitlines() if x.startswith("[FAIL] agent command:"))
    assert "does not start" in line and "health" in line


def test_doctor_writes_each_check_as_soon_as_it_is_known(tmp_path, monkeypatch):
    """Piped (``doctor | tee``), the lines must not wait for the slowest check: each one is
    written and flushed when it is known, before the agent and tracker checks run."""
    import io

    from symphony_tui import doctor

    project = write_project(tmp_path / "project", [issue(1)])
    for name, value in isolated_env(tmp_path).items():
        monkeypatch.setenv(name, value)

    class Flushes(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.at_flush: list[str] = []

        def flush(self) -> None:
            self.at_flush.append(self.getvalue())

    out = Flushes()
    seen_before_agent: list[str] = []
    agent_check = doctor._agent_check

    def watched_agent_check(*args, **kwargs):
        seen_before_agent.append(out.at_flush[-1] if out.at_flush else "")
        return agent_check(*args, **kwargs)

    monkeypatch.setattr(doctor, "_agent_check", watched_agent_check)
    assert doctor.run_doctor(str(project.workflow), out) == 0
    assert "[ok  ] workflow:" in seen_before_agent[0]
    assert "[ok  ] dispatch settings:" in seen_before_agent[0]
    assert "answered initialize" not in seen_before_agent[0]
    assert "answered initialize" in out.getvalue()


def test_doctor_names_the_settings_and_variables_of_a_missing_credential(tmp_path):
    # the names of keys and variables are no secrets: doctor prints them as written
    (tmp_path / "WORKFLOW.md").write_text(
        "---\ntracker:\n  kind: linear\n  api_key: $MY_LINEAR_KEY\n  project_slug: x\n---\np\n"
    )
    env = isolated_env(tmp_path)
    env.pop("MY_LINEAR_KEY", None)
    done = cli("doctor", cwd=tmp_path, env=env)
    assert done.returncode == 1
    line = next(x for x in done.stdout.splitlines() if "dispatch settings" in x)
    assert line.startswith("[FAIL] dispatch settings: missing_tracker_api_key: tracker.api_key")
    assert "$MY_LINEAR_KEY is not set" in line and "***" not in line
    env["MY_LINEAR_KEY"] = ""  # exported, but empty: said as it is
    done = cli("doctor", cwd=tmp_path, env=env)
    line = next(x for x in done.stdout.splitlines() if "dispatch settings" in x)
    assert "$MY_LINEAR_KEY is set but empty in the environment" in line

    (tmp_path / "WORKFLOW.md").write_text("---\ntracker:\n  kind: github\n  repo: a/b\n---\np\n")
    env.pop("GITHUB_TOKEN", None)
    done = cli("doctor", cwd=tmp_path, env=env)
    line = next(x for x in done.stdout.splitlines() if "dispatch settings" in x)
    assert "missing_github_token: no GitHub token: tracker.token is empty" in line
    assert "$GITHUB_TOKEN is not set" in line and "***" not in line
