"""The ACP backend against the scripted agent (testing/src/symphony_tui_testing/fake_acp_agent.py):
the handshake, a turn's updates as typed events, usage reported or not, permissions
through the host with the agent's own options, the workspace-only file methods, stop
reasons, interrupts, bad lines, a crash, authentication and ``session/load`` after a
restart; and every message both sides wrote checked against the published schema."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from pathlib import Path

import pytest

from symphony_tui.agents.acp.session import AcpSession, turn_usage
from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.domain import ApprovalAnswer, ApprovalDecision, ApprovalKind, EventKind
from symphony_tui.domain.payloads import (
    CommandEnded,
    FileChange,
    Plan,
    SessionStarted,
    TokenReport,
    TurnEnded,
)
from symphony_tui.hosts.local_group import identify

from .conftest import FAKE_AGENT, FakeAgentRun
from .schema import validate_exchange


async def test_a_turn_reports_thoughts_plan_message_and_absolute_usage(fake_agent):
    host = fake_agent.host()
    session = await fake_agent.backend.start_session(host)
    try:
        first = await session.run_turn("THINK PLAN say hi")
        second = await session.run_turn("again", continuation=True)
    finally:
        await fake_agent.backend.aclose()
    assert first.status == TurnStatus.COMPLETED and second.status == TurnStatus.COMPLETED
    started = host.of_kind(EventKind.SESSION_STARTED)[0].payload
    assert isinstance(started, SessionStarted) and not started.resumed
    assert started.thread_id == session.session_id == host.recorded["acp_session_id"]
    assert host.recorded["backend"] == "acp"
    assert [e.message for e in host.of_kind(EventKind.REASONING)] == ["Let me think."]
    plan = host.of_kind(EventKind.PLAN)[0].payload
    assert isinstance(plan, Plan)
    assert [(s.step, s.status) for s in plan.steps] == [
        ("look around", "completed"),
        ("change things", "in_progress"),
    ]
    messages = [e.message for e in host.of_kind(EventKind.MESSAGE)]
    assert messages == [
        "Hello from the fake agent. You said: THINK PLAN say hi",
        "Hello from the fake agent. You said: again",
    ]
    deltas = [e.message for e in host.of_kind(EventKind.MESSAGE_DELTA)]
    assert "".join(deltas) == "".join(messages)
    usage = [e.payload for e in host.of_kind(EventKind.TOKEN_USAGE)]
    assert all(isinstance(u, TokenReport) for u in usage)
    # each answer reports its turn's tokens; the events carry the session's totals
    assert [u.usage.total_tokens for u in usage] == [111, 111 + 112]
    assert usage[-1].usage.input_tokens == 101 + 102
    kinds = host.kinds()
    assert kinds.index(EventKind.TURN_STARTED) < kinds.index(EventKind.MESSAGE)
    assert kinds.count(EventKind.TURN_COMPLETED) == 2
    assert kinds.index(EventKind.MESSAGE) < kinds.index(EventKind.TURN_COMPLETED)


async def test_usage_not_reported_gives_no_token_event(fake_agent):
    host = fake_agent.host()
    (result,) = await fake_agent.turns(host, "NOUSAGE hello")
    assert result.status == TurnStatus.COMPLETED
    assert host.of_kind(EventKind.TOKEN_USAGE) == []


async def test_permission_offers_the_agents_options_and_the_chosen_one_is_sent(fake_agent):
    chosen = ApprovalAnswer(decision=ApprovalDecision.ACCEPT, answers={"option": ("Always allow",)})
    host = fake_agent.host(approve=chosen)
    (result,) = await fake_agent.turns(host, "RUN ls")
    assert result.status == TurnStatus.COMPLETED
    (request,) = host.approvals
    assert request.kind == ApprovalKind.COMMAND and request.command == "ls"
    assert request.backend == "acp" and request.cwd == str(host.workspace)
    assert [o.label for o in request.questions[0].options] == [
        "Allow once",
        "Always allow",
        "Reject",
        "Always reject",
    ]
    assert request.available == (
        ApprovalDecision.ACCEPT,
        ApprovalDecision.ACCEPT_FOR_SESSION,
        ApprovalDecision.DECLINE,
        ApprovalDecision.CANCEL,
    )
    assert fake_agent.outcomes() == [{"outcome": "selected", "optionId": "allow-always"}]
    ended = host.of_kind(EventKind.COMMAND_COMPLETED)[0].payload
    assert isinstance(ended, CommandEnded)
    assert (ended.command, ended.exit_code, ended.output) == ("ls", 0, "ran ls")
    assert host.of_kind(EventKind.COMMAND_STARTED)[0].message == "ls"


@pytest.mark.parametrize(
    ("decision", "option"),
    [
        (ApprovalDecision.ACCEPT, "allow-once"),
        (ApprovalDecision.ACCEPT_FOR_SESSION, "allow-always"),
        (ApprovalDecision.DECLINE, "reject-once"),
    ],
)
async def test_plain_decisions_map_onto_the_agents_options(fake_agent, decision, option):
    host = fake_agent.host(approve=decision)
    await fake_agent.turns(host, "RUN make")
    assert fake_agent.outcomes() == [{"outcome": "selected", "optionId": option}]
    if decision == ApprovalDecision.DECLINE:
        assert host.of_kind(EventKind.MESSAGE)[-1].message.endswith("(reject_once)")
        (ended,) = host.of_kind(EventKind.COMMAND_COMPLETED)
        assert ended.payload.status == "failed" and ended.payload.exit_code is None


async def test_an_edit_writes_inside_the_workspace_and_reports_its_diff(fake_agent):
    host = fake_agent.host()
    (host.workspace / "notes.txt").write_text("first line\n")
    (result,) = await fake_agent.turns(host, "EDIT notes.txt")
    assert result.status == TurnStatus.COMPLETED
    assert (host.workspace / "notes.txt").read_text() == "first line\nedited by the fake agent\n"
    assert host.approvals[0].kind == ApprovalKind.FILE_CHANGE
    assert host.approvals[0].files == (str(host.workspace / "notes.txt"),)
    changes = [e.payload for e in host.of_kind(EventKind.FILE_CHANGE)]
    assert all(isinstance(c, FileChange) for c in changes)
    assert [c.status for c in changes] == ["in_progress", "completed"]
    diff = changes[-1].changes[0].diff
    assert diff is not None and "+edited by the fake agent" in diff and " first line" in diff
    # headers name the file inside the workspace, not its absolute path
    assert diff.startswith("--- a/notes.txt\n+++ b/notes.txt\n"), diff


async def test_paths_outside_the_workspace_are_refused_with_an_error_the_agent_reads(
    fake_agent, tmp_path
):
    host = fake_agent.host()
    secret = tmp_path / "outside.txt"
    secret.write_text("not for agents")
    (host.workspace / "escape").symlink_to(tmp_path)
    results = await fake_agent.turns(
        host,
        f"READ {secret}",
        f"READ {host.workspace / 'escape' / 'outside.txt'}",
        "READ ../outside.txt",
        f"READ {host.workspace / 'missing.txt'}",
    )
    assert {r.status for r in results} == {TurnStatus.COMPLETED}
    said = [e.message for e in host.of_kind(EventKind.MESSAGE)]
    assert said[0].startswith("read failed: path ") and "is outside the workspace" in said[0]
    assert "is outside the workspace" in said[1]
    assert said[2] == "read failed: path '../outside.txt' is not absolute"
    assert said[3].startswith("read failed: file not found")
    # a file not found is the agent's business (it reads before creating one): no warning
    assert len(host.of_kind(EventKind.WARNING)) == 3


async def test_a_write_outside_the_workspace_is_refused(tmp_path):
    run = FakeAgentRun(tmp_path)
    host = run.host()
    # the scripted edit writes <cwd>/<name>: a name climbing out of the workspace
    await run.turns(host, "EDIT ../../stolen.txt")
    assert not (tmp_path / "stolen.txt").exists()
    assert host.of_kind(EventKind.MESSAGE)[-1].message.startswith("write failed: path ")
    # the warning says what this client refused, not that the write cannot happen
    (warning,) = [
        w.message for w in host.of_kind(EventKind.WARNING) if w.message.startswith("fs/write")
    ]
    assert warning.startswith("fs/write_text_file: refused to write for the agent: path ")
    assert warning.endswith("(the agent may still write it with its own tools)")


async def test_a_terminal_runs_in_the_workspace_and_reports_its_exit(fake_agent):
    host = fake_agent.host()
    results = await fake_agent.turns(
        host,
        "TERM: pwd; echo oops >&2; exit 3",
        "TERMCAP9 TERM: printf 'é%.0s' $(seq 40)",
        "TERMCWD:/etc TERM: ls",
        "TERMKILL",
    )
    assert {r.status for r in results} == {TurnStatus.COMPLETED}
    said = [e.message for e in host.of_kind(EventKind.MESSAGE)]
    assert said[0] == f"terminal exit 3 signal None truncated False: {host.workspace}\noops\n"
    # 9 bytes at most, cut at a character boundary: four whole "é" (2 bytes each)
    assert said[1] == "terminal exit 0 signal None truncated True: éééé"
    assert said[2].startswith("terminal failed: path /etc is outside the workspace")
    assert said[3] == "terminal exit None signal SIGTERM truncated False: "
    assert host.of_kind(EventKind.COMMAND_STARTED)[0].message == "pwd; echo oops >&2; exit 3"
    # the tool call shows its terminal's output
    ended = host.of_kind(EventKind.COMMAND_COMPLETED)[0].payload
    assert isinstance(ended, CommandEnded) and ended.output == f"{host.workspace}\noops\n"


async def test_a_client_method_that_fails_here_answers_the_agent_with_an_error(fake_agent):
    host = fake_agent.host()
    (result,) = await fake_agent.turns(host, "TERM: echo a\x00b")
    assert result.status == TurnStatus.COMPLETED
    said = host.of_kind(EventKind.MESSAGE)[0].message
    assert said == "terminal failed: terminal/create failed: ValueError: embedded null byte"
    assert host.of_kind(EventKind.WARNING)[0].message == said.removeprefix("terminal failed: ")


async def test_terminals_end_with_the_session(fake_agent):
    host = fake_agent.host()
    session = await fake_agent.backend.start_session(host)
    turn = asyncio.ensure_future(session.run_turn("TERM: sleep 300"))
    try:
        await host.wait_for(EventKind.COMMAND_STARTED)
        (terminal,) = session._terminals._live.values()
        pid = terminal.proc.pid
        assert _alive(pid)
        # recorded for the workspace manifest: a restarted scheduler's reap ends it
        (group,) = host.recorded["terminal_groups"]
        assert group == identify(pid) and group["pgid"] == pid
    finally:
        await fake_agent.backend.aclose()
    with contextlib.suppress(AgentError):
        await turn
    assert not _alive(pid)
    assert host.recorded["terminal_groups"] == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


@pytest.mark.parametrize("reason", ["max_tokens", "max_turn_requests", "refusal"])
async def test_stop_reasons_fail_the_turn_with_the_reason(fake_agent, reason):
    host = fake_agent.host()
    (result,) = await fake_agent.turns(host, f"hello STOP:{reason}")
    assert result.status == TurnStatus.FAILED
    assert result.error is not None and result.error.startswith(f"stop reason {reason}")
    end = host.of_kind(EventKind.TURN_FAILED)[0].payload
    assert isinstance(end, TurnEnded) and end.outcome == "failed"


async def test_interrupt_sends_cancel_and_the_turn_ends_interrupted(fake_agent):
    host = fake_agent.host()
    session = await fake_agent.backend.start_session(host)
    try:
        turn = asyncio.ensure_future(session.run_turn("SLOW400"))
        await host.wait_for(EventKind.MESSAGE_DELTA)
        await session.interrupt()
        result = await turn
        after = await session.run_turn("still there?")
    finally:
        await fake_agent.backend.aclose()
    assert result.status == TurnStatus.INTERRUPTED
    assert host.of_kind(EventKind.TURN_CANCELLED)[0].payload.outcome == "cancelled"
    assert after.status == TurnStatus.COMPLETED
    sent = [m.get("method") for m in fake_agent.sent]
    assert sent.count("session/cancel") == 1


async def test_interrupt_answers_a_pending_permission_cancelled(fake_agent):
    asked = asyncio.Event()

    async def never(request):
        asked.set()
        await asyncio.Event().wait()

    host = fake_agent.host(approve=never)
    session = await fake_agent.backend.start_session(host)
    try:
        turn = asyncio.ensure_future(session.run_turn("RUN rm -rf build"))
        await asyncio.wait_for(asked.wait(), 30)
        await session.interrupt()
        result = await turn
    finally:
        await fake_agent.backend.aclose()
    assert result.status == TurnStatus.INTERRUPTED
    assert fake_agent.outcomes() == [{"outcome": "cancelled"}]


async def test_a_cancel_answer_stops_the_turn(fake_agent):
    host = fake_agent.host(approve=ApprovalDecision.CANCEL)
    (result,) = await fake_agent.turns(host, "RUN deploy")
    assert result.status == TurnStatus.INTERRUPTED
    assert [m.get("method") for m in fake_agent.sent].count("session/cancel") == 1
    assert host.of_kind(EventKind.COMMAND_COMPLETED) == []


async def test_bad_lines_are_reported_once_each_and_the_turn_goes_on(fake_agent):
    host = fake_agent.host()
    (result,) = await fake_agent.turns(host, "GARBAGE then hello")
    assert result.status == TurnStatus.COMPLETED
    bad = [e.message for e in host.of_kind(EventKind.MALFORMED)]
    assert len(bad) == 2
    assert bad[0].startswith("invalid JSON") and bad[1].startswith("not a JSON object")
    assert all("\n" not in m for m in bad)


async def test_an_oversized_line_is_skipped_with_one_report(tmp_path):
    run = FakeAgentRun(tmp_path)
    host = run.host()
    session = AcpSession(
        host,
        run.settings.acp,
        run.backend.child_env(run.settings),
        turn_timeout_ms=60_000,
        line_limit=400,
    )
    await session.open()
    try:
        result = await session.run_turn("LONG600 and LONG700")
    finally:
        await session.close()
    assert result.status == TurnStatus.COMPLETED
    bad = [e.message for e in host.of_kind(EventKind.MALFORMED)]
    assert len(bad) == 2 and all(m.startswith("line longer than 400 bytes") for m in bad)
    assert [e.message for e in host.of_kind(EventKind.MESSAGE)] == [
        "Hello from the fake agent. You said: LONG600 and LONG700"
    ]


async def test_an_agent_that_dies_mid_turn_fails_it_with_its_exit(fake_agent):
    host = fake_agent.host()
    session = await fake_agent.backend.start_session(host)
    try:
        with pytest.raises(AgentError) as err:
            await session.run_turn("CRASH")
    finally:
        await fake_agent.backend.aclose()
    assert err.value.code == "process_exited"
    assert "exited with code 3" in err.value.message


async def test_a_missing_program_fails_the_launch_in_one_line(tmp_path):
    run = FakeAgentRun(tmp_path, command="no-such-acp-agent --acp")
    with pytest.raises(AgentError) as err:
        await run.backend.start_session(run.host())
    assert err.value.code == "launch_failed"
    assert "no-such-acp-agent" in err.value.message and "code 127" in err.value.message
    assert "\n" not in err.value.message


async def test_an_agent_asking_to_authenticate_names_its_methods(tmp_path):
    run = FakeAgentRun(tmp_path, env={"FAKE_ACP_AUTH": "1"})
    with pytest.raises(AgentError) as err:
        await run.backend.start_session(run.host())
    assert err.value.code == "handshake_failed"
    assert "acp.auth_method" in err.value.message and "token" in err.value.message

    run = FakeAgentRun(tmp_path / "again", env={"FAKE_ACP_AUTH": "1"}, auth_method="token")
    host = run.host()
    (result,) = await run.turns(host, "hi")
    assert result.status == TurnStatus.COMPLETED
    assert [m.get("method") for m in run.sent[:3]] == ["initialize", "authenticate", "session/new"]


async def test_a_restart_loads_the_recorded_session_without_replaying_it(tmp_path):
    run = FakeAgentRun(tmp_path)
    host = run.host()
    session = await run.backend.start_session(host)
    await session.run_turn("remember the word heron")
    await run.backend.aclose()

    again = FakeAgentRun(tmp_path)
    host2 = again.host(resume=host.recorded)
    session2 = await again.backend.start_session(host2)
    try:
        result = await session2.run_turn("what was the word?")
    finally:
        await again.backend.aclose()
    assert result.status == TurnStatus.COMPLETED
    assert session2.session_id == session.session_id
    started = host2.of_kind(EventKind.SESSION_STARTED)[0].payload
    assert isinstance(started, SessionStarted) and started.resumed
    # the replayed history is not reported again: one message, this turn's
    assert [e.message for e in host2.of_kind(EventKind.MESSAGE)] == [
        "Hello from the fake agent. You said: what was the word?"
    ]
    assert "session/load" in [m.get("method") for m in again.sent]


async def test_an_agent_without_load_session_gets_a_new_one(tmp_path):
    run = FakeAgentRun(tmp_path, env={"FAKE_ACP_NO_LOAD": "1"})
    host = run.host()
    first = await run.backend.start_session(host)
    first_id = first.session_id
    await run.backend.aclose()
    second = await run.backend.start_session(run.host(resume=host.recorded))
    await run.backend.aclose()
    assert second.session_id != first_id
    assert "session/load" not in [m.get("method") for m in run.sent]


async def test_every_message_matches_the_published_schema(fake_agent):
    host = fake_agent.host()
    (host.workspace / "a.txt").write_text("a\n")
    session = await fake_agent.backend.start_session(host)
    try:
        await session.run_turn("THINK PLAN hello")
        await session.run_turn("RUN ls")
        await session.run_turn("EDIT a.txt")
        await session.run_turn(f"READ {Path(os.sep) / 'etc' / 'hostname'}")
        await session.run_turn("TERMCAP100 TERM: echo hi")
        await session.run_turn("TERMKILL")
        turn = asyncio.ensure_future(session.run_turn("SLOW400"))
        await host.wait_for(lambda e: e.kind == EventKind.MESSAGE_DELTA and "word" in e.message)
        await session.interrupt()
        await turn
    finally:
        await fake_agent.backend.aclose()
    exchange = fake_agent.exchange()
    assert validate_exchange(exchange) > 30
    sent = {m.get("method") for side, m in exchange if side == "client"}
    assert {"initialize", "session/new", "session/prompt", "session/cancel"} <= sent
    asked = {m.get("method") for side, m in exchange if side == "agent"}
    assert {"terminal/create", "terminal/kill", "terminal/release", "fs/write_text_file"} <= asked
    written = [m for m in fake_agent.sent if "method" in m or "result" in m or "error" in m]
    assert len(written) == len([1 for side, _m in exchange if side == "client"])


async def test_a_choice_naming_no_option_rejects_never_allows(fake_agent):
    typed = ApprovalAnswer(decision=ApprovalDecision.ACCEPT, answers={"option": ("sure, go",)})
    host = fake_agent.host(approve=typed)
    await fake_agent.turns(host, "RUN make")
    assert fake_agent.outcomes() == [{"outcome": "selected", "optionId": "reject-once"}]
    (request,) = host.approvals
    assert not request.questions[0].free_text
    assert [o.id for o in request.questions[0].options] == [
        "allow-once",
        "allow-always",
        "reject-once",
        "reject-always",
    ]


async def test_an_agent_dying_mid_turn_leaves_no_unretrieved_task_error(fake_agent, caplog):
    host = fake_agent.host()
    session = await fake_agent.backend.start_session(host)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        try:
            with pytest.raises(AgentError):
                await session.run_turn("CRASH")
        finally:
            await fake_agent.backend.aclose()
        del session
        gc.collect()  # a task's unretrieved error is logged when the task is collected
        await asyncio.sleep(0)
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert not [r for r in caplog.records if r.exc_info]


async def test_an_edit_creating_a_file_gives_no_warning(fake_agent):
    host = fake_agent.host()
    (result,) = await fake_agent.turns(host, "EDIT new.txt")
    assert result.status == TurnStatus.COMPLETED
    assert (host.workspace / "new.txt").read_text() == "edited by the fake agent\n"
    assert host.of_kind(EventKind.WARNING) == []


async def test_launch_is_bash_lc_of_the_command_in_the_workspace(tmp_path):
    seen = tmp_path / "seen.txt"
    # shell syntax only bash -lc runs; $0 names the shell, pwd its directory
    run = FakeAgentRun(tmp_path, command=f'echo "$0 $(pwd)" > {seen} && exec {FAKE_AGENT}')
    host = run.host()
    (result,) = await run.turns(host, "hi")
    assert result.status == TurnStatus.COMPLETED
    assert seen.read_text() == f"bash {host.workspace}\n"
    (new,) = [m for side, m in run.exchange() if m.get("method") == "session/new"]
    assert new["params"]["cwd"] == str(host.workspace)


async def test_a_silent_agent_fails_the_handshake_at_the_read_timeout(tmp_path):
    run = FakeAgentRun(tmp_path, command="exec sleep 30", read_timeout_ms=300)
    with pytest.raises(AgentError) as err:
        await run.backend.start_session(run.host())
    assert err.value.code == "read_timeout"
    assert err.value.message == "initialize got no response within 300 ms"


async def test_a_silent_turn_fails_at_the_turn_timeout_and_is_cancelled(tmp_path):
    run = FakeAgentRun(tmp_path)
    host = run.host()
    session = AcpSession(
        host, run.settings.acp, run.backend.child_env(run.settings), turn_timeout_ms=300
    )
    await session.open()
    try:
        result = await session.run_turn("HANG")
    finally:
        await session.close()
    # failed with the timeout, not reported as an interrupt, though the agent's answer
    # to the cancel sent here says "cancelled"
    assert result.status == TurnStatus.FAILED, result
    assert result.error == "turn_timeout: no output from the agent for 300 ms"
    (end,) = host.of_kind(EventKind.TURN_FAILED)
    assert isinstance(end.payload, TurnEnded) and end.payload.outcome == "failed"
    assert host.of_kind(EventKind.TURN_CANCELLED) == []
    assert [m.get("method") for side, m in run.exchange()].count("session/cancel") == 1


async def test_stderr_is_kept_apart_from_the_protocol_and_ends_the_exit_reason(tmp_path):
    run = FakeAgentRun(
        tmp_path,
        command=f"echo 'warming up {{not json' >&2; {FAKE_AGENT}; s=$?; "
        "echo 'fatal: the model went away' >&2; exit $s",
    )
    host = run.host()
    session = await run.backend.start_session(host)
    try:
        first = await session.run_turn("hi")
        with pytest.raises(AgentError) as err:
            await session.run_turn("CRASH")
    finally:
        await run.backend.aclose()
    assert first.status == TurnStatus.COMPLETED
    assert host.of_kind(EventKind.MALFORMED) == []  # stderr is never read as protocol
    assert err.value.code == "process_exited"
    assert "exited with code 3" in err.value.message
    assert err.value.message.endswith("fatal: the model went away")
    assert "\n" not in err.value.message


async def test_an_agent_request_served_nowhere_gets_method_not_found(fake_agent):
    host = fake_agent.host()
    (asked, after) = await fake_agent.turns(host, "ASK tools/call", "still there?")
    assert asked.status == after.status == TurnStatus.COMPLETED
    said = [e.message for e in host.of_kind(EventKind.MESSAGE)]
    assert said[0] == "tools/call failed: method not found: tools/call"
    (error,) = [m for side, m in fake_agent.exchange() if side == "client" and "error" in m]
    assert error["error"]["code"] == -32601


def test_a_prompt_answers_usage_in_domain_terms_with_a_missing_total_derived():
    usage = turn_usage(
        {"inputTokens": 120, "outputTokens": 30, "cachedReadTokens": 100, "thoughtTokens": 12}
    )
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (120, 30, 150)
    assert (usage.cached_input_tokens, usage.reasoning_tokens) == (100, 12)
    reported = turn_usage({"inputTokens": 5, "outputTokens": 1, "totalTokens": 9})
    assert reported is not None and reported.total_tokens == 9
    # no count at all is "not reported", never zeros
    assert turn_usage({}) is None and turn_usage(None) is None
    assert turn_usage({"inputTokens": "many"}) is None
