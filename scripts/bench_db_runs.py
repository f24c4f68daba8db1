#!/usr/bin/python3
"""Runs `einsumdb bench db` (record, then best(): the lookup alone and with canonicalization,
the nearest size, symbolic workloads, best_many) several times on a fresh SQLite file each, and
with --postgres on a fresh database of a PostgreSQL server of its own (initdb in a temporary
directory, 127.0.0.1, stopped and removed at the end); writes each run's JSON, with the command
and machine, to OUT/db-LABEL-sqlite-N.json and OUT/db-LABEL-postgres-N.json.
scripts/perf_page_db.py makes docs/performance/db.md from those files.

Usage: bench_db_runs.py [--bin build/bin/einsumdb] [--label after] [--runs 3] [--postgres]
                   [--out docs/performance/data] [--workloads 100000] [--measurements 1000000]
"""
import argparse
import json
import os
import pathlib
import platform
import shutil
import socket
import subprocess
import tempfile


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


class Server:
    """A PostgreSQL cluster of its own, started and stopped by scripts/lib.sh (trust
    authentication on 127.0.0.1, a socket in its directory)."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="einsumdb-bench-pg-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.lib("start_postgres")

    def lib(self, function):
        lib = pathlib.Path(__file__).resolve().parent / "lib.sh"
        subprocess.run(["bash", "-c", f'source "{lib}" && {function} "$0" "$1"', self.root,
                        str(self.port)], check=True, timeout=120)

    def createdb(self, name):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", self.uri("postgres"), "-c",
                        f"CREATE DATABASE {name}"], check=True, capture_output=True, timeout=60)
        return self.uri(name)

    def uri(self, db):
        return f"postgresql://einsum@127.0.0.1:{self.port}/{db}"

    def close(self):
        self.lib("stop_postgres")
        shutil.rmtree(self.root, ignore_errors=True)


def run(binary, db, args):
    command = [binary, "bench", "db", "--workloads", str(args.workloads), "--measurements",
               str(args.measurements)]
    if db:
        command += ["--db", db]
    r = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"bench_db_runs.py: {' '.join(command)} failed ({r.returncode}):\n{r.stderr}")
    result = json.loads(r.stdout)
    shown = [c if not c.startswith("postgresql://") else "postgresql://einsum@127.0.0.1/DB"
             for c in command]
    return {"command": " ".join(shown), "machine": cpu_model(), "cores": os.cpu_count(),
            "label": args.label, "result": result}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default="build/bin/einsumdb")
    p.add_argument("--label", default="after")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--postgres", action="store_true")
    p.add_argument("--sqlite", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--out", default="docs/performance/data")
    p.add_argument("--workloads", type=int, default=100000)
    p.add_argument("--measurements", type=int, default=1000000)
    args = p.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = Server() if args.postgres else None
    try:
        for n in range(1, args.runs + 1):
            if args.sqlite:
                data = run(args.bin, None, args)
                path = out / f"db-{args.label}-sqlite-{n}.json"
                path.write_text(json.dumps(data, indent=1) + "\n")
                print(path, "best median", data["result"]["best_median_us"], "us")
            if server:
                data = run(args.bin, server.createdb(f"bench_{args.label}_{n}"), args)
                path = out / f"db-{args.label}-postgres-{n}.json"
                path.write_text(json.dumps(data, indent=1) + "\n")
                print(path, "best median", data["result"]["best_median_us"], "us")
    finally:
        if server:
            server.close()


if __name__ == "__main__":
    main()
