#!/usr/bin/python3
"""Runs `einsumdb bench db` (record, then best(): the lookup alone and with canonicalization,
the nearest size, symbolic workloads, best_many) several times on a fresh SQLite file each
(the answers timed by a second process on the store the first filled, see run()), and
with --postgres on a fresh database of a PostgreSQL server of its own (initdb in a temporary
directory, 127.0.0.1, stopped and removed at the end); writes each run's JSON, with the command
and machine, to OUT/db-LABEL-sqlite-N.json and OUT/db-LABEL-postgres-N.json.
bench/page_db.py makes docs/performance/db.md from those files.

Usage: db_runs.py [--bin build/bin/einsumdb] [--label after] [--runs 3] [--postgres]
                   [--also LABEL=BINARY ...] [--out docs/performance/data]
                   [--workloads 100000] [--measurements 1000000]

With --also, each round runs the other builds too, in turn with this one, so that every build
meets the machine in the same moods (compare builds this way, not in runs apart).
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
        lib = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "lib.sh"
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


def bench(binary, db, args, extra=()):
    command = [binary, "bench", "db", "--workloads", str(args.workloads), "--measurements",
               str(args.measurements), "--db", db, *extra]
    r = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"db_runs.py: {' '.join(command)} failed ({r.returncode}):\n{r.stderr}")
    shown = [c if not c.startswith("postgresql://") else "postgresql://einsum@127.0.0.1/DB"
             for c in command]
    return json.loads(r.stdout), " ".join(shown)


def run(binary, label, db, args):
    """One run: a process fills the store, times recording and then the answers (`bench db`
    alone, the benchmark as one command); unless --same-process, a second process opens the
    store the first left and times the answers again, as an application opens a store a tuner
    filled. The filling process's answers are kept under "filling"."""
    result, command = bench(binary, db, args)
    if not args.same_process:
        filling = {k: v for k, v in result.items()
                   if k.endswith("_us") or k.startswith("best_many")}
        answers, reuse = bench(binary, db, args, ["--reuse"])
        result.update(answers)
        result["filling"] = filling
        command += " ; " + reuse
    return {"command": command, "machine": cpu_model(), "cores": os.cpu_count(),
            "label": label, "result": result}


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
    p.add_argument("--same-process", action="store_true",
                   help="time the answers in the process that filled the store")
    p.add_argument("--also", action="append", default=[], metavar="LABEL=BINARY",
                   help="another build, run in turn with this one in every round")
    args = p.parse_args()
    builds = [(args.label, args.bin)]
    for item in args.also:
        label, sep, binary = item.partition("=")
        if not sep or not label or not binary:
            raise SystemExit(f"db_runs.py: --also wants LABEL=BINARY, not '{item}'")
        builds.append((label, binary))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = Server() if args.postgres else None
    try:
        for n in range(1, args.runs + 1):
            for label, binary in builds:
                if args.sqlite:
                    with tempfile.TemporaryDirectory(prefix="einsumdb-bench-db-") as tmp:
                        data = run(binary, label, str(pathlib.Path(tmp) / "store.sqlite"), args)
                    path = out / f"db-{label}-sqlite-{n}.json"
                    path.write_text(json.dumps(data, indent=1) + "\n")
                    print(path, "best median", data["result"]["best_median_us"], "us", flush=True)
                if server:
                    data = run(binary, label, server.createdb(f"bench_{label}_{n}"), args)
                    path = out / f"db-{label}-postgres-{n}.json"
                    path.write_text(json.dumps(data, indent=1) + "\n")
                    print(path, "best median", data["result"]["best_median_us"], "us", flush=True)
    finally:
        if server:
            server.close()


if __name__ == "__main__":
    main()
