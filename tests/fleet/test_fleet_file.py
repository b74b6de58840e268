"""The fleet file and project names (docs/fleet.md): every line that cannot be used is one
notice naming its file and line, and the other lines load; a repeated target or ``name=``
is said and the first kept; names are decided from the targets, the same in ``--list`` and
the console, whichever scheduler answers first or at all."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from symphony_tui.cli import main
from symphony_tui.domain.snapshot import ProjectRow
from symphony_tui.fleet import names
from symphony_tui.fleet import targets as tg
from symphony_tui.fleet.cli import table
from symphony_tui.fleet.port import FleetPort


def workflow(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "WORKFLOW.md"
    path.write_text("---\n---\n")
    return path


def fleet_file(tmp_path: Path, data: bytes | str) -> Path:
    path = tmp_path / "fleet"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def lines_of(notices: list[str], path: Path) -> list[int]:
    """The line number each notice names (``<file>:<line>: ...``)."""
    numbers = []
    for notice in notices:
        assert notice.startswith(f"{path}:"), notice
        numbers.append(int(notice[len(f"{path}:") :].split(":", 1)[0]))
    return numbers


def test_a_malformed_ipv6_url_is_one_notice_and_the_other_lines_load(tmp_path):
    path = fleet_file(tmp_path, "http://[::1\nhttp://127.0.0.1:8080 name=lab\nhttps://[::1]:8443\n")
    targets, notices = tg.read_fleet_file(path)
    assert [t.text for t in targets] == ["http://127.0.0.1:8080", "https://[::1]:8443"]
    assert notices == [
        f"{path}:1: skipped: 'http://[::1' is not http(s)://HOST:PORT (Invalid IPv6 URL)"
    ]
    with pytest.raises(tg.TargetError, match="Invalid IPv6 URL"):
        tg.parse("http://[::1")  # a command-line target too: one line, not a traceback


@pytest.mark.parametrize("text", ["ssh://-oProxyCommand=touch%20x", "ssh://-F@host"])
def test_an_ssh_target_never_reads_as_an_option_of_ssh(text):
    with pytest.raises(tg.TargetError, match="never starts with '-'"):
        tg.parse(text)


def test_a_line_that_is_not_utf8_is_skipped_alone(tmp_path):
    path = fleet_file(
        tmp_path, b"\xef\xbb\xbfhttp://127.0.0.1:1\nhttp://caf\xe9:2\r\nhttp://127.0.0.1:3\r\n"
    )
    targets, notices = tg.read_fleet_file(path)
    assert [t.text for t in targets] == ["http://127.0.0.1:1", "http://127.0.0.1:3"]
    assert notices == [f"{path}:2: skipped: not UTF-8 text (byte 0xe9, column 11)"]


#: Lines a parser should not trust: each is skipped with one notice, or is a target.
NASTY = [
    "http://[::1",
    "https://[::1]x:1",
    "http://[zz::]:1",
    "http://h:99999",
    "http://h:-1",
    "http://h:0x10",
    "http://:8080",
    "http://h:1/api?x#y",
    "ssh://[::1",
    "ssh://-oProxyCommand=touch%20x",
    "ssh://-x@host",
    "ssh://h:port",
    "ssh://",
    "gopher://x",
    "://",
    "'unclosed",
    '"unclosed',
    "a\\",
    "~nosuchuser-at-all/WORKFLOW.md",
    "~\x00",
    "nul\x00here",
    "x" * 5000,
    "\x1b[31mred",
    "\u202ehttp://evil",
    "local name=",
    "http://127.0.0.1:1 =x",
    "http://127.0.0.1:1 name=a/b",
    "http://127.0.0.1:1 name=a\x1bb",
    "http://127.0.0.1:1 name=a\u2028b",
    "http://127.0.0.1:1 name=a name=b",
    "http://127.0.0.1:1 token-env=A-B",
    "http://127.0.0.1:1 token-file=~nosuchuser-at-all/t",
    "http://127.0.0.1:1 token-file=a\x00b",
    "http://127.0.0.1:1 colour=blue",
    "http://127.0.0.1:1 name",
]


@pytest.mark.parametrize("line", NASTY, ids=range(len(NASTY)))
def test_no_line_raises_and_a_bad_one_is_one_notice_naming_its_line(tmp_path, line):
    path = fleet_file(tmp_path, f"http://127.0.0.1:7\n{line}\nhttp://127.0.0.1:9\n")
    targets, notices = tg.read_fleet_file(path)
    assert [t.text for t in targets][:1] == ["http://127.0.0.1:7"]
    assert targets[-1].text == "http://127.0.0.1:9"  # the lines after it load
    assert len(targets) + len(notices) == 3
    assert lines_of(notices, path) == ([] if len(targets) == 3 else [2])
    assert all(n.isprintable() and len(n) < len(str(path)) + 400 for n in notices), notices


def test_a_repeated_target_is_said_and_the_first_line_kept(tmp_path):
    app = workflow(tmp_path / "app")
    path = fleet_file(
        tmp_path,
        f"{app.parent}\n"
        "http://127.0.0.1:8080 token-env=LAB\n"
        "ssh://me@build-box\n"
        "# the same again, written otherwise\n"
        f"{app}\n"
        "http://127.0.0.1:8080/ token-env=OTHER\n"
        "http://localhost\n"
        "http://localhost:80\n"
        "ssh://me@Build-Box:22\n"
        "http://[::1]:8081\n"
        "http://[0:0::1]:08081\n"
        "local\n",
    )
    targets, notices = tg.read_fleet_file(path)
    assert [(t.kind, t.token_env, t.line) for t in targets] == [
        ("workflow", None, 1), ("url", "LAB", 2), ("ssh", None, 3), ("url", None, 7),
        ("url", None, 10),
    ]  # fmt: skip
    assert notices == [
        f"{path}:5: skipped: the same target as line 1 ({app})",
        f"{path}:6: skipped: the same target as line 2 (http://127.0.0.1:8080)",
        f"{path}:8: skipped: the same target as line 7 (http://localhost:80)",
        f"{path}:9: skipped: the same target as line 3 (ssh://me@build-box:22)",
        f"{path}:11: skipped: the same target as line 10 (http://[0:0::1]:08081)",
        f"{path}:12: skipped: local is always watched beside the fleet file",
    ]


def test_a_repeated_name_is_said_and_the_first_line_keeps_it(tmp_path):
    path = fleet_file(
        tmp_path,
        "http://127.0.0.1:1 name=lab\nhttp://127.0.0.1:2 name=lab\nhttp://127.0.0.1:3 name=ci\n",
    )
    targets, notices = tg.read_fleet_file(path)
    assert [t.name for t in targets] == ["lab", None, "ci"]  # line 2 kept, by its own name
    assert notices == [
        f"{path}:2: name=lab is line 1's already: dropped, this project is named by its target"
    ]
    assert list(names.decided(targets).values()) == ["lab", "ci", "127.0.0.1:2"]


def test_names_come_from_the_targets_in_order_first_come_keeps_its_folder_name(tmp_path):
    first = workflow(tmp_path / "src" / "app")
    second = workflow(tmp_path / "work" / "app")
    third = workflow(tmp_path / "x" / "work" / "app")
    targets = [
        tg.parse("local"),
        tg.parse(str(first)),
        tg.parse(str(second)),
        tg.parse(str(third)),
        tg.parse("http://127.0.0.1:8080"),
        tg.parse("https://[0:0::1]:8443"),
        tg.parse("http://build.example"),
        tg.parse("http://127.0.0.1:9", name="app"),  # chosen: kept over the folders' own
        tg.parse("ssh://me@box"),
    ]
    decided = names.decided(targets)
    assert [decided.get(t.text) for t in targets] == [
        None, "app-src", "app-work", "app-x", "127.0.0.1:8080", "[::1]:8443", "build.example",
        "app", None,
    ]  # fmt: skip
    assert names.decided(targets) == decided  # nothing but the targets decides


def test_a_dead_url_line_keeps_its_name_from_the_file_when_it_comes_up(monkeypatch):
    """The first URL's scheduler is not reached at first, the second's (folder ``app``)
    is: neither name depends on which answers, nor changes when the first comes up."""
    dead = tg.parse("http://127.0.0.1:1")
    live = tg.parse("http://127.0.0.1:2")
    up: set[str] = {live.text}

    def url_endpoint(target: tg.Target) -> tg.Endpoint:
        if target.text not in up:
            raise tg.TargetError("connection refused")
        return tg.Endpoint(target.text, "/srv/app/WORKFLOW.md", target.text, 1)

    async def connect(self, project, endpoint) -> None:
        project.endpoint = endpoint  # reached: its folder name is known now

    monkeypatch.setattr(tg, "url_endpoint", url_endpoint)
    monkeypatch.setattr(FleetPort, "_connect", connect)

    async def names_after(wait: float) -> list[tuple[str, str]]:
        fleet = FleetPort([dead, live], local_every_s=0.01)
        runner = asyncio.create_task(fleet.run())
        await asyncio.wait_for(fleet._named_tried.wait(), 5)
        await asyncio.sleep(wait)
        try:
            return [(p.name, p.target.text) for p in fleet.projects.values()]
        finally:
            await fleet.close()
            runner.cancel()

    expected = [("127.0.0.1:1", dead.text), ("127.0.0.1:2", live.text)]
    assert asyncio.run(names_after(0)) == expected
    up.add(dead.text)
    assert asyncio.run(names_after(0)) == expected


def test_a_scheduler_found_later_never_takes_a_name_decided_for_a_target(tmp_path):
    app = workflow(tmp_path / "src" / "app")
    local = tg.parse("local")
    fleet = FleetPort([local, tg.parse(str(app))])
    # this machine's other `app` is found before the workflow target's row is made
    other = fleet._project(local, "k1", "app", workflow="/home/me/work/app/WORKFLOW.md")
    third = fleet._project(local, "k2", "app", workflow="/home/you/work/app/WORKFLOW.md")
    assert (other.name, third.name) == ("app-work", "app-you")
    target = fleet.targets[1]
    assert fleet._project(target, target.text, "app", workflow=target.text).name == "app"
    assert list(fleet.projects) == ["app", "app-work", "app-you"]  # in name order
    ssh = tg.parse("ssh://me@box", name="box")
    fleet = FleetPort([ssh])
    assert fleet._project(ssh, "a", "api", workflow="/srv/api/WORKFLOW.md").name == "box"
    assert fleet._project(ssh, "b", "web", workflow="/srv/web/WORKFLOW.md").name == "box-web"


def test_names_never_hold_a_slash_a_space_or_a_control_character():
    assert names.clean("a/b c\x1b[31m\u202e\u2028d") == "a-b-c-[31m-d"
    assert names.clean("//") == "project"
    assert names.unique("a b", {"a-b"}, ["", " / ", "x y"]) == "a-b-x-y"
    assert names.unique("app", {"app@box", "app-srv@box"}, ["srv"], at="box") == "app-2@box"


def test_the_list_says_where_each_project_is():
    rows = (
        ProjectRow(name="app-b", target="/b/app/WORKFLOW.md", workflow_path="/b/app/WORKFLOW.md",
                   link_state="down"),
        ProjectRow(name="app", target="local", workflow_path="/a/app/WORKFLOW.md",
                   link_state="live"),
        ProjectRow(name="lab", target="http://10.0.0.7:8080", workflow_path="/srv/x/WORKFLOW.md",
                   link_state="live", machine="10.0.0.7"),
        ProjectRow(name="ci@box", target="ssh://me@box", link_state="down", machine="box"),
        ProjectRow(name="evil\x1b]0;x\x07", target="local", link_state="live"),
    )  # fmt: skip
    lines = table(rows)
    assert lines[0].split() == [
        "PROJECT", "STATE", "RUNNING", "RETRYING", "APPROVALS", "MACHINE", "WHERE", "ERROR",
    ]  # fmt: skip
    assert [(line.split()[0], line.split()[6]) for line in lines[1:]] == [
        ("app", "/a/app/WORKFLOW.md"),
        ("app-b", "/b/app/WORKFLOW.md"),
        ("ci@box", "ssh://me@box"),
        ("evil", "local"),  # its control sequence is not printed
        ("lab", "http://10.0.0.7:8080"),
    ]
    assert all(line.isprintable() for line in lines)


def test_fleet_list_says_each_bad_line_and_lists_the_rest(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "symphony-tui").mkdir()
    fleet_file(
        tmp_path / "symphony-tui",
        b"http://[::1\nhttp://127.0.0.1:9 name=lab\n\xff\nhttp://127.0.0.1:9/\n",
    )
    path = tmp_path / "symphony-tui" / "fleet"
    code = main(["fleet", "--list", "--wait", "0.5"])
    out, err = capsys.readouterr()
    assert code == 1
    assert err.splitlines() == [
        f"symphony-tui: fleet: {path}:1: skipped: 'http://[::1' is not http(s)://HOST:PORT "
        "(Invalid IPv6 URL)",
        f"symphony-tui: fleet: {path}:3: skipped: not UTF-8 text (byte 0xff, column 1)",
        f"symphony-tui: fleet: {path}:4: skipped: the same target as line 2 (http://127.0.0.1:9)",
    ]
    rows = [line.split() for line in out.splitlines()]
    assert [(r[0], r[6]) for r in rows] == [("PROJECT", "WHERE"), ("lab", "http://127.0.0.1:9")]
