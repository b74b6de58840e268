"""Spec §13 / §17.6: structured key=value logs with context fields, secrets never written,
sink failures never crash the caller."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from symphony_tui.observability import logs
from symphony_tui.observability.logs import configure_logging, format_value, log_kv
from symphony_tui.observability.redact import Redactor, default_redactor, redact, register_secret


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, list(root.handlers)
    path = configure_logging(tmp_path / "logs", level="DEBUG")
    yield path
    for handler in list(root.handlers):
        if handler not in saved_handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(saved_level)
    default_redactor().clear()


def flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()


def test_configure_logging_returns_the_file_under_the_given_folder(log_file: Path) -> None:
    assert log_file.name == "symphony.log" and log_file.parent.name == "logs"


def test_structured_logging_includes_issue_and_session_context_fields(log_file: Path) -> None:
    log = logging.getLogger("symphony_tui.test")
    log_kv(
        log,
        "INFO",
        "turn completed",
        issue_id="abc-1",
        issue_identifier="ABC-1",
        session_id="thr-1-turn-2",
        tokens=42,
        ok=True,
        error=None,
    )
    line = log_file.read_text().strip()
    assert line.startswith("ts=") and "Z level=INFO logger=symphony_tui.test" in line
    assert 'msg="turn completed"' in line
    assert "issue_id=abc-1 issue_identifier=ABC-1 session_id=thr-1-turn-2" in line
    assert "tokens=42 ok=true error=null" in line


def test_every_line_ends_with_which_scheduler_wrote_it(tmp_path: Path) -> None:
    root = logging.getLogger()
    saved = list(root.handlers)
    path = configure_logging(tmp_path / "shared", context={"pid": 4242, "project": "my api"})
    try:
        log_kv(logging.getLogger("symphony_tui.x"), "INFO", "dispatch", issue_identifier="A-1")
        logging.getLogger("y").warning("plain")
        flush()
        lines = path.read_text().splitlines()
        assert len(lines) == 2
        assert all(line.endswith('pid=4242 project="my api"') for line in lines), lines
    finally:
        for handler in list(root.handlers):
            if handler not in saved:
                root.removeHandler(handler)
                handler.close()


def test_plain_extra_fields_are_rendered_too(log_file: Path) -> None:
    logging.getLogger("x").warning("plain %s", "args", extra={"issue_id": "i-9"})
    line = log_file.read_text()
    assert 'msg="plain args"' in line and "issue_id=i-9" in line and "level=WARNING" in line


def test_one_record_is_always_one_line(log_file: Path) -> None:
    log = logging.getLogger("x")
    log_kv(
        log, logging.ERROR, "multi\nline", output="a\nb\r\n\x1b[31mred\x1b[0m", key_with='q"uote'
    )
    try:
        raise ValueError("boom\nagain")
    except ValueError:
        log.exception("failed")
    lines = log_file.read_text().splitlines()
    assert len(lines) == 2
    assert 'msg="multi\\nline"' in lines[0]
    assert 'output="a\\nb\\r\\n\\x1b[31mred\\x1b[0m"' in lines[0]
    assert 'key_with="q\\"uote"' in lines[0]
    assert "exc=" in lines[1] and "ValueError: boom\\nagain" in lines[1]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("simple", "simple"),
        ("has space", '"has space"'),
        ("a=b", '"a=b"'),
        ("", '""'),
        (None, "null"),
        (False, "false"),
        (3.5, "3.5"),
        ("tab\there", '"tab\\there"'),
        ("back\\slash", '"back\\\\slash"'),
    ],
)
def test_values_are_quoted_only_when_needed(value: object, text: str) -> None:
    assert format_value(value) == text


def test_a_registered_api_key_never_reaches_the_file(log_file: Path) -> None:
    secret = "k3y-" + "Zq9" * 10
    register_secret(secret)
    log = logging.getLogger("symphony_tui.tracker")
    log_kv(log, "INFO", f"calling with {secret}", api_key=secret, header=f"Authorization: {secret}")
    log.error("request failed: %s", {"token": secret})
    try:
        raise RuntimeError(f"bad key {secret}")
    except RuntimeError:
        log.exception("crash")
    text = log_file.read_text()
    assert secret not in text
    assert "Zq9Zq9" not in text
    assert text.count("***") >= 4


def test_common_token_shapes_are_masked_without_registration() -> None:
    samples = {
        "key lin_api_abcdefghijklmnop1234 used": "lin_api_abcdefghijklmnop1234",
        "OPENAI sk-proj-ABCDEFGHIJKLMNOPQRST0123 ok": "ABCDEFGHIJKLMNOPQRST0123",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig": "eyJhbGciOiJIUzI1NiJ9",
        "url?api_key=supersecret123&x=1": "supersecret123",
        '{"session_api_key": "abcd1234efgh"}': "abcd1234efgh",
        "password=hunter22 user=bob": "hunter22",
        "gh token ghp_abcdefghijklmnopqrstuvwxyz0123": "ghp_abcdefghijklmnopqrstuvwxyz0123",
    }
    for text, secret in samples.items():
        masked = redact(text)
        assert secret not in masked, masked
        assert "***" in masked
    assert redact("nothing to hide here: tokens=42") == "nothing to hide here: tokens=42"
    assert "user=bob" in redact("password=hunter22 user=bob")


def test_redactor_masks_longest_secret_first_and_ignores_tiny_values() -> None:
    r = Redactor()
    r.register("abcd")
    r.register("abcdefgh")
    r.register("x")
    r.register(None)
    assert r.redact("abcdefgh abcd x") == "*** *** x"


def test_logging_sink_failures_do_not_crash_orchestration(
    log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = next(h for h in logging.getLogger().handlers if getattr(h, logs._HANDLER_MARK, False))
    assert handler.stream is not None
    handler.stream.close()  # the sink breaks (disk gone, fd closed...)
    logging.getLogger("x").error("still fine")
    log_kv(logging.getLogger("x"), "INFO", "still fine", a=1)
    assert handler.failures >= 2
    assert capsys.readouterr().err == ""


def test_reconfiguring_replaces_only_our_handler(log_file: Path, tmp_path: Path) -> None:
    other = logging.NullHandler()
    root = logging.getLogger()
    root.addHandler(other)
    try:
        second = configure_logging(tmp_path / "other", level=logging.WARNING)
        ours = [h for h in root.handlers if getattr(h, logs._HANDLER_MARK, False)]
        assert len(ours) == 1 and other in root.handlers
        logging.getLogger("x").info("hidden")
        logging.getLogger("x").warning("shown")
        flush()
        assert "shown" in second.read_text() and "hidden" not in second.read_text()
    finally:
        root.removeHandler(other)


def test_after_leave_rotation_the_file_is_followed_never_rotated(
    log_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A console attached to its project's scheduler writes the scheduler's log file: it
    leaves the rotation to the scheduler and follows the file it rotated."""
    monkeypatch.setattr(logs, "MAX_BYTES", 200)
    path = configure_logging(log_file.parent, level="INFO", file_name="shared.log")
    logs.leave_rotation()
    for n in range(10):  # well past MAX_BYTES
        logging.getLogger("x").info("line %d", n)
    flush()
    assert sorted(p.name for p in path.parent.glob("shared.log*")) == ["shared.log"]
    assert len(path.read_text().splitlines()) == 10
    path.rename(path.with_name("shared.log.1"))  # the scheduler rotated it
    logging.getLogger("x").info("after the rotation")
    flush()
    assert path.read_text().splitlines()[-1].split(" msg=")[1].startswith('"after the rotation"')
    assert "after the rotation" not in path.with_name("shared.log.1").read_text()
