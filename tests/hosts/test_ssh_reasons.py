"""Bad input from ssh: what it writes when a connection fails (often several lines: a
banner, warnings, a proxy's errors) becomes one reason naming the failure."""

from __future__ import annotations

import shutil

import pytest

from symphony_tui.config.worker_hosts import parse_host
from symphony_tui.hosts.ssh import SshError, SshTarget, _classify


@pytest.mark.parametrize(
    ("stderr", "code", "reason"),
    [
        (
            "ssh: Could not resolve hostname build-9: Name or service not known\r\n",
            "unknown_host",
            "is unknown (ssh: Could not resolve hostname build-9: Name or service not known)",
        ),
        (
            "Warning: Permanently added 'b1' (ED25519) to the list of known hosts.\n"
            "ci@b1: Permission denied (publickey).\n",
            "auth",
            "refused the key (ci@b1: Permission denied (publickey).)",
        ),
        (
            "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
            "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
            "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n"
            "Host key verification failed.\n",
            "auth",
            "host key not trusted (Host key verification failed.)",
        ),
        (
            "channel 0: open failed: connect failed: Connection refused\n"
            "stdio forwarding failed\n"
            "kex_exchange_identification: Connection closed by remote host\n",
            "refused",
            "refused the connection (channel 0: open failed: connect failed: Connection refused)",
        ),
        (
            "Control socket connect(/tmp/sym-ssh-x/ab): Connection refused\n"
            "ssh: connect to host b1 port 22: Connection timed out\n",
            "timeout",
            "did not answer in time (ssh: connect to host b1 port 22: Connection timed out)",
        ),
        (
            "kex_exchange_identification: read: Connection reset by peer\n"
            "Connection reset by 10.0.0.7 port 22\n",
            "unreachable",
            "is unreachable (Connection reset by 10.0.0.7 port 22)",
        ),
        ("", "unreachable", "is unreachable (ssh exited 255 without a message)"),
    ],
)
def test_ssh_failures_are_one_line_naming_the_failure(stderr, code, reason) -> None:
    err = _classify("b1", stderr)
    assert (err.code, err.reason) == (code, reason)
    assert str(err) == f"host b1 {reason}" and "\n" not in str(err) and "\r" not in str(err)


def test_a_reason_is_bounded_and_printable() -> None:
    err = _classify("b1", "Connection refused " + "\x1b[31m" + "x" * 500 + "\n")
    assert err.code == "refused" and "\x1b" not in err.reason and len(err.reason) < 240


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client (.ci/run installs it)")
async def test_an_unknown_host_is_one_line() -> None:
    target = SshTarget(parse_host("no-such-host.invalid"), connect_timeout_ms=3000, reuse=False)
    with pytest.raises(SshError) as err:
        await target.run("exit 0")
    assert err.value.code == "unknown_host" and "\n" not in str(err.value)
    assert str(err.value).startswith("host no-such-host.invalid is unknown")
