"""`serve` over HTTP stopped by SIGTERM (a service manager's stop) or SIGINT (Ctrl-C) shuts down gracefully and
exits 0 (issue 33): uvicorn re-raised the signal after its shutdown, so the process died of it (status -15)."""

from __future__ import annotations

import signal
import subprocess

import httpx
import pytest

from tests.serve.helpers import ROOT, cli_command, registry_with_trees, server_env
from tests.support.servers import bound_port


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_http_server_with_status_0(db_path, tmp_path, stop) -> None:
    registry_with_trees(db_path)
    home = tmp_path / "home"
    log_path = tmp_path / "server.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(cli_command("serve", "--db", str(db_path), "--port", "0"),
                                   env=server_env(home, preload=["bm25"]), cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{bound_port(process, log_path, 120)}"
        assert httpx.get(f"{url}/v1/services", timeout=60).status_code == 200
        process.send_signal(stop)
        status = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    text = log_path.read_text(encoding="utf-8")
    assert status == 0, text[-3000:]
    assert "Traceback" not in text and "error:" not in text, text[-3000:]
