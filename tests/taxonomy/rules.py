"""Explicit scripted rules for synthetic registries: each service's domain is the prefix of its id."""

from __future__ import annotations

import json
from collections.abc import Sequence

from a2x_local.llm import Request
from a2x_local.testing import categories_json, category_text


def domain_of(service_id: str) -> str:
    return service_id.rsplit("_", 1)[0]


class DomainRule:
    """Designs one category per domain; files each service under its domain's category.

    ``generic`` services match every category, ``unassigned`` ones none; ``refine_change`` names categories whose
    text a refine changes; ``flag`` lists root categories that validation flags (every round).
    """

    def __init__(self, *, generic: Sequence[str] = (), unassigned: Sequence[str] = (),
                 refine_change: Sequence[str] = (), flag: Sequence[str] = (), redesign: Sequence[str] = (),
                 cross: dict[str, str] | None = None) -> None:
        self.generic = set(generic)
        self.unassigned = set(unassigned)
        self.refine_change = set(refine_change)
        self.flag = set(flag)
        self.redesign_names = list(redesign)
        self.cross = dict(cross or {})      # service domain -> name of the other top-level domain it also serves

    def __call__(self, request: Request) -> str:
        c = request.context
        step = c["step"]
        if step == "design":
            domains = sorted({domain_of(s) for s in c["services"]})
            return categories_json(domains[: c["max_children"]])
        if step == "validate":
            return json.dumps({"verdicts": [{"violations": ["catch_all"] if n.lower() in self.flag else []}
                                            for n in c["categories"]]})
        if step == "redesign":
            return categories_json(self.redesign_names)
        if step in ("assign", "assign_one", "assign_new"):
            names = [n.lower() for n in c["categories"]]
            answers = []
            for s in c["services"]:
                if s in self.generic and step != "assign_new":
                    answer = ",".join(str(i) for i in range(1, c["max_labels"] + 1))
                elif s in self.unassigned or domain_of(s) not in names:
                    answer = "NONE"
                else:
                    answer = str(names.index(domain_of(s)) + 1)
                answers.append(answer)
            if step == "assign_one":
                return f"Reasoning: a {domain_of(c['services'][0])} service.\nCategories: {answers[0]}"
            return "\n".join(f"{k}: {answer}" for k, answer in enumerate(answers, start=1))
        if step == "refine":
            names = [n.lower() for n in c["categories"]]
            items = []
            for i, name in enumerate(names, start=1):
                item = {"source": i, **category_text(name), "keywords": [name]}
                if name in self.refine_change:
                    item["description"] = f"Sharper: services about {name} only."
                items.append(item)
            return json.dumps({"dimension": "domain", "categories": items})
        if step == "crossdomain_pick":
            names = list(c["domain_names"])
            lines = []
            for k, s in enumerate(c["services"], start=1):
                target = self.cross.get(domain_of(s))
                lines.append(f"{k}: {names.index(target) + 1}" if target in names else f"{k}: NONE")
            return "\n".join(lines)
        if step == "crossdomain_place":
            return "\n".join(f"{k}: 1 90" for k in range(1, len(c["services"]) + 1))
        raise AssertionError(f"unexpected step {step}")
