"""``worker.ssh_hosts`` and friends load (the reference's names), bad entries
are one-line errors, and no hosts means nothing changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.worker_hosts import HostSpec, parse_host
from symphony_tui.config.workflow import load_workflow


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("build-1", HostSpec("build-1", "build-1")),
        ("me@build-1", HostSpec("me@build-1", "build-1", user="me")),
        ("build-1:2222", HostSpec("build-1:2222", "build-1", port=2222)),
        ("[::1]:2222", HostSpec("[::1]:2222", "::1", port=2222)),
        ("me@[fe80::1]:22", HostSpec("me@[fe80::1]:22", "fe80::1", user="me", port=22)),
        ("::1", HostSpec("::1", "::1")),
        ("10.0.0.7", HostSpec("10.0.0.7", "10.0.0.7")),
    ],
)
def test_every_form_the_reference_takes_parses(text: str, spec: HostSpec) -> None:
    assert parse_host(text) == spec
    assert parse_host(text).destination == (f"me@{spec.hostname}" if spec.user else spec.hostname)


@pytest.mark.parametrize(
    "text", ["", "a b", "host:0", "host:99999", "-oProxyCommand=x", "[::1", "[::1]x", "-u@h"]
)
def test_a_bad_entry_is_refused(text: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_host(text)
    assert "\n" not in str(err.value)


def _load(tmp_path: Path, worker: str):
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        f"---\ntracker:\n  kind: local\n  path: i.yaml\nworkspace:\n  root: {tmp_path}/ws\n"
        f"{worker}---\nprompt\n"
    )
    return load_workflow(path, env={})


def test_hosts_caps_and_overrides_load_without_warnings(tmp_path: Path) -> None:
    wf = _load(
        tmp_path,
        "worker:\n  ssh_hosts: [a, 'me@b:2222']\n  max_concurrent_agents_per_host: 3\n"
        "  hosts:\n    'me@b:2222':\n      workspace_root: ~/ws\n      max_concurrent_agents: 1\n"
        "      env: {PATH: /opt/bin}\n",
    )
    worker = wf.settings.worker
    assert wf.warnings == ()
    assert worker.enabled and worker.ssh_hosts == ("a", "me@b:2222")
    assert (worker.capacity("a"), worker.capacity("me@b:2222")) == (3, 1)
    assert worker.workspace_root_for("a", "/x") == "/x"
    assert worker.workspace_root_for("me@b:2222", "/x") == "~/ws"
    assert worker.env_for("me@b:2222") == {"PATH": "/opt/bin"} and worker.env_for("a") == {}


def test_memory_floors_and_caps_default_from_worker_and_override_per_host(tmp_path: Path) -> None:
    worker = _load(tmp_path, "").settings.worker
    assert (worker.memory_floor_mb(None), worker.memory_cap_mb(None)) == (0, 0)
    assert worker.resource_sample_ms == 5000
    worker = _load(
        tmp_path,
        "worker:\n  ssh_hosts: [a, b]\n  min_free_memory_mb: 2048\n  max_memory_mb: 8192\n"
        "  resource_sample_ms: 0\n  hosts:\n    b:\n      min_free_memory_mb: 0\n"
        "      max_memory_mb: 4096\n",
    ).settings.worker
    assert [worker.memory_floor_mb(h) for h in (None, "a", "b")] == [2048, 2048, 0]
    assert [worker.memory_cap_mb(h) for h in (None, "a", "b")] == [8192, 8192, 4096]
    assert worker.resource_sample_ms == 0


def test_no_hosts_is_local_behaviour(tmp_path: Path) -> None:
    worker = _load(tmp_path, "").settings.worker
    assert not worker.enabled and worker.specs() == ()
    # The reference writes an empty list; that is no hosts too.
    assert not _load(tmp_path, "worker:\n  ssh_hosts: []\n").settings.worker.enabled


@pytest.mark.parametrize(
    ("worker", "needle"),
    [
        ("worker:\n  ssh_hosts: ['a b']\n", "bad host name 'a b'"),
        ("worker:\n  ssh_hosts: [a, a]\n", "lists 'a' twice"),
        ("worker:\n  ssh_hosts: [a]\n  hosts: {b: {}}\n", "worker.hosts.b names no"),
        ("worker:\n  ssh_hosts: [a]\n  max_concurrent_agents_per_host: 0\n", "greater than 0"),
        ("worker:\n  min_free_memory_mb: -1\n", "greater than or equal to 0"),
        ("worker:\n  ssh_hosts: [a]\n  hosts: {a: {max_memory_mb: lots}}\n", "max_memory_mb"),
        ("worker:\n  resource_sample_ms: true\n", "resource_sample_ms"),
        ("worker:\n  ssh_hosts: [a]\n  hosts: {a: {env: {'1X': y}}}\n", "not a shell variable"),
        ("worker:\n  ssh_hosts: [a]\n  hosts: {a: {commands: {vim: x}}}\n", "not a backend"),
        ("worker:\n  ssh_hosts: [a]\n  hosts: {a: {commands: {opencode: ''}}}\n", "non-empty"),
        (
            "worker:\n  ssh_hosts: [a]\n  hosts: {a: {base_url: {opencode: 'ftp://x'}}}\n",
            "as seen on the host",
        ),
        (
            "worker:\n  ssh_hosts: [a]\n  hosts: {a: {base_url: {codex: 'http://x:1'}}}\n",
            "not a server backend",
        ),
    ],
)
def test_bad_worker_settings_are_one_line_errors(tmp_path: Path, worker: str, needle: str) -> None:
    with pytest.raises(WorkflowError) as err:
        _load(tmp_path, worker)
    assert err.value.code == "invalid_settings"
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_server_backends_on_hosts_need_a_command_to_start_there(tmp_path: Path) -> None:
    from symphony_tui.config.validate import validate_dispatch

    (tmp_path / "i.yaml").write_text("issues: []\n")
    for backend in ("opencode", "openhands"):
        wf = _load(tmp_path, f"agent:\n  backend: {backend}\nworker:\n  ssh_hosts: [a, b]\n")
        [problem] = validate_dispatch(wf.settings)
        assert f"agent.backend {backend} needs {backend}.command" in problem
        wf = _load(
            tmp_path,
            f"agent:\n  backend: {backend}\n{backend}:\n  base_url: http://127.0.0.1:1\n"
            "worker:\n  ssh_hosts: [a]\n",
        )
        [problem] = validate_dispatch(wf.settings)
        assert f"{backend}.base_url is one server here" in problem
        wf = _load(
            tmp_path,
            f"agent:\n  backend: {backend}\n{backend}:\n  command: srv\n"
            "worker:\n  ssh_hosts: [a]\n",
        )
        assert validate_dispatch(wf.settings) == []
        # A command for every host is enough without the global one.
        wf = _load(
            tmp_path,
            f"agent:\n  backend: {backend}\nworker:\n  ssh_hosts: [a, b]\n  hosts:\n"
            f"    a: {{commands: {{{backend}: /opt/a/srv}}}}\n"
            f"    b: {{commands: {{{backend}: /opt/b/srv}}}}\n",
        )
        assert validate_dispatch(wf.settings) == []
        assert wf.settings.worker.command_for("b", backend, "x") == "/opt/b/srv"
        # A server run on each host by other means is enough too.
        wf = _load(
            tmp_path,
            f"agent:\n  backend: {backend}\nworker:\n  ssh_hosts: [a, b]\n  hosts:\n"
            f"    a: {{base_url: {{{backend}: 'http://127.0.0.1:4096'}}}}\n"
            f"    b: {{base_url: {{{backend}: 'http://[::1]:4097/'}}}}\n",
        )
        assert validate_dispatch(wf.settings) == []
        assert wf.settings.worker.server_on("a", backend) == ("127.0.0.1", 4096)
        assert wf.settings.worker.server_on("b", backend) == ("::1", 4097)
    ok = _load(tmp_path, "worker:\n  ssh_hosts: [a]\n")
    assert validate_dispatch(ok.settings) == []


def test_codex_mode_defaults_to_app_server_and_is_set_per_host(tmp_path: Path) -> None:
    worker = _load(tmp_path, "worker:\n  ssh_hosts: [a, b]\n").settings.worker
    assert [worker.codex_mode_for(h) for h in ("a", "b")] == ["app-server", "app-server"]
    worker = _load(
        tmp_path,
        "worker:\n  ssh_hosts: [a, b]\n  codex_mode: exec-server\n"
        "  hosts:\n    b: {codex_mode: app-server, commands: {codex: /opt/codex app-server}}\n",
    ).settings.worker
    assert [worker.codex_mode_for(h) for h in ("a", "b")] == ["exec-server", "app-server"]


@pytest.mark.parametrize(
    ("worker", "needle"),
    [
        ("worker:\n  codex_mode: remote\n", "codex_mode 'remote' is not one of"),
        ("worker:\n  ssh_hosts: [a]\n  hosts: {a: {codex_mode: ssh}}\n", "is not one of"),
        (
            "worker:\n  ssh_hosts: [a]\n  hosts: {a: {codex_mode: exec-server, "
            "commands: {codex: /opt/run-codex}}}\n",
            "needs a command with the word app-server",
        ),
        (
            "worker:\n  ssh_hosts: [a]\n  hosts: {a: {codex_mode: exec-server, "
            "commands: {codex: app-server}}}\n",
            "needs a command with the word app-server after its program",
        ),
    ],
)
def test_bad_codex_modes_are_one_line_errors(tmp_path: Path, worker: str, needle: str) -> None:
    with pytest.raises(WorkflowError) as err:
        _load(tmp_path, worker)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_an_exec_server_host_needs_a_codex_command_it_can_take_the_program_of(
    tmp_path: Path,
) -> None:
    from symphony_tui.config.validate import validate_dispatch

    (tmp_path / "i.yaml").write_text("issues: []\n")
    wf = _load(
        tmp_path,
        "codex:\n  command: my-agent --stdio\n"
        "worker:\n  ssh_hosts: [a, b]\n  hosts: {a: {codex_mode: exec-server}}\n",
    )
    [problem] = validate_dispatch(wf.settings)
    assert "worker host a in codex_mode exec-server needs" in problem and "\n" not in problem
    wf = _load(  # no program before app-server: nothing to run exec-server with
        tmp_path,
        "codex:\n  command: app-server\n"
        "worker:\n  ssh_hosts: [a, b]\n  hosts: {a: {codex_mode: exec-server}}\n",
    )
    [problem] = validate_dispatch(wf.settings)
    assert problem.endswith("word app-server after its program (got 'app-server')"), problem
    wf = _load(
        tmp_path,
        "worker:\n  ssh_hosts: [a, b]\n  hosts: {a: {codex_mode: exec-server}}\n",
    )
    assert validate_dispatch(wf.settings) == []
