"""A vendor's published OpenAPI (3.0) or Swagger (2.0) description, for checking requests and
answers in tests: the fakes of :mod:`symphony_tui_testing` call :meth:`OpenApiContract.
validate_request` on every request and :meth:`OpenApiContract.validate_response` on every
answer, and record each problem as a one-line violation.

Schemas are checked with ``openapi-schema-validator`` (``OAS30WriteValidator`` for what we
send, ``OAS30ReadValidator`` for what the vendor answers, so ``readOnly`` / ``writeOnly`` hold);
``$ref`` is resolved through a ``referencing`` registry. A Swagger 2.0 document (GitLab's) is
first rewritten in memory into the OpenAPI 3.0 shape: a parameter's ``type`` / ``format`` /
``items`` / ``enum`` become its ``schema``, the ``in: body`` parameter becomes the
``requestBody``, a response's ``schema`` its ``application/json`` content; ``#/definitions/``
references keep working because the definitions stay where they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_SWAGGER_SCHEMA_KEYS = ("type", "format", "items", "enum", "default", "minimum", "maximum")


@dataclass(frozen=True)
class Operation:
    """One REST operation: ``template`` (``/repos/{owner}/{repo}/issues``), ``method``, its
    OpenAPI operation object and the values of its path parameters."""

    template: str
    method: str
    spec: dict[str, Any]
    path_values: dict[str, str]


class OpenApiContract:
    """One vendor's description: find an operation, validate a request or an answer. Every
    ``validate_*`` returns a list of one-line problems (empty when valid).

    ``uri`` names the document in the reference registry; ``vendor`` is said in problems;
    ``prefix`` is a path prefix every template carries that requests are matched without
    (GitLab's ``/api/v4``) or ``""``."""

    def __init__(
        self, document: dict[str, Any], *, uri: str, vendor: str, prefix: str = ""
    ) -> None:
        from openapi_schema_validator import OAS30ReadValidator, OAS30WriteValidator
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT4

        if str(document.get("swagger", "")).startswith("2"):
            document = _from_swagger2(document)
        self.document = document
        self.vendor = vendor
        self._uri = uri
        self._prefix = prefix
        self._registry = Registry().with_resource(
            uri, Resource(contents=document, specification=DRAFT4)
        )
        self._read, self._write = OAS30ReadValidator, OAS30WriteValidator
        self._routes: list[tuple[int, re.Pattern[str], str]] = []
        for template in document["paths"]:
            bare = template.removeprefix(prefix) if prefix else template
            literal = sum(1 for s in bare.split("/") if s and "{" not in s)
            pattern = re.sub(r"\\{[^}]+\\}", "([^/]+)", re.escape(bare))
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
        parameters, a body where none is taken, a body that does not match its schema.
        A query parameter written ``name[]`` (Rails' array form) is matched to ``name``."""
        op = self.operation(method, path)
        where = f"{method.upper()} {path}"
        if op is None:
            return [f"{where}: no such operation in {self.vendor}'s API description"]
        base = f"/paths/{_escape(op.template)}/{method.lower()}"
        problems: list[str] = []
        known: dict[str, tuple[dict[str, Any], str]] = {}
        params = [
            (f"{base}/parameters/{i}", p) for i, p in enumerate(op.spec.get("parameters", []))
        ]
        shared = self.document["paths"][op.template].get("parameters", [])
        params += [
            (f"/paths/{_escape(op.template)}/parameters/{i}", p) for i, p in enumerate(shared)
        ]
        for at, _ in params:
            pointer = self._follow(at)
            param = self._at(pointer)
            if param.get("in") == "query":
                known.setdefault(param["name"], (param, pointer + "/schema"))
            elif param.get("in") == "path" and param.get("name") in op.path_values:
                value = _coerce(op.path_values[param["name"]], param.get("schema", {}))
                problems += self._check(
                    self._write, value, pointer + "/schema", f"{where}: path {param['name']}"
                )
        for raw_name, values in query.items():
            name = raw_name[:-2] if raw_name.endswith("[]") else raw_name
            if name not in known:
                problems.append(f"{where}: unknown query parameter {raw_name!r}")
                continue
            param, schema = known[name]
            declared = param.get("schema", {})
            if declared.get("type") == "array":
                items = [_coerce(v, declared.get("items") or {}) for v in values]
                if not raw_name.endswith("[]") and len(values) == 1 and "," in values[0]:
                    items = [_coerce(v, declared.get("items") or {}) for v in values[0].split(",")]
                problems += self._check(self._write, items, schema, f"{where}: query {name}")
                continue
            for value in values:
                coerced = _coerce(value, declared)
                problems += self._check(self._write, coerced, schema, f"{where}: query {name}")
        for name, (param, _) in known.items():
            if param.get("required") and name not in query and f"{name}[]" not in query:
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
        validator = cls({"$ref": f"{self._uri}#{pointer}"}, registry=self._registry)
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


def subset(document: dict[str, Any], operations: dict[str, list[str]]) -> dict[str, Any]:
    """The part of ``document`` that ``operations`` (template -> methods) need: those
    operations, with every component or definition they reference (transitively), and the
    document's ``info``. How the vendored descriptions under ``testing/data`` were cut."""
    out: dict[str, Any] = {k: v for k, v in document.items() if k not in ("paths", "components")}
    out.pop("definitions", None)
    out["paths"] = {}
    for template, methods in operations.items():
        item = document["paths"][template]
        kept = {m: item[m] for m in methods}
        if "parameters" in item:
            kept["parameters"] = item["parameters"]
        out["paths"][template] = kept
    pending = [out["paths"]]
    seen: set[str] = set()
    while pending:
        node = pending.pop()
        for ref in _refs(node):
            if ref in seen:
                continue
            seen.add(ref)
            parts = ref.lstrip("#/").split("/")
            source: Any = document
            target: Any = out
            for part in parts[:-1]:
                source = source[part]
                target = target.setdefault(part, {})
            target[parts[-1]] = source[parts[-1]]
            pending.append(source[parts[-1]])
    return out


def _refs(node: Any) -> list[str]:
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                found.append(ref)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _from_swagger2(document: dict[str, Any]) -> dict[str, Any]:
    """A Swagger 2.0 document in the OpenAPI 3.0 shape this module checks (see the module
    doc); the input is not changed."""
    out = dict(document)
    paths: dict[str, Any] = {}
    for template, item in document.get("paths", {}).items():
        converted: dict[str, Any] = {}
        for method, op in item.items():
            if method == "parameters":
                converted[method] = [_parameter(p) for p in op if p.get("in") != "body"]
                continue
            new = dict(op)
            params = op.get("parameters", [])
            new["parameters"] = [_parameter(p) for p in params if p.get("in") not in ("body",)]
            forms = [p for p in params if p.get("in") == "formData"]
            body = next((p for p in params if p.get("in") == "body"), None)
            if body is not None:
                new["requestBody"] = {
                    "required": bool(body.get("required")),
                    "content": {"application/json": {"schema": body.get("schema", {})}},
                }
            elif forms:
                new["parameters"] = [p for p in new["parameters"] if p.get("in") != "formData"]
                new["requestBody"] = {
                    "required": any(p.get("required") for p in forms),
                    "content": {"application/json": {"schema": _form_schema(forms)}},
                }
            responses = {}
            for status, answer in (op.get("responses") or {}).items():
                answer = dict(answer)
                if "schema" in answer:
                    answer["content"] = {"application/json": {"schema": answer.pop("schema")}}
                responses[status] = answer
            new["responses"] = responses
            converted[method] = new
        paths[template] = converted
    out["paths"] = paths
    return out


def _parameter(param: dict[str, Any]) -> dict[str, Any]:
    if "schema" in param or "$ref" in param:
        return param
    schema = {k: param[k] for k in _SWAGGER_SCHEMA_KEYS if k in param}
    rest = {k: v for k, v in param.items() if k not in _SWAGGER_SCHEMA_KEYS}
    return {**rest, "schema": schema}


def _form_schema(forms: list[dict[str, Any]]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {p["name"]: _parameter(p)["schema"] for p in forms},
    }
    required = [p["name"] for p in forms if p.get("required")]
    if required:
        schema["required"] = required
    return schema


def _escape(template: str) -> str:
    return template.replace("~", "~0").replace("/", "~1")


def _coerce(value: str, schema: dict[str, Any]) -> Any:
    """A query string value as the JSON type its schema names (integer, boolean)."""
    kind = schema.get("type")
    if kind == "integer" and re.fullmatch(r"-?\d+", value):
        return int(value)
    if kind == "number" and re.fullmatch(r"-?\d+(\.\d+)?", value):
        return float(value)
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    return value
