"""Every GraphQL document the project sends is valid against Linear's public schema (spec §11.2:
"test the exact query fields/types"), and no document can hide outside ``ALL_DOCUMENTS``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from graphql import GraphQLSchema, OperationDefinitionNode, parse, validate

import symphony_tui
from symphony_tui.trackers.github import queries as github_queries
from symphony_tui.trackers.linear import queries
from symphony_tui_testing.fake_linear import SCHEMA_PATH, linear_schema

PACKAGE = Path(symphony_tui.__file__).parent
# An operation header: keyword, optional name, then "(" or "{".
_OPERATION = re.compile(r"\b(query|mutation|subscription)\s+\w*\s*[({]")


@pytest.fixture(scope="module")
def schema() -> GraphQLSchema:
    # The fake's resolvers do not change validation; reusing its cached build saves seconds.
    built = linear_schema()
    assert SCHEMA_PATH.is_file()
    assert built.get_type("Issue") is not None and built.get_type("IssueIDComparator") is not None
    return built


@pytest.mark.parametrize("document", queries.ALL_DOCUMENTS, ids=lambda d: _name(d))
def test_document_is_valid_against_linear_schema(schema: GraphQLSchema, document: str) -> None:
    errors = validate(schema, parse(document))
    assert errors == [], [e.message for e in errors]


def test_every_document_is_one_named_operation() -> None:
    names = [_name(d) for d in queries.ALL_DOCUMENTS]
    assert len(set(names)) == len(names)
    for document in queries.ALL_DOCUMENTS:
        ops = [d for d in parse(document).definitions if isinstance(d, OperationDefinitionNode)]
        assert len(ops) == 1


def test_spec_shapes() -> None:
    by_states = queries.ISSUES_BY_PROJECT_AND_STATES
    assert re.search(r"project:\s*\{\s*slugId:\s*\{\s*eq:\s*\$projectSlug", by_states)
    assert "hasNextPage" in by_states and "endCursor" in by_states
    assert re.search(r"\$ids:\s*\[ID!\]!", queries.ISSUES_BY_IDS)
    assert re.search(r"id:\s*\{\s*in:\s*\$ids", queries.ISSUES_BY_IDS)
    assert "inverseRelations" in queries.ISSUE_FIELDS
    assert queries.PAGE_SIZE == 50


def _string_constants(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    # f-strings: their literal parts are Constant nodes inside JoinedStr, already walked.
    return out


def test_no_graphql_document_outside_all_documents() -> None:
    """Scan the whole package source: any string literal that opens a GraphQL operation must
    be part of a document in ALL_DOCUMENTS (so it is validated above), or of the GitHub
    tracker's (validated against GitHub's schema in tests/trackers/github)."""
    documents = queries.ALL_DOCUMENTS + github_queries.ALL_DOCUMENTS
    found: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for literal in _string_constants(path):
            if _OPERATION.search(literal) and "{" in literal:
                found.append((str(path.relative_to(PACKAGE)), literal))
    assert found, "the scan should at least find the tracker's own documents"
    stray = [
        (where, literal.strip().splitlines()[0])
        for where, literal in found
        if not any(literal.strip() in doc for doc in documents)
        and not _is_docstring_example(literal)
    ]
    assert stray == []


def test_module_level_documents_are_all_listed() -> None:
    listed = set(queries.ALL_DOCUMENTS)
    for name in dir(queries):
        value = getattr(queries, name)
        if isinstance(value, str) and _OPERATION.search(value):
            assert value in listed, f"queries.{name} is not in ALL_DOCUMENTS"


def _is_docstring_example(literal: str) -> bool:
    # Prose that mentions "query Foo {" in a sentence is not a document: it does not parse.
    try:
        parse(literal)
    except Exception:
        return True
    return False


def _name(document: str) -> str:
    match = re.search(r"\b(?:query|mutation)\s+(\w+)", document)
    return match.group(1) if match else "anonymous"
