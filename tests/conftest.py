"""Process-wide test settings; the shared fixtures live in `tests/support/fixtures.py` (loaded below).

`scripts/test` runs the suite on parallel workers (pytest-xdist, `--dist loadgroup`), scheduled by
`tests/support/scheduling.py`: the tests of the session vLLM engine all on one worker (one engine, ~3 GB), every
other module a unit of its own.

`VLLM_CPU_OMP_THREADS_BIND=nobind`: vLLM otherwise pins its OpenMP threads (here: the pytest process's) to cores,
and pinned threads that share 2 cores with a server test's subprocess ran 5-10x slower.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.support.scheduling import EngineGroupScheduling, check_engine_files

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                     "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING",
                     "VLLM_CPU_OMP_THREADS_BIND": "nobind"}.items():
    os.environ.setdefault(_key, _value)

# On parallel workers each process computes on one thread: two workers that each spin two OpenMP threads on two
# cores (torch, vLLM) only wait for each other.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Human output is laid out for the terminal: rich reads COLUMNS, else the size of the terminal on stdin. Every test
# sees 80 columns (what CI, with no terminal, gets), whatever terminal the suite is started from; a test that reads
# data from a command reads its --json, never a table whose wrapping depends on the length of a path.
os.environ["COLUMNS"] = "80"

# Every temporary file of a session (pytest's tmp_path folders, vLLM's sockets, torch's compile cache, a Ray session,
# what the programs under test make) goes into one scratch folder, removed by the session that made it when it ends:
# the suite leaves nothing in the temporary folder. Its workers and the child sessions some tests start inherit it
# (A2X_TEST_SCRATCH, TMPDIR) and leave its removal to its maker.
SCRATCH_VARIABLE = "A2X_TEST_SCRATCH"
_OWNS_SCRATCH = SCRATCH_VARIABLE not in os.environ
if _OWNS_SCRATCH:
    os.environ[SCRATCH_VARIABLE] = tempfile.mkdtemp(prefix="a2x-")
SCRATCH = os.environ[SCRATCH_VARIABLE]
os.environ["TMPDIR"] = tempfile.tempdir = SCRATCH

# No test may read or write the user's real registry or configuration: every default path points into a
# throw-away home (tests that need their own set A2X_HOME / A2X_DB themselves, or use the `home` fixture).
_HOME = tempfile.mkdtemp(prefix="a2x-test-home-")
os.environ["A2X_HOME"] = _HOME
for _key in ("A2X_DB", "A2X_CONFIG", "A2X_MODELS_DIR"):
    os.environ.pop(_key, None)

pytest_plugins = ["tests.support.fixtures", "tests.support.real_model"]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The throw-away home goes with the session (each xdist worker, and the controller, made its own)."""
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """pytest's folders go straight into the scratch folder, with short names: a Unix socket's path has room for
    107 bytes, and ``/tmp/a2x-…/pytest-of-root/pytest-0/popen-gw0/test_…0/…`` left too little for the ones tests
    bind. (xdist's workers are handed a folder inside this one.)"""
    if config.option.basetemp is None:
        config.option.basetemp = tempfile.mkdtemp(prefix="t", dir=SCRATCH)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The scratch folder goes last, after every worker has stopped, with whatever the tests left in it."""
    if _OWNS_SCRATCH:
        shutil.rmtree(SCRATCH, ignore_errors=True)


# The integration stage (marker `integration`): whole programs run as a user runs them (a real engine, a browser,
# `install.sh`, servers and their clients, the docs' commands as written, probe rounds through the CLI). They are
# most of the suite's time, so `scripts/test` runs the rest (the main suite, under 4 minutes on CI's 2 cores) and
# `.ci/run` runs this stage right after it (`scripts/test -m "integration and not slow"`). Listed here, by file, so
# that one place says what the main suite leaves out; every `engine` test belongs to the stage too.
INTEGRATION_FILES = frozenset({
    "tests/compose/test_cli.py", "tests/compose/test_references.py",
    "tests/delivery/test_bundle_build.py", "tests/delivery/test_install_sh.py",
    "tests/gateway/test_calls.py",
    "tests/serve/test_degraded.py", "tests/serve/test_gateway.py", "tests/serve/test_gateway_reload.py",
    "tests/serve/test_guard.py", "tests/serve/test_hot_switch.py", "tests/serve/test_http_api.py",
    "tests/serve/test_http_exit.py", "tests/serve/test_loading.py", "tests/serve/test_page.py",
    "tests/serve/test_page_hostile.py", "tests/serve/test_quiet_logs.py", "tests/serve/test_start_methods.py",
    "tests/taxonomy/test_build_replicas.py", "tests/taxonomy/test_runner.py",
    "tests/test_db_path.py", "tests/test_docs_examples.py", "tests/test_probes_third_round.py",
    "tests/test_progress_lines.py", "tests/test_terminal_width.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    check_engine_files(items)
    root = config.rootpath
    for item in items:
        if item.get_closest_marker("engine") or item.path.relative_to(root).as_posix() in INTEGRATION_FILES:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    return EngineGroupScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None
