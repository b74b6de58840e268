"""``ssh://`` targets of ``attach`` and ``fleet``: what ssh is given as its destination."""

from __future__ import annotations

import pytest

from symphony_tui.api.ssh import parse_target


@pytest.mark.parametrize(
    ("text", "name", "destination", "port"),
    [
        ("ssh://me@box:2222", "ssh://me@box:2222", "me@box", 2222),
        ("box", "ssh://box", "box", None),
        ("me@127.0.0.2", "ssh://me@127.0.0.2", "me@127.0.0.2", None),
    ],
)
def test_a_target_names_its_destination(text, name, destination, port):
    spec = parse_target(text)
    assert (spec.name, spec.destination, spec.port) == (name, destination, port)


@pytest.mark.parametrize(
    "text",
    ["ssh://-oProxyCommand=touch%20x", "-oProxyCommand=x", "ssh://-l@box", "ssh://box:99999"],
)
def test_a_destination_ssh_would_read_as_an_option_is_refused(text):
    with pytest.raises(ValueError) as raised:
        parse_target(text)
    assert "\n" not in str(raised.value)
