"""deploy/: the systemd units and the cron line run `a2x-local nightly` with flags the command accepts."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

import typer

from a2x_local.cli import app
from a2x_local.lifecycle import EXIT_CODES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NIGHTLY = typer.main.get_command(app).commands["nightly"]


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str
    parser.read(DEPLOY / name, encoding="utf-8")
    return parser


def environment() -> dict[str, str]:
    lines = (DEPLOY / "nightly.env.example").read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def check_nightly_command(argv: list[str]) -> None:
    assert Path(argv[0]).name == "a2x-local" and argv[1] == "nightly", argv
    context = NIGHTLY.make_context("nightly", argv[2:])          # unknown flags or bad values raise here
    assert context.params["source"] and context.params["queries"] is not None


def test_the_service_runs_the_nightly_job_with_the_settings_file():
    service = unit("a2x-local-nightly.service")["Service"]
    assert service["Type"] == "oneshot" and service["EnvironmentFile"] == "/etc/a2x-local/nightly.env"
    env = environment()
    command = service["ExecStart"]
    for key, value in env.items():
        command = command.replace("${" + key + "}", value)
    assert "${" not in command, f"a variable the settings file does not set: {command}"
    check_nightly_command(shlex.split(command))
    assert {int(code) for code in service["SuccessExitStatus"].split()} == {4} and 4 in EXIT_CODES
    assert env["A2X_HOME"] in service["ReadWritePaths"]


def test_the_timer_starts_the_service_every_night():
    timer = unit("a2x-local-nightly.timer")
    assert timer["Timer"]["OnCalendar"] and timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"


def test_the_cron_line_runs_the_same_job():
    lines = [line for line in (DEPLOY / "a2x-local-nightly.cron").read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#") and "=" not in line.split()[0]]
    assert len(lines) == 1
    fields = lines[0].split(None, 6)
    assert fields[5] == "a2x", "an /etc/cron.d line names its user"
    check_nightly_command(shlex.split(fields[6].split(">>")[0]))
