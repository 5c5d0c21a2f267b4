"""Every input format, read from real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.registry.formats import detect_file, read_path
from tests.support.paths import DATA, SAMPLE
from tests.support.paths import REGISTRY_FIXTURES as FIXTURES


def services_of(path: Path, fmt: str = "auto", **kwargs):
    return [s for _, _, group in read_path(path, fmt, **kwargs) for s in group]


@pytest.mark.parametrize(("relative", "expected"), [
    ("toolret/services.json", 1839), ("publicmcp/services.json", 1387), ("a2a/agents.json", 21),
])
def test_a2x_service_lists(relative: str, expected: int) -> None:
    services = services_of(DATA / relative)
    assert len(services) == expected
    raw = json.loads((DATA / relative).read_text())
    assert [s.id for s in services] == [entry["id"] for entry in raw]
    assert services[0].metadata == raw[0]["metadata"]


def test_skills_folder_gives_one_service_per_skill_md() -> None:
    services = services_of(DATA / "skills")
    skill_files = sorted((DATA / "skills").rglob("SKILL.md"))
    assert len(services) == len(skill_files) > 0
    pdf = next(s for s in services if s.id == "skill/pdf")
    assert pdf.type == "skill"
    assert "PDF" in pdf.description
    assert pdf.metadata["path"].endswith("pdf/SKILL.md")
    assert pdf.metadata["body_excerpt"].startswith("# PDF Processing Guide")


def test_server_json_single_document() -> None:
    [service] = services_of(FIXTURES / "weather.server.json")
    assert (service.id, service.type, service.name) == ("io.github.example/weather", "mcp_server", "Weather Forecasts")
    assert service.metadata["packages"][0]["identifier"] == "@example/weather-mcp"


def test_server_json_list_and_registry_listing() -> None:
    services = services_of(FIXTURES / "servers_list.json")
    assert [s.id for s in services] == ["com.acme/invoices", "io.github.octo/git-history"]
    assert services[0].name == "com.acme/invoices"  # no title: the server name stands in
    listing = services_of(SAMPLE / "mcp_servers.json")
    assert len(listing) == len(json.loads((SAMPLE / "mcp_servers.json").read_text())["servers"])
    assert all(s.type == "mcp_server" and "_registry_meta" in s.metadata for s in listing)


def test_mcp_tools_list_result_with_server_name_from_file_or_flag() -> None:
    tools = services_of(FIXTURES / "filesystem.tools.json")
    assert [s.id for s in tools] == ["filesystem/read_file", "filesystem/write_file", "filesystem/list_directory"]
    assert tools[0].name == "Read File" and tools[0].type == "mcp_tool"
    assert tools[0].metadata["inputSchema"]["required"] == ["path"]
    assert tools[0].metadata["annotations"] == {"readOnlyHint": True}
    renamed = services_of(FIXTURES / "filesystem.tools.json", server="fs")
    assert renamed[1].id == "fs/write_file"
    from_field = services_of(next((SAMPLE / "mcp_tools").glob("*.json")))
    assert all(s.id.startswith(from_field[0].metadata["server"] + "/") for s in from_field)


def test_a2a_card_v1_and_v03() -> None:
    [v1] = services_of(FIXTURES / "travel_agent_v1.json")
    assert v1.id == "a2a/trip-planner" and v1.type == "a2a"
    assert v1.metadata["card_layout"] == "v1.0"
    assert [e["binding"] for e in v1.metadata["endpoints"]] == ["JSONRPC", "GRPC"]
    assert v1.description.startswith("Plans multi-city trips")
    assert "[Plan a trip] Build a day-by-day itinerary" in v1.description
    assert "[Book a hotel]" in v1.description
    cards = sorted((SAMPLE / "agents").glob("*.json"))
    old = [s for card in cards for s in services_of(card)]
    v03 = [s for s in old if s.metadata["card"].get("url") and "supportedInterfaces" not in s.metadata["card"]]
    assert v03 and all(s.metadata["card_layout"] == "v0.3" for s in v03)
    assert all(s.metadata["endpoints"][0]["url"] == s.metadata["card"]["url"] for s in v03)
    mixed = [s for s in old if "supportedInterfaces" in s.metadata["card"]]
    assert mixed and all(s.metadata["card_layout"] == "v1.0" for s in mixed)


def test_jsonl_and_csv_keep_extra_columns_as_metadata() -> None:
    jsonl = services_of(FIXTURES / "services.jsonl")
    assert [s.id for s in jsonl] == ["crm/lookup", "crm/merge"]
    assert jsonl[0].metadata == {"owner": "sales"}
    assert jsonl[1].metadata == {"danger": True}
    csv = services_of(FIXTURES / "services.csv")
    assert [s.id for s in csv] == ["hr/leave", "hr/payslip"]
    assert csv[0].description == "File a leave request, with dates and type."
    assert csv[0].metadata == {"team": "people", "approval": True}
    assert csv[1].metadata == {"team": "payroll"}


@pytest.mark.parametrize(("path", "expected"), [
    (FIXTURES / "weather.server.json", "mcp-server"), (FIXTURES / "filesystem.tools.json", "mcp-tools"),
    (FIXTURES / "travel_agent_v1.json", "a2a-card"), (FIXTURES / "services.jsonl", "jsonl"),
    (FIXTURES / "services.csv", "csv"), (DATA / "toolret" / "services.json", "a2x"),
    (DATA / "skills" / "pdf" / "SKILL.md", "skills"),
])
def test_auto_detection(path: Path, expected: str) -> None:
    assert detect_file(path) == expected


def test_folder_mixes_formats_and_skips_files_inside_skill_folders(tmp_path: Path) -> None:
    groups = read_path(SAMPLE)
    formats = {fmt for _, fmt, _ in groups}
    assert formats == {"a2x", "mcp-server", "mcp-tools", "a2a-card", "skills"}
    skill = tmp_path / "reports"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: reports\ndescription: Build weekly reports.\n---\nBody\n")
    (skill / "template.json").write_text("{\"not\": \"a service\"}")
    [(_folder, fmt, services)] = read_path(tmp_path)
    assert (fmt, [s.id for s in services]) == ("skills", ["skill/reports"])


def test_a_one_entry_list_missing_its_description_is_refused_for_that_field(tmp_path) -> None:
    """docs/registry.md's example: the field is named, not "cannot tell which service format this is"."""
    from a2x_local.errors import InputError
    from a2x_local.registry.formats import read_path

    path = tmp_path / "tools.json"
    path.write_text('[{"id": "weather/get", "name": "Get weather"}]', encoding="utf-8")
    try:
        read_path(path)
    except InputError as exc:
        assert "field 'description'" in str(exc) and "cannot tell" not in str(exc)
    else:
        raise AssertionError("a list without a description was accepted")
