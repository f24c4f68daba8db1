#!/usr/bin/python3
"""The 48 contractions of the TCCG benchmark (tests/data/tccg.jsonl: C-A-B index strings and the
lengths of a, b, c, ... in order) at full size in double precision, all measured in this run:

  - einsumdb: `einsumdb run SPEC --transform tensor_gemm` (one GEMM over the tensors as they lie,
    BLIS micro-kernels, no transposition pass), the median of --repeat runs, with the given
    thread count;
  - numpy.einsum(optimize=True) with the same number of BLAS threads, as returned (often a
    strided view that skipped the final permutation) and made contiguous
    (np.ascontiguousarray): einsumdb's result is contiguous, like the second;
  - the limits: the DGEMM peak (the faster of OpenBLAS's cblas_dgemm through numpy and
    einsumdb's tensor_gemm on a 3000³ product) and the copy bandwidth (numpy copying 512 MB,
    split over as many threads as the run's --threads, since one thread alone does not reach
    what two can move).
    A case's roofline time is max(flops / peak, (inputs + output bytes) / bandwidth): compute-
    bound cases are judged against the peak, memory-bound ones against the bandwidth;
  - the same product as a plain matrix GEMM: the case's M × K and K × N matrices, contiguous and
    row-major, multiplied by OpenBLAS (numpy.matmul into an output allocated once) and by
    einsumdb's tensor_gemm (ik,kj->ij), the faster of the two. It is what the best of the two
    libraries reaches on the case's shape (its short or skinny dimensions) with no tensor layout
    to handle; "plain GEMM / einsumdb" above 1 means the contraction ran faster than that.

numpy and everything einsumdb runs see the same environment: OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are removed from it (a machine may set them to pin an older OpenBLAS to a safe
kernel; a current one then runs slower than it would), and the OpenBLAS kernel numpy runs is
printed, after numpy's product has been checked against its own loop (np.einsum without BLAS).

With --also LABEL=EINSUMDB (repeatable), another build of einsumdb runs each case too, in the same
round right beside the first, and the table gives its time over the first's: how a change moved
each case, with the machine's drift shared by both sides. The builds take turns going first, round
by round, so that an even number of rounds gives each build the first place as often (on a
virtual machine, the order of two processes may matter). With
--no-numpy, numpy and the plain GEMMs are left out (the limits are still measured). --output FILE
writes every figure of every round as JSON, with the command and the machine.

With --tune CASES, each of those cases is also tuned --rounds times with default options on a
fresh store under /usr/bin/time -v: the wall time, and the peak RSS against the workload's
footprint, with the tune's own account (candidates measured, left out by its time limit, the
winner) in --output's "tunes" (--cases none: the tunes only, or with --batched, the batched
product alone).

With --isa avx2, every library runs its AVX2 kernels, as on a processor without AVX-512:
EINSUMDB_ISA=avx2 (einsumdb's own kernels and BLIS's), LIBXSMM_TARGET=hsw and
OPENBLAS_CORETYPE=Haswell (numpy's OpenBLAS and the peak it measures) are set for every run.

With --dtype c128 (or c64, f32), every tensor, GEMM and numpy array is of that type, and the
peak is that type's GEMM (ZGEMM for c128). A complex multiply-add counts 8 real FLOPs (a real one
2), everywhere a rate is shown. Complex cases keep the lengths of TCCG's double-precision case
but for its longest index, halved (the first of the longest where several are): a complex element
holds two numbers, and the case's tensors stay within about the bytes of the f64 case. With
--transforms A,B, einsumdb runs each case with each strategy and its time is the faster one's
(the table names it): what a tuned store would pick among them. A strategy may carry parameters
after colons, as the tuner's candidates do (ttgt:gemm3m=true: complex GEMMs by the 3M method).
With --real A (or B) beside a complex --dtype, that operand is real, of the dtype's precision (f32
beside c64, f64 beside c128), as in numpy's promotion of a real array times a complex one; numpy
converts it, einsumdb computes such a product in real form without converting it where the
complex operand holds the output's last index (executor/real_form.hpp). Each of its multiply-adds
is 4 real FLOPs (the real number times both parts), counted as such, against the complex GEMM's
peak: its real rate, 8 FLOPs per complex multiply-add.
--batched B,M,N,K adds a batched matrix product bik,bkj->bij as case "bmm" (its plain GEMM: the
B·M × K by K × N product); with --cases none, it is measured alone.

Everything is measured --rounds times (3 by default) and given as min / median / max over the
rounds; the summary is taken on the medians.

Usage: tccg.py EINSUMDB [--threads 1] [--cases 1-48] [--repeat 5] [--rounds 3]
                     [--tune 1,12,33] [--keep-openblas-env] [--also LABEL=EINSUMDB ...]
                     [--no-numpy] [--output FILE] [--dtype f64] [--transforms tensor_gemm]
                     [--batched B,M,N,K] [--isa avx2] [--real A]
"""
import argparse
import ctypes
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

THREADS = "1"
for i, a in enumerate(sys.argv):
    if a == "--threads" and i + 1 < len(sys.argv):
        THREADS = sys.argv[i + 1]
os.environ["OPENBLAS_NUM_THREADS"] = THREADS  # before numpy loads its BLAS
os.environ["OMP_NUM_THREADS"] = THREADS
PINNED = {} if "--keep-openblas-env" in sys.argv else {
    k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
# --isa avx2: every library capped at AVX2, as on a processor without AVX-512 (set before numpy
# loads its BLAS, and inherited by every einsumdb run).
ISA_CAPS = {"avx2": {"EINSUMDB_ISA": "avx2", "LIBXSMM_TARGET": "hsw",
                     "OPENBLAS_CORETYPE": "Haswell"}}
ISA = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--isa"), None)
os.environ.update(ISA_CAPS.get(ISA, {}))

import numpy as np  # noqa: E402

# numpy's type, bytes per element, the GEMM's name, and FLOPs per multiply-add.
DTYPES = {"f64": (np.float64, 8, "DGEMM", 2), "f32": (np.float32, 4, "SGEMM", 2),
          "c128": (np.complex128, 16, "ZGEMM", 8), "c64": (np.complex64, 8, "CGEMM", 8)}
# The real dtype of a complex one's parts (--real).
PARTS = {"c64": "f32", "c128": "f64"}


def rand(shape, dtype):
    """Random numbers in [0, 1) (both parts of a complex number) of `dtype` (a DTYPES key)."""
    t = DTYPES[dtype][0]
    x = np.random.rand(*shape)
    if np.issubdtype(t, np.complexfloating):
        x = x + 1j * np.random.rand(*shape)
    return x.astype(t)


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from page_tccg import spread, table_lines  # noqa: E402


def openblas_kernel():
    """The kernel numpy's OpenBLAS runs (openblas_get_corename), after checking that its product
    agrees with numpy's own loop."""
    x, y = np.random.rand(67, 45), np.random.rand(45, 71)
    if not np.allclose(x @ y, np.einsum("ik,kj->ij", x, y, optimize=False)):
        sys.exit("numpy's OpenBLAS computes a wrong product"
                 + (f" without {', '.join(PINNED)}; rerun with --keep-openblas-env" if PINNED
                    else ""))
    dll = numpy_openblas()
    if dll is None:
        return "unknown"
    dll.openblas_get_corename.restype = ctypes.c_char_p
    return f"{dll.openblas_get_corename().decode()} ({os.path.basename(dll._name)})"


_OPENBLAS = []


def numpy_openblas():
    """The OpenBLAS library numpy has loaded in this process (ctypes), or None."""
    if not _OPENBLAS:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line and "/" in line}
        found = None
        for lib in sorted(libs):
            try:
                dll = ctypes.CDLL(lib)
                dll.openblas_get_corename  # noqa: B018 (an OpenBLAS, not only named so)
                found = dll
                break
            except (OSError, AttributeError):
                continue
        _OPENBLAS.append(found)
    return _OPENBLAS[0]


def quiet_numpy_blas():
    """Stops the worker threads of numpy's OpenBLAS in this process, which OpenBLAS starts again
    on its next threaded call. After a threaded call each idle worker spins for about 0.1 s; an
    einsumdb run started meanwhile on as many threads as there are cores shares one of them with
    the spinner, and runs at about one thread's speed."""
    dll = numpy_openblas()
    if dll is not None and hasattr(dll, "blas_thread_shutdown_"):
        dll.blas_thread_shutdown_()


def contraction(case, einsum, lengths):
    """A case as the tables use it: its einsum, shapes, lengths and matrix shape."""
    ab, cc = einsum.split("->")
    a, b = ab.split(",")

    def size(labels):
        return math.prod(lengths[i] for i in labels)

    return {"case": case, "einsum": einsum,
            "A": [lengths[i] for i in a], "B": [lengths[i] for i in b],
            "C": [lengths[i] for i in cc], "lengths": lengths,
            # the matrix shape: rows, columns and summed elements of the GEMM
            "M": size(i for i in a if i not in b), "N": size(i for i in b if i not in a),
            "K": size(i for i in a if i in b and i not in cc)}


def cases(selection, dtype="f64"):
    out = []
    with open(os.path.join(HERE, "..", "tests", "data", "tccg.jsonl")) as f:
        for line in f:
            c = json.loads(line)
            if c["case"] not in selection:
                continue
            cc, a, b = c["tccg"].split("-")
            lengths = {chr(97 + i): int(n) for i, n in enumerate(c["sizes"].split())}
            if dtype.startswith("c"):  # the complex sizing rule (module docstring)
                longest = max(lengths, key=lambda i: (lengths[i], -ord(i)))
                lengths[longest] //= 2
            out.append(contraction(c["case"], f"{a},{b}->{cc}", lengths))
    return out



def selection(text):
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def copy_bandwidth(threads):
    """Bytes read and written per second, in GB/s, by numpy copying 512 MB of doubles, each of
    `threads` threads copying its own contiguous share (np.copyto releases the GIL while it copies),
    the median of five copies."""
    big = np.random.rand(64 << 20)
    dst = np.empty_like(big)
    ends = [len(big) * i // threads for i in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:
        def copy():
            list(pool.map(lambda i: np.copyto(dst[ends[i]:ends[i + 1]], big[ends[i]:ends[i + 1]]),
                          range(threads)))
        seconds = median_time(copy, 5)
    if not np.array_equal(dst, big):  # the shares must cover the whole array, or the rate lies
        raise SystemExit("tccg.py: the threads' copy left part of the array uncopied")
    return 2 * big.nbytes / seconds / 1e9


def median_time(f, repeat):
    f()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def einsumdb(exe, args):
    quiet_numpy_blas()
    p = subprocess.run([exe] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"einsumdb {' '.join(args)} failed:\n{p.stderr}")
    return json.loads(p.stdout)


def spec_args(c, dtype="f64", real=None):
    """The case's spec for `einsumdb run` and `tune`; `real` (A or B) is of PARTS[dtype]."""
    return [c["einsum"], "--shape", "A=" + "x".join(map(str, c["A"])),
            "--shape", "B=" + "x".join(map(str, c["B"])), "--dtype", dtype] + (
                ["--dtype", f"{real}={PARTS[dtype]}"] if real else [])


def operand_dtypes(dtype, real=None):
    """The dtypes of A and B: `dtype`, but `real` (A or B) of PARTS[dtype]."""
    return tuple(PARTS[dtype] if real == name else dtype for name in "AB")


def machine():
    """The processor's name, family and model, L2 per core, and cores."""
    with open("/proc/cpuinfo") as f:
        info = dict(line.split(":", 1) for line in f if ":" in line)
    info = {k.strip(): v.strip() for k, v in info.items()}
    model = info.get("model name", platform.processor())
    # (Virtual machines name different processors alike: "AMD EPYC" is Zen 4 as family 25, model
    # 17, and Zen 5 as family 26.)
    cpu_id = f"family {info.get('cpu family', '?')}, model {info.get('model', '?')}"
    # The L2 size einsumdb's blocking reads too (sysconf, which glibc answers from CPUID, where a
    # virtual machine's sysfs may have no cache directory); 0 where it is not known.
    p = subprocess.run(["getconf", "LEVEL2_CACHE_SIZE"], capture_output=True, text=True)
    l2 = max(int(p.stdout.strip() or 0), 0) // 1024 if p.returncode == 0 else 0
    return {"cpu": model, "cpu_id": cpu_id, "l2_kib": l2, "cores": os.cpu_count()}


def tune_table(a, exe, spread):
    """Each case of --tune tuned --rounds times with default options on a fresh store: printed,
    and returned per case with every round's figures (for --output)."""
    print("\n| case | tune wall s | peak RSS MiB | footprint MiB | RSS / footprint | "
          "candidates | probed | measured | best |")
    print("|---|---|---|---|---|---|---|---|---|")
    tunes = []
    for c in cases(selection(a.tune), a.dtype):
        footprint = DTYPES[a.dtype][1] * (math.prod(c["A"]) + math.prod(c["B"]) +
                                          math.prod(c["C"])) / (1 << 20)
        rounds = []
        for _ in range(a.rounds):
            with tempfile.TemporaryDirectory() as d:
                quiet_numpy_blas()
                t0 = time.perf_counter()
                p = subprocess.run(["/usr/bin/time", "-v", exe, "tune"] + spec_args(c, a.dtype, a.real) +
                                   ["--db", os.path.join(d, "tune.db"), "--json",
                                    "--no-progress"], capture_output=True, text=True)
                wall = time.perf_counter() - t0
            if p.returncode != 0:
                sys.exit(f"tune of case {c['case']} failed:\n{p.stderr}")
            rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)",
                                p.stderr).group(1)) / 1024
            j = json.loads(p.stdout)
            ok = [r for r in j["results"] if r["status"] == "ok"]
            best = min(ok, key=lambda r: r["median_s"]) if ok else {}
            rounds.append({"wall_s": wall, "rss_mib": rss, "candidates": j["candidates"],
                           "probed": j["probed"], "measured": j["measured"],
                           "not_measured": j["not_measured"],
                           "time_limit_reached": j["time_limit_reached"],
                           "best": {k: best.get(k) for k in ("strategy", "params", "median_s")},
                           "standalone": j.get("standalone")})
        walls = [r["wall_s"] for r in rounds]
        ratios = [r["rss_mib"] / footprint for r in rounds]
        last = rounds[-1]
        print(f"| {c['case']} | {spread(walls, '{:.1f}')} | {last['rss_mib']:.0f} (last) | "
              f"{footprint:.0f} | {spread(ratios)} | {last['candidates']} | {last['probed']} | "
              f"{last['measured']} (last; {last['not_measured']} left out by the time limit) | "
              f"{last['best'].get('strategy') or '?'} |", flush=True)
        tunes.append({"case": c["case"], "einsum": c["einsum"], "footprint_mib": footprint,
                      "rounds": rounds})
    return tunes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("einsumdb")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cases", default="1-48",
                    help="cases to measure; none: only --tune or --batched")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tune", default="", help="cases to tune with default options")
    ap.add_argument("--rounds", type=int, default=3, help="the whole measurement this many times")
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="keep OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (removed by default)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=EINSUMDB",
                    help="another build, run beside the first on every case")
    ap.add_argument("--no-numpy", action="store_true",
                    help="leave out numpy and the plain GEMMs")
    ap.add_argument("--output", help="write every round's figures here as JSON")
    ap.add_argument("--dtype", default="f64", choices=sorted(DTYPES))
    ap.add_argument("--transforms", default="tensor_gemm",
                    help="einsumdb's strategies, comma-separated, each with any parameters "
                    "after colons (ttgt:gemm3m=true): each case takes the fastest")
    ap.add_argument("--batched", metavar="B,M,N,K",
                    help="also a batched matrix product bik,bkj->bij of these lengths")
    ap.add_argument("--real", choices=["A", "B"],
                    help="with a complex --dtype: this operand real, of the dtype's precision")
    ap.add_argument("--isa", choices=sorted(ISA_CAPS),
                    help="cap every library's kernels at this instruction set, numpy's OpenBLAS "
                    "included (EINSUMDB_ISA, LIBXSMM_TARGET, OPENBLAS_CORETYPE)")
    a = ap.parse_args()
    transforms = a.transforms.split(",")
    also = {}
    for item in a.also:
        label, _, path = item.partition("=")
        if not label or not path or not os.access(path, os.X_OK):
            sys.exit(f"--also takes LABEL=EINSUMDB, an executable; got {item!r}")
        also[label] = path
    exe = a.einsumdb
    t = a.threads
    if a.real and a.dtype not in PARTS:
        sys.exit(f"--real {a.real} makes one operand real beside a complex --dtype; got {a.dtype}")
    da, db = operand_dtypes(a.dtype, a.real)

    if a.cases == "none" and not a.tune and not a.batched:
        sys.exit("--cases none measures only what --tune or --batched names; neither was given")
    if a.cases == "none" and not a.batched:  # the tunes only
        tunes = tune_table(a, exe, spread)
        if a.output:
            write_output(a.output, {
                "command": ["bench/tccg.py"] + sys.argv[1:], "einsumdb": exe,
                "rounds": a.rounds, "dtype": a.dtype, "machine": machine(),
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tunes": tunes})
        return
    chosen = [] if a.cases == "none" else cases(selection(a.cases), a.dtype)
    if a.batched:
        nb, m, n, k = map(int, a.batched.split(","))
        chosen.append(contraction("bmm", "bik,bkj->bij", {"b": nb, "i": m, "k": k, "j": n}))
        chosen[-1]["M"] = nb * m  # its plain GEMM: the batch's rows stacked
    np_type, elem, gemm_name, fma_flops = DTYPES[a.dtype]
    # per case: lists over the rounds
    runs = {c["case"]: {"s": [], "roof": [], "view": [], "contig": [], "plain": [], "bound": "",
                        "transform": [], "also": {label: [] for label in also},
                        "each": {s: [] for s in transforms}}
            for c in chosen}
    limits = []
    kernel = openblas_kernel()
    for k in range(a.rounds):
        # The limits, in this round.
        n = 3000 if fma_flops == 2 else 2000
        x, y = rand((n, n), a.dtype), rand((n, n), a.dtype)
        openblas = fma_flops * n**3 / median_time(lambda: x @ y, 3) / 1e9
        j = einsumdb(exe, ["run", "ik,kj->ij", "--shape", f"A={n}x{n}", "--shape", f"B={n}x{n}",
                           "--dtype", a.dtype, "--transform", "tensor_gemm", "--param",
                           f"threads={t}", "--repeat", "3", "--json"])
        blis = fma_flops * n**3 / j["median_s"] / 1e9
        peak = max(openblas, blis)
        bandwidth = copy_bandwidth(t)
        del x, y
        limits.append({"openblas_gflops": openblas, "einsumdb_gflops": blis, "peak_gflops": peak,
                       "copy_gbs": bandwidth, "copy_threads": t})
        print(f"round {k + 1} of {a.rounds}, {t} thread(s). {gemm_name} {n}³: OpenBLAS ({kernel}) "
              f"{openblas:.1f} GFLOP/s, einsumdb tensor_gemm {blis:.1f} GFLOP/s; peak taken as "
              f"{peak:.1f}. Copy bandwidth {bandwidth:.1f} GB/s (bytes read + written, {t} "
              "thread(s)).",
              file=sys.stderr, flush=True)
        plain_times = {}
        for c in chosen:
            flops = (4 if a.real else fma_flops) * math.prod(c["lengths"].values())
            nbytes = (DTYPES[da][1] * math.prod(c["A"]) + DTYPES[db][1] * math.prod(c["B"]) +
                      elem * math.prod(c["C"]))
            view = contig = plain = math.nan
            if not a.no_numpy:
                A, B = rand(c["A"], da), rand(c["B"], db)
                view = median_time(lambda: np.einsum(c["einsum"], A, B, optimize=True), a.repeat)
                contig = median_time(
                    lambda: np.ascontiguousarray(np.einsum(c["einsum"], A, B, optimize=True)),
                    a.repeat)
                del A, B
            # The same product as a plain GEMM of contiguous matrices, by each library (once per
            # shape in a round: cases 20-30 share theirs).
            shape = (c["M"], c["N"], c["K"])
            if not a.no_numpy and shape not in plain_times:
                X, Y = rand((c["M"], c["K"]), da), rand((c["K"], c["N"]), db)
                Z = np.empty((c["M"], c["N"]), dtype=np_type)
                plain = median_time(lambda: np.matmul(X, Y, out=Z), a.repeat)
                del X, Y, Z
                j = einsumdb(exe, ["run", "ik,kj->ij", "--shape", f"A={c['M']}x{c['K']}",
                                   "--shape", f"B={c['K']}x{c['N']}", "--dtype", a.dtype]
                               + (["--dtype", f"{a.real}={PARTS[a.dtype]}"] if a.real else [])
                               + ["--transform",
                                   "tensor_gemm", "--param", f"threads={t}", "--repeat",
                                   str(a.repeat), "--json"])
                plain_times[shape] = min(plain, j["median_s"])
            plain = plain_times.get(shape, math.nan)
            def run_args(transform):
                name, *params = transform.split(":")
                return ["run"] + spec_args(c, a.dtype, a.real) + ["--transform", name] + [
                    x for p in params + [f"threads={t}"] for x in ("--param", p)] + [
                    "--repeat", str(a.repeat), "--json"]

            def fastest(build):  # over --transforms: (seconds, strategy), and each one's
                each = {s: einsumdb(build, run_args(s))["median_s"] for s in transforms}
                return min((sec, s) for s, sec in each.items()), each

            # The builds take turns going first, round by round.
            order = [None] + list(also) if k % 2 == 0 else list(also) + [None]
            times = {label: fastest(also.get(label, exe)) for label in order}
            (sec, strategy), each = times.pop(None)
            times = {label: v[0][0] for label, v in times.items()}
            compute, memory = flops / (peak * 1e9), nbytes / (bandwidth * 1e9)
            r = runs[c["case"]]
            r["s"].append(sec)
            r["transform"].append(strategy)
            for s in transforms:  # each strategy's time over the fastest's
                r["each"][s].append(each[s] / sec)
            r["roof"].append(max(compute, memory) / sec)
            r["view"].append(view / sec)
            r["contig"].append(contig / sec)
            r["plain"].append(plain / sec)
            for label in also:
                r["also"][label].append(times[label] / sec)
            r["bound"] = "compute" if compute >= memory else "memory"
            r["gflop"] = flops / 1e9
            print(f"  case {c['case']}: {sec * 1e3:.1f} ms ({strategy})"
                  + ("" if a.no_numpy else f", numpy view {view * 1e3:.1f} ms, contiguous "
                     f"{contig * 1e3:.1f} ms, plain GEMM {plain * 1e3:.1f} ms")
                  + "".join(f", {label} {times[label] * 1e3:.1f} ms" for label in also),
                  file=sys.stderr, flush=True)

    print(f"{a.rounds} round(s), {t} thread(s) each side; min / median / max over the rounds. "
          f"numpy's OpenBLAS: {kernel}"
          + (f", without {' and '.join(f'{k}={v}' for k, v in PINNED.items())}" if PINNED else "")
          + ".\n")
    result = {"command": ["bench/tccg.py"] + sys.argv[1:], "einsumdb": exe,
              "also": also, "threads": t, "rounds": a.rounds, "repeat": a.repeat,
              "dtype": a.dtype, "real": a.real, "gemm": gemm_name, "transforms": transforms,
              "machine": dict(machine(), openblas=kernel),
              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "limits": limits,
              "cases": []}
    if a.isa:
        result["isa"] = ISA_CAPS[a.isa]
    for c in chosen:
        r = runs[c["case"]]
        result["cases"].append({
            "case": c["case"], "einsum": c["einsum"], "gflop": r["gflop"], "M": c["M"],
            "N": c["N"], "K": c["K"], "lengths": c["lengths"], "bound": r["bound"],
            "seconds": r["s"],
            "roofline": r["roof"], "also": r["also"], "transform": r["transform"],
            "each": r["each"],
            **({} if a.no_numpy else {"numpy_view": r["view"], "numpy_contiguous": r["contig"],
                                      "plain_gemm": r["plain"]})})
    print("\n".join(table_lines(result)))
    if a.tune:
        result["tunes"] = tune_table(a, exe, spread)
    if a.output:
        write_output(a.output, result)


def write_output(path, result):
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
