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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class Operation:
    """One REST operation: ``template`` (``/repos/{owner}/{repo}/issues``), ``method`` and
    its OpenAPI operation object."""

    template: str
    method: str
    spec: dict[str, Any]
    path_values: dict[str, str]


class RestContract:
    """GitHub's OpenAPI description: find an operation, validate a request or an answer.
    Every ``validate_*`` returns a list of one-line problems (empty when valid)."""

    _URI = "https://api.github.com/openapi.json"

    def __init__(self, document: dict[str, Any]) -> None:
        from openapi_schema_validator import OAS30ReadValidator, OAS30WriteValidator
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT4

        self.document = document
        self._registry = Registry().with_resource(
            self._URI, Resource(contents=document, specification=DRAFT4)
        )
        self._read, self._write = OAS30ReadValidator, OAS30WriteValidator
        self._routes: list[tuple[int, re.Pattern[str], str]] = []
        for template in document["paths"]:
            literal = sum(1 for s in template.split("/") if s and "{" not in s)
            pattern = re.sub(r"\\{[^}]+\\}", "([^/]+)", re.escape(template))
            self._routes.append((literal, re.compile(f"^{pattern}$"), template))
        self._routes.sort(key=lambda r: -r[0])

    def operation(self, method: str, path: str) -> Operation | None:
        """The operation ``method`` ``path`` (a concrete path, no query) is, or None."""
        for _, pattern, template in self._routes:
            match = pattern.match(path)
            if match:
                spec = self.document["paths"][template].get(method.lower())
                if spec is not None:
                    names = re.findall(r"\{([^}]+)\}", template)
                    return Operation(
                        template,
                        method.upper(),
                        spec,
                        dict(zip(names, match.groups(), strict=True)),
                    )
        return None

    def validate_request(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, has_body: bool
    ) -> list[str]:
        """Problems of one request: unknown operation, unknown, missing or ill-typed
        parameters, a body where none is taken, a body that does not match its schema."""
        op = self.operation(method, path)
        where = f"{method.upper()} {path}"
        if op is None:
            return [f"{where}: no such operation in GitHub's OpenAPI description"]
        base = f"/paths/{_escape(op.template)}/{method.lower()}"
        problems: list[str] = []
        known: dict[str, tuple[dict[str, Any], str]] = {}
        for i, _ in enumerate(op.spec.get("parameters", [])):
            pointer = self._follow(f"{base}/parameters/{i}")
            param = self._at(pointer)
            if param.get("in") == "query":
                known[param["name"]] = (param, pointer + "/schema")
            elif param.get("in") == "path" and param.get("name") in op.path_values:
                value = _coerce(op.path_values[param["name"]], param.get("schema", {}))
                problems += self._check(
                    self._write, value, pointer + "/schema", f"{where}: path {param['name']}"
                )
        for name, values in query.items():
            if name not in known:
                problems.append(f"{where}: unknown query parameter {name!r}")
                continue
            param, schema = known[name]
            for value in values:
                coerced = _coerce(value, param.get("schema", {}))
                problems += self._check(self._write, coerced, schema, f"{where}: query {name}")
        for name, (param, _) in known.items():
            if param.get("required") and name not in query:
                problems.append(f"{where}: missing required query parameter {name!r}")
        schema = None
        if "requestBody" in op.spec:
            pointer = self._follow(f"{base}/requestBody")
            request_body = self._at(pointer)
            if "application/json" in (request_body.get("content") or {}):
                schema = pointer + "/content/application~1json/schema"
        if has_body and schema is None:
            problems.append(f"{where}: takes no JSON body")
        elif schema is not None and has_body:
            problems += self._check(self._write, body, schema, f"{where}: body")
        elif schema is not None and self._at(self._follow(f"{base}/requestBody")).get("required"):
            problems.append(f"{where}: a JSON body is required")
        return problems

    def validate_response(self, method: str, path: str, status: int, body: Any) -> list[str]:
        """Problems of one answer: a status the operation does not list, or a JSON body that
        does not match the listed schema."""
        op = self.operation(method, path)
        where = f"{method.upper()} {path} -> {status}"
        if op is None:
            return [f"{where}: no such operation"]
        responses = op.spec.get("responses", {})
        key = str(status) if str(status) in responses else "default"
        if key not in responses:
            return [f"{where}: status not in the operation's responses ({', '.join(responses)})"]
        pointer = self._follow(f"/paths/{_escape(op.template)}/{method.lower()}/responses/{key}")
        if "application/json" not in (self._at(pointer).get("content") or {}):
            return []
        schema = pointer + "/content/application~1json/schema"
        return self._check(self._read, body, schema, f"{where}: body")

    def _check(self, cls: Any, instance: Any, pointer: str, where: str) -> list[str]:
        validator = cls({"$ref": f"{self._URI}#{pointer}"}, registry=self._registry)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        return [
            f"{where}: {'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:200]}"
            for e in errors[:5]
        ]

    def _at(self, pointer: str) -> Any:
        target: Any = self.document
        for part in pointer.lstrip("/").split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target[int(part)] if isinstance(target, list) else target[part]
        return target

    def _follow(self, pointer: str) -> str:
        """``pointer`` with every ``$ref`` at its end followed (a pointer into the document)."""
        node = self._at(pointer)
        while isinstance(node, dict) and "$ref" in node:
            pointer = node["$ref"].lstrip("#")
            node = self._at(pointer)
        return pointer


def _escape(template: str) -> str:
    return template.replace("~", "~0").replace("/", "~1")


def _coerce(value: str, schema: dict[str, Any]) -> Any:
    """A query string value as the JSON type its schema names (integer, boolean)."""
    kind = schema.get("type")
    if kind == "integer" and re.fullmatch(r"-?\d+", value):
        return int(value)
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    return value


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
