"""GitHub's published API contracts, loaded for validating requests and answers in tests.

* REST: the OpenAPI 3.0 description of ``api.github.com`` from the npm package
  ``@octokit/openapi`` (``generated/api.github.com.json``), checked with
  ``openapi-schema-validator`` (``OAS30WriteValidator`` for request bodies,
  ``OAS30ReadValidator`` for answers; ``$ref`` resolved through a ``referencing`` registry).
* GraphQL: GitHub's schema from ``@octokit/graphql-schema`` (``schema.json``, the
  introspection result; its SDL file defines some fields twice, which graphql-core rejects),
  checked with graphql-core's ``validate``.

Both are pinned (:data:`OPENAPI_VERSION`, :data:`GRAPHQL_SCHEMA_VERSION`) and installed by
``.ci/run`` into the cache folder (``$SYMPHONY_CACHE``, default ``~/.cache/symphony-tui``) as
``octokit-openapi-<version>`` and ``octokit-graphql-schema-<version>`` (the account's home
from the password database, whatever ``$HOME`` says);
``$SYMPHONY_GITHUB_OPENAPI`` / ``$SYMPHONY_GITHUB_GRAPHQL_SCHEMA`` name other files.
:func:`missing_contracts` says what is absent. Loading takes a few seconds; both loads are
cached per process.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
from pathlib import Path
from typing import Any

from symphony_tui_testing.openapi_contract import OpenApiContract, Operation

__all__ = ["Operation", "RestContract", "graphql_schema", "rest_contract", "validate_graphql"]

OPENAPI_VERSION = "23.0.2"
GRAPHQL_SCHEMA_VERSION = "15.26.1"


def _cache() -> Path:
    # The account's home from the password database, not $HOME: test suites point $HOME at
    # a scratch folder, the cache stays where .ci/run put it.
    explicit = os.environ.get("SYMPHONY_CACHE")
    if explicit:
        return Path(explicit)
    try:
        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (KeyError, OSError):
        home = Path.home()
    return home / ".cache" / "symphony-tui"


def openapi_path() -> Path:
    """Where the REST description is expected."""
    explicit = os.environ.get("SYMPHONY_GITHUB_OPENAPI")
    if explicit:
        return Path(explicit)
    return (
        _cache()
        / f"octokit-openapi-{OPENAPI_VERSION}"
        / "node_modules/@octokit/openapi/generated/api.github.com.json"
    )


def graphql_schema_path() -> Path:
    """Where the GraphQL schema (introspection JSON) is expected."""
    explicit = os.environ.get("SYMPHONY_GITHUB_GRAPHQL_SCHEMA")
    if explicit:
        return Path(explicit)
    return (
        _cache()
        / f"octokit-graphql-schema-{GRAPHQL_SCHEMA_VERSION}"
        / "node_modules/@octokit/graphql-schema/schema.json"
    )


def missing_contracts() -> list[str]:
    """The contract files that are not there (empty when both are)."""
    return [str(p) for p in (openapi_path(), graphql_schema_path()) if not p.is_file()]


class RestContract(OpenApiContract):
    """GitHub's OpenAPI description: find an operation, validate a request or an answer
    (:class:`~symphony_tui_testing.openapi_contract.OpenApiContract`)."""

    _URI = "https://api.github.com/openapi.json"

    def __init__(self, document: dict[str, Any]) -> None:
        super().__init__(document, uri=self._URI, vendor="GitHub")


@functools.cache
def rest_contract() -> RestContract:
    """The REST contract (loaded once). Raises FileNotFoundError when it is not installed."""
    return RestContract(json.loads(openapi_path().read_bytes()))


@functools.cache
def graphql_schema() -> Any:
    """GitHub's GraphQL schema as a graphql-core ``GraphQLSchema`` (loaded once). Raises
    FileNotFoundError when it is not installed."""
    from graphql import build_client_schema, validate_schema

    data = json.loads(graphql_schema_path().read_bytes())
    schema = build_client_schema(data.get("data", data))
    # GitHub's published schema deprecates some implementations of interface fields that are
    # not deprecated on the interface (PullRequest.databaseId vs Reactable.databaseId), which
    # graphql-core 3.3 refuses. Every other schema rule still holds; documents are validated
    # against the schema as it is either way.
    problems = [e for e in validate_schema(schema) if "must not be deprecated" not in e.message]
    if problems:
        raise TypeError("; ".join(e.message for e in problems[:3]))
    schema._validation_errors = []  # graphql-core caches the check here; the rule above aside
    return schema


def validate_graphql(document: str) -> list[str]:
    """Problems of one GraphQL document against GitHub's schema (empty when valid)."""
    from graphql import GraphQLError, parse, validate

    try:
        parsed = parse(document)
    except GraphQLError as exc:
        return [f"GraphQL syntax: {exc.message}"]
    return [e.message for e in validate(graphql_schema(), parsed)]
