"""The gateway file: validated whole, every problem naming the file, the server or profile and the field; and the
connections a server.json's packages and remotes make (only for a server the file lists with registry = true)."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2x_local.gateway import GatewayError, GatewayFileError, load_gateway_file, resolve_servers
from a2x_local.gateway.connections import HttpTarget, StdioTarget, child_environment, read_secret
from a2x_local.gateway.spec import Secret
from a2x_local.registry import Service


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_valid_file_gives_its_servers_and_profiles(tmp_path):
    file = load_gateway_file(write(tmp_path, """
[servers.clock]
command = "/usr/bin/mcp-server-time"
args = ["--local-timezone", "UTC"]
env = ["TZ"]

[servers.notes]
url = "http://127.0.0.1:9100/mcp"
headers = { Authorization = { env = "NOTES_TOKEN", prefix = "Bearer " } }

[profiles.ops]
tokens = [{ sha256 = "%s" }]
call = ["clock/*"]
deny = ["clock/convert_time"]
""" % ("ab" * 32)))
    entries, problems = resolve_servers(file, {})
    assert problems == {}
    assert entries["clock"].target == StdioTarget("/usr/bin/mcp-server-time", ("--local-timezone", "UTC"), ("TZ",))
    notes = entries["notes"].target
    assert isinstance(notes, HttpTarget) and notes.url == "http://127.0.0.1:9100/mcp"
    assert notes.headers[0][0] == "Authorization" and notes.headers[0][1].env == "NOTES_TOKEN"
    assert file.profiles["ops"].call == ["clock/*"] and file.profiles["ops"].see == ["*"]


@pytest.mark.parametrize(("text", "says"), [
    ('[servers.clock]\nargs = ["x"]\n', "servers.clock: say how to reach it"),
    ('[servers.clock]\ncommand = "x"\nurl = "http://h/mcp"\n', "servers.clock: give either command"),
    ('[servers.clock]\ncommand = "x"\nshell = true\n', "servers.clock: field 'shell': is not a gateway file field"),
    ('[servers.clock]\ncommand = "x"\nenv = ["NOT-A NAME"]\n', "servers.clock: field 'env.0'"),
    ('[servers.web]\nurl = "ftp://host/mcp"\n', "servers.web: field 'url'"),
    ('[servers.web]\nurl = "http://h/mcp"\nheaders = { X = { env = "A", file = "/f" } }\n',
     "servers.web: field 'headers.X': give exactly one of"),
    ('[profiles.default]\ntokens = [{ env = "T" }]\n', "field 'profiles': profile 'default' is for clients without"),
    ('[profiles.ops]\ncall = "clock/*"\n', "profiles.ops: field 'call'"),
    ('[servers.clock\ncommand = "x"\n', "not valid TOML"),
])
def test_problems_name_the_file_the_entry_and_the_field(tmp_path, text, says):
    path = write(tmp_path, text)
    with pytest.raises(GatewayFileError) as refused:
        load_gateway_file(path)
    assert str(path) in refused.value.message and says in refused.value.message, refused.value.message
    assert refused.value.hint


def test_a_missing_file_is_refused_with_a_hint(tmp_path):
    with pytest.raises(GatewayFileError, match="no gateway file here"):
        load_gateway_file(tmp_path / "nope.toml")


def server_json(**parts) -> Service:
    return Service(id="io.github.example/weather", type="mcp_server", name="Weather", description="Weather.",
                   metadata={"name": "io.github.example/weather", **parts})


def registry_file(tmp_path: Path, extra: str = "") -> Path:
    return write(tmp_path, f'[servers."io.github.example/weather"]\nregistry = true\nenv = ["WEATHER_KEY"]\n{extra}')


@pytest.mark.parametrize(("package", "command", "args"), [
    ({"registryType": "pypi", "identifier": "weather-mcp", "version": "1.2.0"}, "uvx", ("weather-mcp==1.2.0",)),
    ({"registryType": "npm", "identifier": "@example/weather", "version": "2.0.0",
      "packageArguments": [{"type": "named", "name": "--units", "value": "metric"}]},
     "npx", ("-y", "@example/weather@2.0.0", "--units", "metric")),
    ({"registryType": "oci", "identifier": "ghcr.io/example/weather", "version": "3",
      "environmentVariables": [{"name": "WEATHER_KEY", "isSecret": True}, {"name": "UNLISTED"}]},
     "docker", ("run", "--rm", "-i", "-e", "WEATHER_KEY", "ghcr.io/example/weather:3")),
    ({"registryType": "pypi", "identifier": "weather-mcp", "runtimeHint": "/opt/bin/uvx",
      "runtimeArguments": [{"type": "named", "name": "--offline"}]}, "/opt/bin/uvx", ("--offline", "weather-mcp")),
])
def test_server_json_packages_become_commands_without_a_shell(tmp_path, package, command, args):
    file = load_gateway_file(registry_file(tmp_path))
    entries, problems = resolve_servers(file, {"io.github.example/weather": server_json(packages=[package])})
    assert problems == {}
    target = entries["io.github.example/weather"].target
    assert isinstance(target, StdioTarget) and (target.command, target.args) == (command, args)
    assert target.env == ("WEATHER_KEY",)    # only what the gateway file allows, never UNLISTED
    assert entries["io.github.example/weather"].origin == "server.json packages[0]"


def test_a_remote_is_reached_over_streamable_http_with_the_files_headers(tmp_path):
    file = load_gateway_file(registry_file(tmp_path, 'headers = { Authorization = { env = "WK", prefix = "Bearer " } }'
                                                     '\nremote = 1\n'))
    remotes = [{"type": "sse", "url": "https://old.example/sse"},
               {"type": "streamable-http", "url": "https://weather.example/mcp"}]
    entries, _ = resolve_servers(file, {"io.github.example/weather": server_json(remotes=remotes)})
    target = entries["io.github.example/weather"].target
    assert isinstance(target, HttpTarget) and target.url == "https://weather.example/mcp"
    assert target.headers[0][0] == "Authorization"


@pytest.mark.parametrize(("service", "says"), [
    (None, "holds no MCP server (server.json) with that id"),
    (server_json(), "has no packages[0]"),
    (server_json(packages=[{"registryType": "nuget", "identifier": "Weather"}]), "cannot be started here"),
    (server_json(remotes=[{"type": "sse", "url": "https://x/sse"}]), "the gateway speaks streamable HTTP"),
    (server_json(packages=[{"registryType": "pypi", "identifier": "w", "transport": {"type": "sse"}}]),
     "not stdio"),
])
def test_a_server_json_that_gives_no_usable_connection_is_a_problem_naming_the_server(tmp_path, service, says):
    file = load_gateway_file(registry_file(tmp_path))
    entries, problems = resolve_servers(file, {} if service is None else {service.id: service})
    assert entries == {}
    problem = problems["io.github.example/weather"]
    assert "server 'io.github.example/weather'" in problem.message and says in problem.message
    assert problem.code == "NoConnection" and problem.hint


def test_secrets_come_from_the_environment_or_a_file_and_only_named_variables_reach_a_server(tmp_path,
                                                                                            monkeypatch):
    monkeypatch.setenv("NOTES_TOKEN", "t0k")
    monkeypatch.setenv("UNNAMED", "leak")
    assert read_secret(Secret(env="NOTES_TOKEN", prefix="Bearer "), "h") == "Bearer t0k"
    secret_file = tmp_path / "token"
    secret_file.write_text("from-file\n", encoding="utf-8")
    assert read_secret(Secret(file=str(secret_file)), "h") == "from-file"
    with pytest.raises(GatewayError, match="header X: the environment variable MISSING_ONE is not set"):
        read_secret(Secret(env="MISSING_ONE"), "header X")
    with pytest.raises(GatewayError, match=r"cannot read|not found"):
        read_secret(Secret(file=str(tmp_path / "absent")), "header X")
    target = StdioTarget("x", env=("NOTES_TOKEN", "NOT_SET_ANYWHERE"))
    assert child_environment(target) == {"NOTES_TOKEN": "t0k"}
