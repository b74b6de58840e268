"""The fleet file and project names (docs/fleet.md): every line that cannot be used is one
notice naming its file and line, and the other lines load; a repeated target or ``name=``
is said and the first kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from symphony_tui.fleet import targets as tg


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
        "local\n",
    )
    targets, notices = tg.read_fleet_file(path)
    assert [(t.kind, t.token_env) for t in targets] == [
        ("workflow", None), ("url", "LAB"), ("ssh", None), ("url", None),
    ]  # fmt: skip
    assert notices == [
        f"{path}:5: skipped: the same target as line 1 ({app})",
        f"{path}:6: skipped: the same target as line 2 (http://127.0.0.1:8080)",
        f"{path}:8: skipped: the same target as line 7 (http://localhost:80)",
        f"{path}:9: skipped: the same target as line 3 (ssh://me@build-box:22)",
        f"{path}:10: skipped: local is always watched beside the fleet file",
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
