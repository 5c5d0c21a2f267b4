"""Where engine start-up chatter goes: a log file in normal CLI use, the terminal with `--verbose` or in a library.

Starting vLLM (or loading a model with transformers) prints a screen of torch and vLLM warnings, some from Python
logging and `warnings`, some from C++ straight to the file descriptors. None of it is for the person who asked for
a search. While an engine starts, file descriptors 1 and 2 point at the log file, so everything lands there
whatever wrote it; afterwards vLLM's own logger keeps writing to that file.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from a2x_local.outfiles import open_append

_log_file: Path | None = None
_announced = False


def send_startup_output_to(path: Path | None) -> None:
    """Route start-up output of engines started from now on to ``path`` (None: leave it on the terminal)."""
    global _log_file, _announced
    _log_file = path
    _announced = False


def startup_log_file() -> Path | None:
    return _log_file


@contextmanager
def engine_startup(label: str) -> Iterator[None]:
    """Around an engine start: output goes to the log file when one is set; its path is printed once."""
    global _announced
    path = _log_file
    if path is None:
        yield
        return
    if not _announced:
        print(f"engine start-up log: {path} (--verbose shows it here)", file=sys.stderr, flush=True)
        _announced = True
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    streams = sys.stdout, sys.stderr
    with open_append(path, what="engine start-up log", buffering=1) as log:
        log.write(f"\n=== starting {label} ===\n")
        log.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        # Python-level writers too, in case sys.stdout/sys.stderr are not the plain descriptors (a test harness).
        sys.stdout = sys.stderr = log
        try:
            yield
        finally:
            log.flush()
            sys.stdout, sys.stderr = streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    _keep_library_logs_in(path)


def _keep_library_logs_in(path: Path) -> None:
    """Point the stream handlers of vLLM's logger at the log file, so later warnings stay out of the terminal."""
    for name in ("vllm",):
        logger = logging.getLogger(name)
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                logger.removeHandler(handler)
                file_handler = logging.FileHandler(path, encoding="utf-8")
                file_handler.setFormatter(handler.formatter)
                file_handler.setLevel(handler.level)
                logger.addHandler(file_handler)
