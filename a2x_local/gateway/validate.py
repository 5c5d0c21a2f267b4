"""A call's arguments checked against the tool's `inputSchema` (the `jsonschema` library) before anything is sent.

The validator class is the one the schema's `$schema` names (Draft 2020-12 when it names none, as MCP specifies).
References are resolved within the schema only: the library fetches nothing, so a `$ref` to a URL fails the check
instead of reaching the network. Validators are kept per schema, since agents call the same tools again and again.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from a2x_local.gateway.errors import GatewayError

MAX_LISTED = 5


@lru_cache(maxsize=512)
def _validator(schema_text: str) -> Any:
    import jsonschema

    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def check_arguments(server: str, tool: str, schema: Any, arguments: Any) -> None:
    """Refuse arguments that break the schema, naming each problem's place (at most a few); a schema that is not
    JSON Schema is the server's fault, said as such."""
    import jsonschema
    from referencing.exceptions import Unresolvable

    if not isinstance(arguments, dict):
        raise GatewayError(f"arguments for tool '{tool}' of server '{server}' must be a JSON object, got "
                           f"{type(arguments).__name__}", code="BadArguments", status=400, outcome="invalid",
                           hint="send the arguments as an object whose keys are the inputSchema's properties")
    if not isinstance(schema, dict):
        schema = {"type": "object"}
    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except (jsonschema.SchemaError, ValueError, TypeError) as exc:
        raise GatewayError(f"tool '{tool}' of server '{server}' has an inputSchema that is not valid JSON Schema "
                           f"({str(exc).splitlines()[0][:200]}); its calls cannot be checked", code="BadSchema",
                           status=502, outcome="invalid",
                           hint="fix the server's tool definition, then run `a2x-local gateway check`") from exc
    try:
        problems = sorted(validator.iter_errors(arguments), key=lambda error: list(error.absolute_path))
    except Unresolvable as exc:   # a $ref outside the schema: never fetched
        raise GatewayError(f"tool '{tool}' of server '{server}': its inputSchema refers outside itself ({exc})"
                           "; nothing is fetched", code="BadSchema", status=502, outcome="invalid",
                           hint="the server's schema must be self-contained") from exc
    if problems:
        listed = "; ".join(f"{_place(error)}: {error.message[:160]}" for error in problems[:MAX_LISTED])
        more = f" (and {len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        raise GatewayError(f"arguments for tool '{tool}' of server '{server}' break its inputSchema: {listed}{more}",
                           code="BadArguments", status=400, outcome="invalid",
                           hint="get_service shows the tool's inputSchema; nothing was sent to the server")


def _place(error: Any) -> str:
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
    return f"arguments{path}" if path else "arguments"
