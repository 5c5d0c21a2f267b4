"""Regenerate the sample registry in data/sample/ from the full copies in data/ (deterministic; see data/README.md).

The sample mixes every input format the demo and the fast tests exercise: an A2X service list of ToolRet tools
(chosen so that a set of real benchmark queries can be answered from it), MCP tools/list files, MCP registry
server.json documents, A2A AgentCards and Agent Skills folders.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "data"
OUT = ROOT / "data" / "sample"
QUERIES = 60          # ToolRet dev queries whose correct tools are all in the sample
EXTRA_TOOLS = 110     # further ToolRet tools, as distractors
MCP_TOOL_SERVERS = 3  # ToolRet tool families turned into MCP tools/list files
TOOLS_PER_SERVER = 10
MCP_SERVERS = 90
SKILLS = 8
# The small sample, sized for a real model on two CPU cores (scripts/demo, the real-model test): the first SMALL_QUERIES
# sample queries, their correct tools and SMALL_EXTRA_TOOLS distractors from the sample's other ToolRet tools.
SMALL_OUT = ROOT / "data" / "sample_small"
SMALL_QUERIES = 20
SMALL_EXTRA_TOOLS = 30


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _family(service_id: str) -> str:
    return service_id.split("_tool_")[0] if "_tool_" in service_id else service_id.split("_")[0]


def main() -> None:
    rng = random.Random(20261130)
    services = json.loads((SOURCE / "toolret" / "services.json").read_text())
    by_id = {s["id"]: s for s in services}
    queries = json.loads((SOURCE / "toolret" / "queries_dev.json").read_text())
    rng.shuffle(queries)
    chosen_queries = [q for q in queries if all(t["id"] in by_id for t in q["correct_tools"])][:QUERIES]
    tool_ids = sorted({t["id"] for q in chosen_queries for t in q["correct_tools"]})
    others = sorted(set(by_id) - set(tool_ids))
    tool_ids += rng.sample(others, EXTRA_TOOLS)
    _write(OUT / "toolret_tools.json", [by_id[i] for i in sorted(tool_ids)])
    queries_out = [{"id": q["id"], "query": q["query"].strip(), "correct_tools": q["correct_tools"]}
                   for q in chosen_queries]
    _write(OUT.parent / "sample_queries.json", queries_out)

    families: dict[str, list[dict]] = defaultdict(list)
    for service_id in sorted(set(by_id) - set(tool_ids)):
        families[_family(service_id)].append(by_id[service_id])
    big = sorted((f for f, members in families.items() if len(members) >= TOOLS_PER_SERVER), key=str)
    for family in rng.sample(big, MCP_TOOL_SERVERS):
        tools = []
        for service in rng.sample(families[family], TOOLS_PER_SERVER):
            schema = service.get("metadata", {}).get("inputSchema", {})
            properties = {k: {"type": v.get("type", "string"), "description": v.get("description", "")}
                          for k, v in schema.items() if isinstance(v, dict)}
            required = [k for k, v in schema.items() if isinstance(v, dict) and v.get("required")]
            tools.append({"name": service["name"], "description": service["description"],
                          "inputSchema": {"type": "object", "properties": properties, "required": required}})
        _write(OUT / "mcp_tools" / f"{family}.json", {"server": family, "tools": tools})

    servers = json.loads((SOURCE / "publicmcp" / "services.json").read_text())
    documents = []
    for entry in rng.sample(servers, MCP_SERVERS):
        url = entry.get("metadata", {}).get("url", "")
        match = re.match(r"https://github\.com/([^/]+)/([^/#?]+)", url)
        name = f"io.github.{match.group(1).lower()}/{match.group(2).lower()}" if match else f"local/{entry['name']}"
        document = {"$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
                    "name": name, "title": entry["name"], "description": entry["description"], "version": "1.0.0"}
        if url:
            document["repository"] = {"url": url, "source": "github" if match else "other"}
        documents.append({"server": document, "_meta": {"sample": {"from": entry["id"]}}})
    _write(OUT / "mcp_servers.json", {"servers": documents})

    agents = json.loads((SOURCE / "a2a" / "agents.json").read_text())
    for agent in agents:
        card = agent["metadata"]
        if not card.get("name"):
            continue  # a few entries carry no card at all
        slug = re.sub(r"[^a-z0-9]+", "-", card["name"].lower()).strip("-")
        _write(OUT / "agents" / f"{slug}.json", card)

    skill_dirs = sorted(p for p in (SOURCE / "skills").iterdir() if (p / "SKILL.md").is_file())
    for skill_dir in rng.sample(skill_dirs, SKILLS):
        target = OUT / "skills" / skill_dir.name
        target.mkdir(parents=True, exist_ok=True)
        for name in ("SKILL.md", "LICENSE.txt"):
            if (skill_dir / name).is_file():
                shutil.copyfile(skill_dir / name, target / name)
    small_sample()


def small_sample() -> None:
    """data/sample_small/ from the sample just written (its own seed, so the sample above is unchanged by it)."""
    rng = random.Random(20261202)
    tools = json.loads((OUT / "toolret_tools.json").read_text())
    by_id = {s["id"]: s for s in tools}
    queries = json.loads((OUT.parent / "sample_queries.json").read_text())[:SMALL_QUERIES]
    wanted = sorted({t["id"] for q in queries for t in q["correct_tools"]})
    wanted += rng.sample(sorted(set(by_id) - set(wanted)), SMALL_EXTRA_TOOLS)
    _write(SMALL_OUT / "services.json", [by_id[i] for i in sorted(wanted)])
    _write(SMALL_OUT / "queries.json", queries)


if __name__ == "__main__":
    main()
