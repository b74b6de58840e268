"""FakeLinear itself: it must refuse what real Linear refuses, so tests built on it mean
something."""

from __future__ import annotations

import httpx
import pytest

from symphony_tui_testing.fake_linear import FakeLinear

from .conftest import API_KEY


def post(fake: FakeLinear, query: str, variables: dict | None = None, key: str = API_KEY):
    body = {"query": query, "variables": variables or {}}
    # A bound, not a measure: the fake's first answer builds its schema, seconds on a busy machine.
    return httpx.post(fake.url, json=body, headers={"Authorization": key}, timeout=60)


def test_auth_must_match(fake: FakeLinear) -> None:
    assert post(fake, "{ viewer { id } }", key="Bearer " + API_KEY).status_code == 401
    assert post(fake, "{ viewer { id } }").status_code == 200


def test_schema_validation_is_enforced(fake: FakeLinear) -> None:
    wrong_type = "query($ids: [String!]!) { issues(filter: {id: {in: $ids}}) { nodes { id } } }"
    response = post(fake, wrong_type, {"ids": ["x"]})
    assert response.status_code == 400
    assert "[ID!]" in response.json()["errors"][0]["message"]
    assert post(fake, "{ viewer { nope } }").status_code == 400


@pytest.mark.parametrize(
    "query",
    [
        "{ organization { id } }",  # root field without a resolver
        "{ issues(filter: {estimate: {eq: 1}}) { nodes { id } } }",  # filter key
        '{ issues(filter: {title: {notStartsWith: "x"}}) { nodes { id } } }',  # comparator
        "{ issues(last: 5) { nodes { id } } }",
        "{ issues(first: 251) { nodes { id } } }",
        '{ issues(after: "bogus") { nodes { id } } }',
    ],
)
def test_unsupported_or_invalid_is_an_error_not_a_silent_answer(
    fake: FakeLinear, query: str
) -> None:
    response = post(fake, query)
    assert response.status_code == 200
    assert response.json()["errors"]


def test_pagination_and_filters(fake: FakeLinear) -> None:
    ids = fake.add_issues(7, state="Todo", labels=["Bug"])
    fake.add_issues(3, state="Done")
    query = (
        "query($after: String) { issues(first: 3, after: $after, filter: "
        '{state: {name: {in: ["Todo"]}}, labels: {some: {name: {eqIgnoreCase: "bug"}}}}) '
        "{ nodes { id } pageInfo { hasNextPage endCursor } } }"
    )
    seen, after = [], None
    while True:
        page = post(fake, query, {"after": after}).json()["data"]["issues"]
        seen += [n["id"] for n in page["nodes"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == ids


def test_issue_update_rejects_a_state_of_another_team(fake: FakeLinear) -> None:
    issue_id = fake.add_issue("x")
    other_team = fake.add_team("OTH", "Other")
    foreign_state = fake.add_state("Todo", "unstarted", team_id=other_team)
    mutation = (
        "mutation($id: String!, $s: String!) "
        "{ issueUpdate(id: $id, input: {stateId: $s}) { success } }"
    )
    response = post(fake, mutation, {"id": issue_id, "s": foreign_state}).json()
    assert response["errors"] and fake.issue(issue_id)["state"] == "Todo"


def test_fail_next_and_request_log(fake: FakeLinear) -> None:
    fake.fail_next(503, count=2, after=1)
    statuses = [post(fake, "{ viewer { id } }").status_code for _ in range(4)]
    assert statuses == [200, 503, 503, 200]
    assert [r.status for r in fake.requests] == statuses
