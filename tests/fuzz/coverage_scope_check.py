#!/usr/bin/env python3
"""Checks where libFuzzer's coverage instrumentation went in the sanitized tree (CMakeLists.txt,
EINSUMDB_FUZZ): into every object of the libraries the fuzz targets parse with, and into the named
objects of the executor and none of its others, whose strategies this tree's tests time against
bounds. An object is instrumented if it calls the coverage callbacks (__sanitizer_cov_*).

Usage: coverage_scope_check.py LIBRARY.a ... [LIBRARY.a:OBJECT.o,OBJECT.o ...]
  LIBRARY.a               every object instrumented
  LIBRARY.a:OBJECTS       exactly those objects instrumented
(exit 0: as stated; 1: the objects that differ are listed)
"""
import collections
import subprocess
import sys


def instrumented(library):
    """Each object of the archive: whether it calls a coverage callback."""
    out = subprocess.run(["nm", "-A", "-u", library], capture_output=True, text=True,
                         check=True).stdout
    calls = collections.defaultdict(bool)
    for line in out.splitlines():
        # "library.a:object.o:                 U symbol"
        _, obj, rest = line.split(":", 2)
        calls[obj] |= rest.split()[-1].startswith("__sanitizer_cov_")
    return calls


def main(args):
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    wrong = []
    for arg in args:
        library, _, named = arg.partition(":")
        calls = instrumented(library)
        expected = set(named.split(",")) if named else set(calls)
        if not expected <= set(calls):
            wrong += [f"{library}: no object {o}" for o in sorted(expected - set(calls))]
        for obj, calling in sorted(calls.items()):
            if calling != (obj in expected):
                wrong.append(f"{library}: {obj} is {'' if calling else 'not '}instrumented")
    for line in wrong:
        print(line)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
