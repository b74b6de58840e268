"""The managed server's environment and launch failures (a stand-in program, no server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.opencode import OpenCodeBackend
from symphony_tui.config.settings import OpenCodeSettings, Settings
from symphony_tui_testing.session_host import RecordingSessionHost

SECRET = "LINEAR_API_KEY"  # a scheduler secret: named in the backend's ``unset``
SHOWN = ("HOME", "XDG_DATA_HOME", "EXTRA", "OPENCODE_DISABLE_SHARE", "PATH", SECRET, "LEAK")
# Prints the variables named on its command line as one JSON line and exits 4: the launch
# error carries that line (the launcher's own ``--hostname ... --port N`` are not names).
PRINT_ENV = " ".join(
    [
        sys.executable,
        "-c",
        "'import json, os, sys; names = [a for a in sys.argv[1:] if a.isupper()]; "
        "print(json.dumps({k: os.environ.get(k) for k in names})); sys.exit(4)'",
        *SHOWN,
    ]
)


async def launch_error(tmp_path: Path, agent_env: dict[str, str], **oc: object) -> str:
    settings = Settings().model_copy(update={"opencode": OpenCodeSettings(**oc)})
    backend = OpenCodeBackend(
        lambda: settings, env=agent_env, unset=[SECRET], state_dir=tmp_path / "state"
    )
    try:
        with pytest.raises(AgentError) as info:
            await backend.start_session(RecordingSessionHost(tmp_path))
    finally:
        await backend.aclose()
    return str(info.value)


def server_environment(error: str) -> dict[str, str | None]:
    prefix = "launch_failed: opencode serve exited with 4: "
    assert error.startswith(prefix), error
    return json.loads(error.removeprefix(prefix))


async def test_the_managed_server_is_isolated_without_opencode_env(tmp_path: Path) -> None:
    env = {"HOME": "/home/user", SECRET: "lin_secret"}
    seen = server_environment(await launch_error(tmp_path, env, command=PRINT_ENV))
    assert seen["HOME"] == str(tmp_path / "state" / "home")
    assert seen["XDG_DATA_HOME"] == str(tmp_path / "state" / "data")
    assert seen["OPENCODE_DISABLE_SHARE"] == "1"
    assert seen[SECRET] is None and seen["EXTRA"] is None


async def test_opencode_env_reaches_the_server_and_unset_secrets_stay_out(
    tmp_path: Path,
) -> None:
    env = {"HOME": "/home/user", "REAL_HOME": "/home/real", SECRET: "lin_secret"}
    extra = {
        "HOME": "$REAL_HOME",  # restores a home over the isolated one
        "EXTRA": "1",
        "OPENCODE_DISABLE_SHARE": "0",
        "PATH": "$UNSET_VAR",  # an unset $VAR removes the variable
        SECRET: "$" + SECRET,  # named in unset: never reaches the server
        "LEAK": "$" + SECRET,  # nor under another name
    }
    seen = server_environment(await launch_error(tmp_path, env, command=PRINT_ENV, env=extra))
    assert seen["HOME"] == "/home/real" and seen["EXTRA"] == "1"
    assert seen["OPENCODE_DISABLE_SHARE"] == "0"
    assert seen["XDG_DATA_HOME"] == str(tmp_path / "state" / "data")  # sessions stay put
    assert seen["PATH"] is None
    assert seen[SECRET] is None and seen["LEAK"] is None


async def test_launch_failures_are_one_line_errors(tmp_path: Path) -> None:
    missing = await launch_error(tmp_path, {}, command="/nonexistent/opencode serve")
    assert missing == "launch_failed: /nonexistent/opencode: No such file or directory"
    unbalanced = await launch_error(tmp_path, {}, command="opencode 'serve")
    assert unbalanced.startswith("launch_failed: opencode.command: ") and "\n" not in unbalanced
