"""The executor on processors narrower than this one, emulated by QEMU (Debian's qemu-user): the
library is built for the x86-64 baseline and chooses its kernels' instruction set when it runs
(executor/isa.hpp). On an emulated Nehalem (SSE4.2, no AVX) every strategy must run, verified
against the reference, with the baseline kernels; on an emulated Haswell (AVX2, FMA, no AVX-512),
with the AVX2 kernels. An AVX or AVX-512 instruction
reached on the way (an inline function compiled for a wider set, a kernel called for the wrong
processor) ends the process with SIGILL.

QEMU's user mode emulates up to AVX2 (7.2), so the AVX-512 kernels are tested natively only. The
emulated process gets no OPENBLAS_CORETYPE: OpenBLAS must choose its kernels for the emulated
processor too, not the host's."""
import json
import os
import shutil
import subprocess

import pytest

EINSUMDB = os.environ.get("EINSUMDB_BIN") or shutil.which("einsumdb") or "einsumdb"
QEMU = shutil.which("qemu-x86_64")
pytestmark = pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 (Debian's qemu-user) is absent")

# (QEMU's processor model, the kernels einsumdb must choose on it)
PROCESSORS = [("Nehalem", "baseline"), ("Haswell", "avx2")]

# (strategy, einsum, shapes, dtype): each strategy on a case it applies to, with the kernels that
# have an instruction-set variant among them (copy_layout's transposes, tensor_gemm's packed and
# streamed paths, loop_nest's loops).
CASES = [
    ("reference", "ij,jk->ik", ["A=12x10", "B=10x8"], "f64"),
    ("direct", "ij,jk->ik", ["A=12x10", "B=10x8"], "f64"),
    ("loop_nest", "abc,cd->abd", ["A=6x10x16", "B=16x24"], "f32"),
    ("loop_nest", "abc,cd->abd", ["A=6x10x16", "B=16x24"], "f64"),
    ("ttgt", "abc,cd->dba", ["A=24x40x32", "B=32x48"], "f64"),
    ("ttgt", "abc,cd->dba", ["A=24x40x32", "B=32x48"], "f32"),
    ("ttgt", "abc,cd->dba", ["A=24x40x32", "B=32x48"], "c128"),
    ("loop_over_gemm", "abc,cd->abd", ["A=6x40x32", "B=32x48"], "f64"),
    ("tensor_gemm", "abc,cd->abd", ["A=24x40x32", "B=32x48"], "f64"),
    ("tensor_gemm", "bda,dc->abc", ["A=40x16x200", "B=16x8"], "f64"),
    ("tensor_gemm", "dca,bd->abc", ["A=24x16x200", "B=16x24"], "f32"),
    ("contraction_tree", "ij,jk,kl->il", ["A=20x30", "B=30x40", "C=40x10"], "f64"),
]


def emulated(cpu, *args, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "EINSUMDB_ISA")}
    env["OPENBLAS_NUM_THREADS"] = "1"
    return subprocess.run([QEMU, "-cpu", cpu, EINSUMDB, *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.mark.parametrize("cpu,kernels", PROCESSORS)
@pytest.mark.parametrize("strategy,einsum,shapes,dtype", CASES)
def test_every_strategy_runs_verified_with_the_processors_kernels(tmp_path, cpu, kernels, strategy,
                                                                  einsum, shapes, dtype):
    args = ["run", einsum, "--transform", strategy, "--dtype", dtype, "--verify", "--json",
            "--db", str(tmp_path / "store.sqlite")]
    for s in shapes:
        args += ["--shape", s]
    r = emulated(cpu, *args)
    assert r.returncode == 0, f"{cpu}: exit {r.returncode}: {r.stderr[-2000:]}"
    out = json.loads(r.stdout)
    assert out["verified"] is True
    assert out["kernels"] == kernels
    assert out["transform"]["strategy"] == strategy

