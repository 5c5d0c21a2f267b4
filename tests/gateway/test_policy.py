"""Profiles bound to tokens: deny by default, deny wins, a token in no profile is refused (never downgraded)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from a2x_local.gateway import GatewayFileError, load_gateway_file
from a2x_local.gateway.policy import Policy


def policy(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    return Policy.from_file(load_gateway_file(path))


def test_without_a_gateway_file_everything_is_seen_and_nothing_called():
    caller = Policy.closed().caller(None)
    assert caller is not None and caller.profile.name == "default" and caller.key == "anonymous"
    assert caller.profile.may_see("clock/get_current_time") and not caller.profile.may_call("clock/get_current_time")


def test_profiles_by_token_see_and_call_by_glob_and_deny_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("OPS_TOKEN", "ops-secret")
    digest = hashlib.sha256(b"reader-secret").hexdigest()
    rules = policy(tmp_path, f"""
[profiles.ops]
tokens = [{{ env = "OPS_TOKEN" }}]
call = ["clock/*", "notes/read"]
deny = ["clock/convert_time"]
descriptions = {{ "clock/get_current_time" = "The time now, anywhere." }}

[profiles.reader]
tokens = [{{ sha256 = "{digest}" }}]
see = ["notes/*"]
""")
    ops = rules.caller("ops-secret")
    assert ops is not None and ops.profile.name == "ops" and ops.key.startswith("token:")
    assert ops.profile.may_call("clock/get_current_time") and ops.profile.may_call("notes/read")
    assert not ops.profile.may_call("notes/write")                         # seen, not callable
    assert not ops.profile.may_see("clock/convert_time") and not ops.profile.may_call("clock/convert_time")
    assert ops.profile.description("clock/get_current_time", "x") == "The time now, anywhere."
    reader = rules.caller("reader-secret")
    assert reader is not None and reader.profile.may_see("notes/read") and not reader.profile.may_see("clock/x")
    assert not reader.profile.may_call("notes/read")
    assert rules.caller("wrong") is None                                  # refused, not the default profile
    assert rules.caller(None).profile.name == "default"


def test_a_token_that_cannot_be_read_or_is_bound_twice_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    with pytest.raises(GatewayFileError, match=r"profiles.ops: field 'tokens.0'.*NO_SUCH_TOKEN is not set"):
        policy(tmp_path, '[profiles.ops]\ntokens = [{ env = "NO_SUCH_TOKEN" }]\n')
    monkeypatch.setenv("SHARED", "same")
    with pytest.raises(GatewayFileError, match="also bound to profile 'a'"):
        policy(tmp_path, '[profiles.a]\ntokens = [{ env = "SHARED" }]\n[profiles.b]\ntokens = [{ env = "SHARED" }]\n')
