"""Benchmark: ingest a synthetic registry of N services (default 100,000) and print seconds and peak memory as JSON.

Target: under 30 s on two cores. Usage: .venv/bin/python scripts/bench_ingest.py [--services N]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

from a2x_local.db import connect
from a2x_local.registry.ingest import ingest
from a2x_local.registry.store import Registry

WORDS = (
    "weather forecast flight hotel booking invoice payment stock price news article translate text "
    "image resize video audio transcribe email calendar meeting reminder database query customer "
    "order shipping tracking recipe nutrition fitness map route traffic currency exchange crypto "
    "wallet tax report pdf spreadsheet chart search index file upload storage backup security scan "
    "vulnerability login"
).split()


def synthetic(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    services = []
    for i in range(n):
        words = rng.sample(WORDS, 12)
        services.append({
            "id": f"synthetic/{i:06d}",
            "type": rng.choice(["generic", "mcp_tool", "mcp_server", "a2a", "skill"]),
            "name": "".join(w.title() for w in words[:3]),
            "description": f"{words[0].title()} {' '.join(words[1:])}. Returns the {words[3]} for a {words[4]}.",
            "metadata": {"inputSchema": {w: {"type": "string", "description": f"The {w}."} for w in words[5:8]}},
        })
    return services


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--services", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "synthetic.json"
        source.write_text(json.dumps(synthetic(args.services)), encoding="utf-8")
        db = Path(tmp) / "bench.duckdb"
        started = time.perf_counter()
        with connect(db) as con:
            report = ingest(con, [source])
            first = time.perf_counter() - started
            again_started = time.perf_counter()
            again = ingest(con, [source])
            second = time.perf_counter() - again_started
            fingerprint_started = time.perf_counter()
            Registry(con).fingerprint()
            fingerprint_s = time.perf_counter() - fingerprint_started
            count = Registry(con).count()
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({
            "services": args.services,
            "stored": count,
            "added": len(report.added),
            "ingest_seconds": round(first, 2),
            "reingest_noop_seconds": round(second, 2),
            "reingest_unchanged": len(again.unchanged),
            "fingerprint_seconds": round(fingerprint_s, 3),
            "peak_rss_mb": round(peak_mb, 1),
            "db_mb": round(db.stat().st_size / 2**20, 1),
            "target_seconds": 30,
            "meets_target": first < 30,
        }, indent=2))


if __name__ == "__main__":
    main()
