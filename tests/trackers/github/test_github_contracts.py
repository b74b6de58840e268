"""The contract checks themselves: GitHub's OpenAPI description and GraphQL schema reject what
GitHub would reject, every GraphQL document the tracker sends validates, and the fake's
violations list catches a request the tracker must never send."""

from __future__ import annotations

import httpx
import pytest

from symphony_tui.trackers.github import queries
from symphony_tui_testing.github_contracts import graphql_schema, rest_contract, validate_graphql

from .conftest import TOKEN, require_contracts


@pytest.fixture(scope="module", autouse=True)
def _contracts() -> None:
    require_contracts()


def test_rest_contract_finds_operations_and_flags_bad_requests() -> None:
    contract = rest_contract()
    assert contract.operation("GET", "/repos/o/r/issues/comments").template.endswith("/comments")
    assert contract.operation("GET", "/repos/o/r/issues/7").template.endswith("{issue_number}")
    assert contract.operation("GET", "/repos/o/r/nope/x") is None
    ok = contract.validate_request("GET", "/repos/o/r/issues", {"state": ["open"]}, None, False)
    assert ok == []
    bad = contract.validate_request("GET", "/repos/o/r/issues", {"state": ["opened"]}, None, False)
    assert bad and "opened" in bad[0]
    unknown = contract.validate_request("GET", "/repos/o/r/issues", {"stat": ["x"]}, None, False)
    assert unknown == ["GET /repos/o/r/issues: unknown query parameter 'stat'"]
    body = contract.validate_request("PATCH", "/repos/o/r/issues/1", {}, {"state": "done"}, True)
    assert body and "done" in body[0]
    number = contract.validate_request("GET", "/repos/o/r/issues/GH-1", {}, None, False)
    assert number and "path issue_number" in number[0]
    missing = contract.validate_request("POST", "/repos/o/r/issues/1/comments", {}, {}, True)
    assert missing and "'body' is a required property" in missing[0]


def test_rest_contract_flags_bad_answers() -> None:
    contract = rest_contract()
    problems = contract.validate_response("GET", "/repos/o/r/issues/1", 200, {"number": 1})
    assert problems and all("is a required property" in p for p in problems)
    assert contract.validate_response("GET", "/repos/o/r/issues/1", 418, None)


@pytest.mark.parametrize("document", queries.ALL_DOCUMENTS, ids=lambda d: d.split("(")[0][-40:])
def test_every_graphql_document_is_valid_against_githubs_schema(document: str) -> None:
    assert validate_graphql(document) == []


def test_graphql_schema_rejects_a_wrong_field() -> None:
    assert graphql_schema().get_type("ProjectV2") is not None
    assert validate_graphql('query { repository(owner: "o", name: "r") { nope } }')


async def test_the_fake_records_a_request_off_the_contract(fake) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        await http.get(f"{fake.url}/repos/octo/app/issues", params={"state": "opened"})
        await http.post(f"{fake.url}/graphql", json={"query": "{ viewer { nope } }"})
    assert len(fake.violations) == 2
    assert "opened" in fake.violations[0] and "nope" in fake.violations[1]
    fake.violations.clear()  # the fixture asserts none are left
