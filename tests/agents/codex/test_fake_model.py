"""The fake model server on its own: scripts, both APIs, usage accounting, failures."""

from __future__ import annotations

import json

import httpx
import pytest

from symphony_tui.domain import TokenUsage
from symphony_tui_testing.fake_model import FakeModelServer, decide, usage_for

# trust_env=False: proxy variables in the environment must not reroute loopback calls.
HTTP = httpx.Client(trust_env=False, timeout=10)

SHELL_TOOL_RESPONSES = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "sandbox_permissions": {"type": "string"},
            "justification": {"type": "string"},
        },
        "required": ["cmd"],
    },
}
STATE_TOOL_CHAT = {
    "type": "function",
    "function": {
        "name": "symphony_set_issue_state",
        "parameters": {"type": "object", "properties": {"state": {"type": "string"}}},
    },
}


@pytest.fixture
def srv():
    with FakeModelServer(slow_delay=0.001) as s:
        yield s


def _sse(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def test_decide_scripts():
    assert decide("SHELL: ls -la", None).command == "ls -la"
    assert decide("please ESCALATE SHELL: rm x", None).escalate is True
    assert len(decide("SLOW7", None).words) == 7
    tool = decide('TOOL: symphony_set_issue_state {"state": "Done"}', None)
    assert (tool.kind, tool.tool, tool.arguments) == (
        "tool",
        "symphony_set_issue_state",
        {"state": "Done"},
    )
    assert decide("SHELL: ls", "output!").text.endswith("output!")
    assert decide("hello", None).kind == "text"


def test_usage_is_deterministic_and_varied():
    a, b = usage_for(1, 3), usage_for(2, 3)
    assert a == usage_for(1, 3) and a != b
    assert b.reasoning_tokens > 0 and a.reasoning_tokens == 0
    assert usage_for(1, 0).cached_input_tokens > 0
    for u in (a, b):
        assert u.total_tokens == u.input_tokens + u.output_tokens
        assert u.cached_input_tokens <= u.input_tokens and u.reasoning_tokens <= u.output_tokens


def test_models_and_paths_without_v1(srv):
    for path in ("/v1/models", "/models"):
        r = HTTP.get(f"http://127.0.0.1:{srv.port}{path}")
        assert r.json()["data"][0]["id"] == "fake-model"
    assert srv.url == f"http://127.0.0.1:{srv.port}/v1"


def test_responses_stream_escalated_shell_call(srv):
    body = {
        "model": "fake-model",
        "stream": True,
        "tools": [SHELL_TOOL_RESPONSES],
        "input": [{"type": "message", "role": "user", "content": "ESCALATE SHELL: echo hi"}],
    }
    r = HTTP.post(f"{srv.url}/responses", json=body)
    events = _sse(r.text)
    done = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    assert done["type"] == "function_call" and done["name"] == "exec_command"
    args = json.loads(done["arguments"])
    assert args["cmd"] == "echo hi" and args["sandbox_permissions"] == "require_escalated"
    completed = events[-1]
    assert completed["type"] == "response.completed"
    assert completed["response"]["usage"]["input_tokens"] == srv.usage_total.input_tokens
    assert srv.requests[0]["decision"] == {"kind": "shell", "command": "echo hi", "escalate": True}


def test_responses_tool_result_turns_into_text(srv):
    body = {
        "stream": False,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]},
            {"type": "function_call_output", "call_id": "c", "output": "42 files"},
        ],
    }
    out = HTTP.post(f"{srv.url}/responses", json=body).json()["output"][0]
    assert "42 files" in out["content"][0]["text"]


def test_chat_stream_with_usage_chunk_and_tool_call(srv):
    body = {
        "model": "fake-model",
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [STATE_TOOL_CHAT],
        "messages": [
            {"role": "user", "content": 'TOOL: symphony_set_issue_state {"state":"Done"}'}
        ],
    }
    chunks = _sse(HTTP.post(f"http://127.0.0.1:{srv.port}/chat/completions", json=body).text)
    calls = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    assert calls[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == (
        "symphony_set_issue_state"
    )
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == []
    assert usage["prompt_tokens"] == srv.usage_total.input_tokens
    assert (
        usage["completion_tokens_details"]["reasoning_tokens"] == srv.usage_total.reasoning_tokens
    )


def test_chat_stream_without_usage_option_reports_none(srv):
    body = {"stream": True, "messages": [{"role": "user", "content": "hi"}]}
    chunks = _sse(HTTP.post(f"{srv.url}/chat/completions", json=body).text)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks).startswith(
        "Hello from the fake model"
    )
    assert srv.usage_log == [] and srv.usage_total == TokenUsage()


def test_chat_non_stream_and_usage_total(srv):
    for text in ("one", "two"):
        r = HTTP.post(
            f"{srv.url}/chat/completions", json={"messages": [{"role": "user", "content": text}]}
        )
        assert r.json()["choices"][0]["message"]["content"].endswith(text)
    assert len(srv.usage_log) == 2
    assert srv.usage_total == srv.usage_log[0] + srv.usage_log[1]
    assert srv.decisions() == ["text", "text"]


def test_unknown_tool_falls_back_to_text(srv):
    body = {"messages": [{"role": "user", "content": "TOOL: nope {}"}], "tools": [STATE_TOOL_CHAT]}
    msg = HTTP.post(f"{srv.url}/chat/completions", json=body).json()["choices"][0]["message"]
    assert "No tool named nope" in msg["content"]


def test_fail_next_and_stop(srv):
    srv.fail_next(status=503, count=2)
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert HTTP.post(f"{srv.url}/chat/completions", json=body).status_code == 503
    assert HTTP.post(f"{srv.url}/responses", json={"input": "hi"}).status_code == 503
    assert HTTP.post(f"{srv.url}/chat/completions", json=body).status_code == 200
    assert [r["status"] for r in srv.requests] == [503, 503, 200]
    url = srv.url
    srv.stop()
    with pytest.raises(httpx.ConnectError):
        HTTP.get(f"{url}/models")
    srv.stop()  # idempotent


def test_bad_json_is_a_400(srv):
    r = HTTP.post(f"{srv.url}/responses", content=b"{nope")
    assert r.status_code == 400 and "bad json" in r.json()["error"]["message"]


def test_responses_stream_think_streams_a_reasoning_summary_first(srv):
    body = {
        "model": "fake-model",
        "stream": True,
        "input": [{"type": "message", "role": "user", "content": "THINK3 then answer"}],
    }
    events = _sse(HTTP.post(f"{srv.url}/responses", json=body).text)
    deltas = [e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta"]
    assert deltas == ["thought0 ", "thought1 ", "thought2 "]
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert [(d["output_index"], d["item"]["type"]) for d in done] == [
        (0, "reasoning"),
        (1, "message"),
    ]
    assert done[0]["item"]["summary"] == [
        {"type": "summary_text", "text": "thought0 thought1 thought2 "}
    ]
    assert srv.requests[0]["decision"] == {"kind": "text", "think": 3}
    assert decide("THINK2 SLOW4", None).summary() == {"kind": "slow", "think": 2, "words": 4}


def test_extra_headers_on_every_successful_answer():
    with FakeModelServer(headers={"x-codex-primary-used-percent": "42"}) as s:
        body = {"model": "m", "stream": True, "input": "hi"}
        r = HTTP.post(f"{s.url}/responses", json=body)
        assert r.headers["x-codex-primary-used-percent"] == "42"
        r = HTTP.post(
            f"{s.url}/chat/completions", json={"messages": [{"role": "user", "content": "x"}]}
        )
        assert r.headers["x-codex-primary-used-percent"] == "42"
        s.fail_next(500)
        r = HTTP.post(f"{s.url}/responses", json=body)
        assert r.status_code == 500 and "x-codex-primary-used-percent" not in r.headers


def test_godown_stops_listening_after_the_answer_and_start_comes_back(srv):
    body = {"model": "m", "stream": True, "input": "hello GODOWN"}
    r = HTTP.post(f"{srv.url}/responses", json=body)
    assert "Hello from the fake model" in r.text and srv.requests[0]["decision"]["down"] is True
    with pytest.raises(httpx.ConnectError):
        HTTP.post(f"{srv.url}/responses", json={"model": "m", "input": "again"})
    port = srv.port
    srv.aliases["again"] = "SLOW2"
    srv.start()
    assert srv.port == port
    r = HTTP.post(f"{srv.url}/responses", json={"model": "m", "input": "again"})
    assert r.json()["output"][0]["content"][0]["text"] == "word0 word1 "
    assert srv.usage_total == srv.usage_log[0] + srv.usage_log[1]
