"""The bearer token the fleet sends each scheduler: the one its API note offers, else, for
one that needs a token, a fleet-file line's option, the command's flag, then
``$SYMPHONY_API_TOKEN``, for every kind of target; what a refused row says; and a
scheduler that ended before the fleet ever heard from it (no scheduler, no network)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import httpx
import pytest

from symphony_tui.api import announce
from symphony_tui.api.client import Unauthorized
from symphony_tui.fleet import targets as tg
from symphony_tui.fleet.port import FleetPort
from tests.helpers import free_port


@pytest.fixture
def notes(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SYMPHONY_API_TOKEN", raising=False)
    return announce.default_dir()


def workflow(tmp_path: Path, name: str = "sec") -> Path:
    path = tmp_path / name / "WORKFLOW.md"
    path.parent.mkdir()
    path.write_text("---\n---\n")
    return path.resolve()


def serving(path: Path, *, token_required: bool, token_file: Path | None = None) -> None:
    """This process's API note, as a scheduler of ``path`` serving on a closed port."""
    extra: dict[str, object] = {"workflow": str(path)}
    if token_file is not None:
        extra["token_file"] = str(token_file)
    announce.write(
        announce.default_dir(),
        host="127.0.0.1",
        port=free_port(),
        token=token_required,
        extra=extra,
    )


def token_file(folder: Path, token: str, name: str = "sec.token") -> Path:
    path = folder / name
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def test_a_workflow_target_sends_its_token_to_a_scheduler_that_needs_one(tmp_path, notes):
    """A scheduler whose token comes from its operator's variable (``server.auth_token_env``)
    offers none in its note: the target's token goes, the line's own option first, then
    the command's flag, then ``$SYMPHONY_API_TOKEN``."""
    path = workflow(tmp_path)
    serving(path, token_required=True)
    found = tg.workflow_endpoint(str(path))
    assert (found.token, found.token_required) == (None, True)
    env = {"SEC_TOKEN": "from-sec", "SYMPHONY_API_TOKEN": "from-default"}
    flagged = tg.parse(str(path), token_env="SEC_TOKEN")
    assert tg.with_token(found, flagged, env).token == "from-sec"
    assert tg.with_token(found, tg.parse(str(path)), env).token == "from-default"
    assert tg.with_token(found, tg.parse(str(path)), {}).token is None
    own = tg.parse(str(path), token_file=token_file(tmp_path, "from-file"))
    assert tg.with_token(found, tg.with_flags(own, "SEC_TOKEN", None), env).token == "from-file"
    with pytest.raises(tg.TokenError, match=r"^token: \$SEC_TOKEN is not set$"):
        tg.with_token(found, flagged, {})


def test_a_scheduler_that_offers_its_token_or_needs_none_ignores_the_flags(tmp_path, notes):
    """A token the scheduler generated (its note names the file) is the only one it takes;
    one that needs no token is sent none, and a flag it does not need is no config error."""
    generated = workflow(tmp_path, "console")
    serving(generated, token_required=True, token_file=token_file(tmp_path, "its-own"))
    env = {"SYMPHONY_API_TOKEN": "for-another"}
    [endpoint] = tg.local_endpoints()
    local = tg.parse("local", token_env="SEC_TOKEN")
    assert tg.with_token(endpoint, local, env).token == "its-own"
    free = tg.Endpoint("k", "", "http://127.0.0.1:1", 1, token_required=False)
    assert tg.with_token(free, local, {}).token is None  # $SEC_TOKEN unset: not needed
    assert tg.with_token(free, tg.parse("local"), env).token is None
    loopback = tg.parse(f"http://127.0.0.1:{endpoint.api_port}", token_env="SEC_TOKEN")
    assert tg.url_endpoint(loopback, env).token == "its-own"


def test_a_fleet_file_workflow_line_takes_token_options_and_the_flag_fills_in(tmp_path, notes):
    path = workflow(tmp_path)
    token_file(tmp_path, "from-file", "lab.token")
    fleet = tmp_path / "fleet"
    fleet.write_text(f"{path} token-file=lab.token\n{path.parent}-other\n")
    (tmp_path / "sec-other").mkdir()
    (tmp_path / "sec-other" / "WORKFLOW.md").write_text("---\n---\n")
    (line, other), skipped = tg.read_fleet_file(fleet)
    assert skipped == []
    assert (line.kind, line.token_file, line.line) == ("workflow", tmp_path / "lab.token", 1)
    assert tg.with_flags(line, "SEC_TOKEN", None) == line  # the line's own option wins
    assert tg.with_flags(other, "SEC_TOKEN", None).token_env == "SEC_TOKEN"


def test_fleet_with_no_target_gives_its_token_flag_to_local_and_the_file_lines(
    tmp_path, notes, monkeypatch
):
    from symphony_tui import cli
    from symphony_tui.fleet import cli as fleet_cli

    path = workflow(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    tg.fleet_file().parent.mkdir(parents=True)
    tg.fleet_file().write_text(f"{path}\nhttp://127.0.0.1:9 token-env=LAB\n")
    seen: list[tg.Target] = []

    def listed(targets, *, wait_s):
        seen.extend(targets)
        return 0

    monkeypatch.setattr(fleet_cli, "list_once", listed)
    args = argparse.Namespace(targets=[], token_env="SEC_TOKEN", token_file=None, list=True, wait=1)
    assert cli._fleet(args) == 0
    assert [(t.kind, t.token_env) for t in seen] == [
        ("local", "SEC_TOKEN"),
        ("workflow", "SEC_TOKEN"),
        ("url", "LAB"),
    ]


async def test_a_refused_row_names_what_gives_that_target_its_token(tmp_path, notes):
    """The hint names what works for the target: a fleet-file line's options on that line,
    else the command's flags and the variable."""
    path = workflow(tmp_path)
    fleet_file = tmp_path / "fleet"
    fleet_file.write_text(f"# mine\n{workflow(tmp_path, 'lab')}\n")
    [line], _ = tg.read_fleet_file(fleet_file)
    fleet = FleetPort([])
    for target, hint in [
        (
            tg.parse(str(path)),
            "symphony-tui fleet --token-env VAR or --token-file PATH, or $SYMPHONY_API_TOKEN",
        ),
        (tg.parse("local"), "symphony-tui fleet --token-env VAR or --token-file PATH"),
        (line, "token-env=VAR or token-file=PATH on line 2 of the fleet file"),
    ]:
        project = fleet._project(target, target.text, target.kind)

        def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(401, json={"error": {"code": "unauthorized", "message": "no"}})

        transport = httpx.MockTransport(answer)
        client = httpx.AsyncClient(base_url="http://127.0.0.1:1", transport=transport)
        endpoint = tg.Endpoint(target.text, "", "http://127.0.0.1:1", 1, token_required=True)
        project.port = fleet.remote_port(project, "http://127.0.0.1:1", endpoint, client)
        with pytest.raises(Unauthorized) as refused:
            await project.port.stream_once()
        assert "needs its API token" in str(refused.value) and hint in str(refused.value)
        await project.port.close()


async def test_a_scheduler_that_ended_before_it_was_ever_heard_is_down_not_lost(notes):
    """A scheduler that refused this fleet and then ended said no word the fleet could
    read: nothing is known to run there, so its row is not ``lost`` (whose agents may
    still run) but ``down``, saying it is gone; its figures stay unknown."""
    fleet = FleetPort([])
    target = tg.parse("http://127.0.0.1:1")
    project = fleet._project(target, target.text, "sec")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"code": "unauthorized", "message": "no"}})

    client = httpx.AsyncClient(base_url="http://127.0.0.1:1", transport=httpx.MockTransport(answer))
    project.endpoint = tg.Endpoint(target.text, "", "http://127.0.0.1:1", 1, pid=4242)
    project.port = fleet.remote_port(project, "http://127.0.0.1:1", project.endpoint, client)
    with pytest.raises(Unauthorized) as refused:
        await project.port.stream_once()
    project.port._lost(refused.value)
    assert fleet.snapshot().projects[0].link_state == "refused"
    project.port._lost(httpx.ConnectError("All connection attempts failed"))
    project.port._ended("its process no longer serves")  # what a port finds once it ended
    row = fleet.snapshot().projects[0]
    assert (row.link_state, row.error, row.heard) == (
        "down",
        "its scheduler (pid 4242) no longer serves; this fleet never heard from it",
        False,
    )
    assert not fleet.snapshot().running
    await project.port.close()


async def test_a_workflow_target_whose_token_cannot_be_had_is_config(tmp_path, notes, monkeypatch):
    """Nothing is asked of a scheduler that needs a token the target names and this
    console cannot have: its row says what to fix."""
    monkeypatch.delenv("SEC_TOKEN", raising=False)
    path = workflow(tmp_path)
    serving(path, token_required=True)
    fleet = FleetPort([tg.parse(str(path), token_env="SEC_TOKEN")], local_every_s=0.05)
    runner = asyncio.create_task(fleet.run())
    try:
        for _ in range(200):
            rows = fleet.snapshot().projects
            if rows and rows[0].link_state != "connecting":
                break
            await asyncio.sleep(0.05)
        assert [(r.link_state, r.error, r.heard) for r in rows] == [
            ("config", "token: $SEC_TOKEN is not set", False)
        ]
    finally:
        await fleet.close()
        runner.cancel()
