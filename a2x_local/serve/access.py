"""Who is asking: the caller of the request being answered, and what its profile lets it see.

The guard (HTTP) or the stdio server sets `CALLER` for each request; discovery asks `may_see` before it answers a
service in a search, a listing, a category or a lookup, and `shown` gives a service as the caller's profile
describes it (a profile may override a tool's description). Without a gateway (or in-process) no caller is set and
everything is visible, as before the gateway existed.
"""

from __future__ import annotations

import dataclasses
from contextvars import ContextVar
from typing import Any

from a2x_local.compose import Plan
from a2x_local.gateway import Caller
from a2x_local.registry import Service

CALLER: ContextVar[Caller | None] = ContextVar("a2x_caller", default=None)


def may_see(service_id: str) -> bool:
    caller = CALLER.get()
    return caller is None or caller.profile.may_see(service_id)


def shown(service: Service) -> Service:
    """The service with the caller's description override, if its profile has one."""
    caller = CALLER.get()
    if caller is None or service.id not in caller.profile.descriptions:
        return service
    return dataclasses.replace(service, description=caller.profile.descriptions[service.id])


def visible_plan(plan: Plan) -> Plan:
    """A plan without the services the caller may not see: a hidden choice gives way to its first visible
    alternative (or to none)."""
    caller = CALLER.get()
    if caller is None:
        return plan
    data: dict[str, Any] = plan.model_dump(mode="json")
    for step in data["steps"]:
        candidates = [c for c in ([step["choice"]] if step.get("choice") else []) + step.get("alternatives", [])
                      if may_see(c["id"])]
        step["choice"] = candidates[0] if candidates else None
        step["alternatives"] = candidates[1:]
    data["services"] = [service_id for service_id in data.get("services", []) if may_see(service_id)]
    return Plan.model_validate(data)
