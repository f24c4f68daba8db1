"""einsumdb.einsum against numpy.einsum over the grid of numpy's contract: expressions (ellipsis,
broadcasting of size-1 axes, empty axes, traces and diagonals, scalars, several operands) ×
dtypes (native, integer, bool, float16, longdouble, mixed) × call forms (subscripts, sublists) ×
out= × order= × dtype= and casting=, and bad calls raising numpy's exception types. Also
einsumdb as opt_einsum's backend (opt_einsum from ../shared/python/opt_einsum, skipped with the
reason printed where it is absent)."""
import itertools
import os
import pathlib
import sys

import numpy as np
import pytest

import einsumdb

# (subscripts, shapes): every form numpy reads.
EXPRESSIONS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(6, 1, 3, 4), (5, 4, 2)]),  # ellipses of other ranks, size-1 broadcast
    ("...ij,jk->...ik", [(2, 2, 3, 4), (4, 5)]),
    ("i...,i...->...", [(3, 2, 4), (3, 1, 4)]),
    ("...i,...i", [(3,), (2, 3)]),
    ("ij,ij->j", [(10, 2), (1, 2)]),  # size-1 broadcasting on a named axis
    ("ij,ij->ij", [(1, 3), (4, 3)]),
    ("ii", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ji", [(3, 5)]),
    ("i->", [(7,)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i", [(5,), (5,)]),
    (",i->i", [(), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk,kl", [(2, 3), (3, 4), (4, 2)]),
    ("abc,cd,dbe->ae", [(2, 3, 4), (4, 5), (5, 3, 2)]),
    ("ij,jk->ik", [(0, 3), (3, 2)]),  # empty result
    ("ij,jk->ik", [(2, 0), (0, 3)]),  # sums of nothing
    ("i,i", [(0,), (0,)]),
    ("...", [(2, 3)]),
]

DTYPES = [np.float32, np.float64, np.complex64, np.complex128, np.int32, np.int64, np.bool_,
          np.float16, np.longdouble]
MIXED = [(np.float32, np.float64), (np.float64, np.complex64), (np.int64, np.float32),
         (np.bool_, np.float64), (np.float16, np.float32), (np.int8, np.complex64)]


def operands(shapes, dtypes, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in zip(shapes, itertools.cycle(dtypes)):
        dtype = np.dtype(dtype)
        if dtype.kind == "b":
            out.append(rng.random(shape) > 0.5)
        elif dtype.kind in "iu":
            out.append(rng.integers(-5, 6, size=shape).astype(dtype))
        elif dtype.kind == "c":
            out.append((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def tolerance(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return 0
    return {2: 1e-2, 4: 1e-4, 8: 1e-4}.get(dtype.itemsize, 1e-11) if dtype.kind == "f" and \
        dtype.itemsize <= 4 else (1e-4 if dtype == np.complex64 else 1e-11)


def same(got, want):
    """Equal as numpy would have it: the same kind of object (scalar or array), dtype, shape and
    values."""
    assert type(got) is type(want), (type(got), type(want))
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    tol = tolerance(want.dtype)
    if tol == 0:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def outcome(f):
    try:
        return f(), None
    except Exception as e:  # noqa: BLE001 - the exception is what is compared
        return None, e


def check(args, kwargs=None):
    kwargs = kwargs or {}
    want, werr = outcome(lambda: np.einsum(*args, **kwargs))
    got, gerr = outcome(lambda: einsumdb.einsum(*args, **kwargs))
    if werr is not None or gerr is not None:
        assert werr is not None and gerr is not None, (werr, gerr)
        assert isinstance(gerr, type(werr)), (type(werr), type(gerr), str(gerr))
        return
    same(got, want)
    return got, want


def sublists(subscripts, ops):
    """The interleaved form of an explicit or implicit subscripts string."""
    text = subscripts.replace("...", ".")
    inputs, _, output = text.partition("->")

    def ints(term):
        return [Ellipsis if c == "." else (ord(c) - ord("a") + 26 if c.islower() else ord(c) - ord("A"))
                for c in term]
    args = []
    for term, op in zip(inputs.split(","), ops):
        args += [op, ints(term)]
    if "->" in subscripts:
        args.append(ints(output))
    return args


@pytest.mark.parametrize("subscripts,shapes", EXPRESSIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_expression_and_dtype_equals_numpy(db, subscripts, shapes, dtype):
    ops = operands(shapes, [dtype])
    check([subscripts, *ops])
    check(sublists(subscripts, ops))


@pytest.mark.parametrize("subscripts,shapes", EXPRESSIONS[:12])
@pytest.mark.parametrize("dtypes", MIXED, ids=lambda p: "+".join(np.dtype(d).name for d in p))
def test_mixed_dtypes_promote_as_numpy(db, subscripts, shapes, dtypes):
    check([subscripts, *operands(shapes, dtypes)])


@pytest.mark.parametrize("order", ["C", "F", "A", "K", "c", "f", "a", "k"])
@pytest.mark.parametrize("subscripts,shapes", [EXPRESSIONS[2], EXPRESSIONS[4], EXPRESSIONS[13]])
def test_orders(db, order, subscripts, shapes):
    ops = operands(shapes, [np.float64])
    got, want = check([subscripts, *ops], {"order": order})
    if want.ndim > 1:
        assert got.flags.c_contiguous or got.flags.f_contiguous
        if order.upper() == "F":
            assert got.flags.f_contiguous
    fortran = [np.asfortranarray(o) for o in ops]
    check([subscripts, *fortran], {"order": order})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128,
                                   np.int64])
@pytest.mark.parametrize("out_dtype", [np.float32, np.float64, np.complex128, np.int64])
@pytest.mark.parametrize("casting", [None, "unsafe", "same_kind"])
def test_out_with_numpys_casting(db, dtype, out_dtype, casting):
    a, b = operands([(3, 4), (4, 5)], [dtype])
    kwargs = {} if casting is None else {"casting": casting}
    out_np, out_edb = np.zeros((3, 5), out_dtype), np.zeros((3, 5), out_dtype)
    want, werr = outcome(lambda: np.einsum("ij,jk->ik", a, b, out=out_np, **kwargs))
    got, gerr = outcome(lambda: einsumdb.einsum("ij,jk->ik", a, b, out=out_edb, **kwargs))
    assert (werr is None) == (gerr is None), (werr, gerr)
    if werr is not None:
        assert isinstance(gerr, type(werr)), (werr, gerr)
        return
    assert got is out_edb
    same(out_edb, out_np)
    # A strided out.
    big_np, big_edb = np.zeros((6, 10), out_dtype), np.zeros((6, 10), out_dtype)
    w, werr = outcome(lambda: np.einsum("ij,jk->ik", a, b, out=big_np[::2, ::2], **kwargs))
    g, gerr = outcome(lambda: einsumdb.einsum("ij,jk->ik", a, b, out=big_edb[::2, ::2], **kwargs))
    assert (werr is None) == (gerr is None)
    if werr is None:
        same(big_edb, big_np)


@pytest.mark.parametrize("dtype,casting", itertools.product(
    ["f4", "f8", "c8", "c16", "i8", "f2", None], ["no", "equiv", "safe", "same_kind", "unsafe"]))
def test_dtype_and_casting(db, dtype, casting):
    a, b = operands([(3, 4), (4, 2)], [np.float64])
    check(["ij,jk->ik", a, b], {"dtype": dtype, "casting": casting})
    c, d = operands([(3, 4), (4, 2)], [np.float32])
    check(["ij,jk->ik", c, d], {"dtype": dtype, "casting": casting})


@pytest.mark.parametrize("optimize", [False, True, "greedy", "optimal", ("greedy", 100),
                                      ["einsum_path", (0, 1), (0, 1)],
                                      ["einsum_path", (1, 2), (0, 1)],
                                      ["einsum_path", (0, 1, 2)],
                                      ["einsum_path", (0, 5)], ["einsum_path", (0, 1)],
                                      "blah", [(0, 1), (0, 1)], None])
def test_optimize_paths(db, optimize):
    ops = operands([(2, 3), (3, 4), (4, 5)], [np.float64])
    check(["ij,jk,kl->il", *ops], {"optimize": optimize})


BAD_CALLS = [
    ([], {}),
    (["ij,jk"], {}),
    (["ij,jk", np.ones((2, 3))], {}),
    (["ij", np.ones((2, 3)), np.ones((2, 3))], {}),
    (["ij,jk", np.ones((2, 3)), np.ones((4, 2))], {}),
    (["ijk", np.ones((2, 3))], {}),
    (["i", np.ones((2, 3))], {}),
    (["ij->ijj", np.ones((2, 3))], {}),
    (["ij->k", np.ones((2, 3))], {}),
    (["i!", np.ones((2, 3))], {}),
    (["i..j", np.ones((2, 3))], {}),
    (["...ij->ij", np.ones((4, 2, 3))], {}),
    (["ij,ij->j", np.ones((10, 2)), np.ones((3, 2))], {}),
    (["ij", np.ones((2, 3))], {"order": "X"}),
    (["ij", np.ones((2, 3))], {"casting": "blah"}),
    (["ij", np.ones((2, 3))], {"bogus": 1}),
    (["ij", np.ones((2, 3))], {"dtype": "f4"}),
    (["ij,jk", np.ones((2, 3), dtype=object), np.ones((3, 2))], {}),
    (["ij,jk", np.array([["a", "b"]]), np.ones((2, 2))], {}),
    (["ij,jk", np.ones((2, 3)), np.ones((3, 4))], {"out": np.zeros((2, 5))}),
    ([np.ones(3), [0, 60]], {}),
    ([np.ones(3), ["a"]], {}),
]


@pytest.mark.parametrize("args,kwargs", BAD_CALLS)
def test_bad_calls_raise_numpys_exceptions(db, args, kwargs):
    check(args, kwargs)


def test_errors_name_the_callers_operands_not_internal_arrays(db):
    with pytest.raises(ValueError) as e:
        einsumdb.einsum("ij,ij->j", np.ones((10, 2)), np.ones((3, 2)))
    assert "operand 0" in str(e.value) and "operand 1" in str(e.value)
    assert "T0" not in str(e.value) and "T1" not in str(e.value)


def test_scalars_lists_and_subclasses(db):
    check(["i,i", [1.0, 2.0], [3.0, 4.0]])
    check([",i->i", 2.5, np.arange(3.0)])
    check(["ij->ji", np.matrix([[1.0, 2.0], [3.0, 4.0]])])
    view = np.arange(24.0).reshape(4, 6)[::2, 1::2]
    check(["ij,jk", view, view.T])


def opt_einsum_path():
    env = os.environ.get("EINSUMDB_OPT_EINSUM")
    if env:
        return env
    here = pathlib.Path(__file__).resolve()
    for up in here.parents:
        candidate = up.parent / "shared" / "python" / "opt_einsum"
        if (candidate / "opt_einsum" / "__init__.py").exists():
            return str(candidate)
    return None


@pytest.fixture
def oe():
    path = opt_einsum_path()
    if path is None:
        pytest.skip("opt_einsum is not available (../shared/python/opt_einsum, or "
                    "EINSUMDB_OPT_EINSUM); Debian 12 does not package it")
    sys.path.insert(0, path)
    import opt_einsum
    return opt_einsum


@pytest.mark.parametrize("expr,shapes", [
    ("ij,jk,kl->il", [(10, 20), (20, 30), (30, 5)]),
    ("ij,jk,kl,li->", [(8, 9), (9, 10), (10, 11), (11, 8)]),
    ("abc,cd,dbe->ae", [(4, 5, 6), (6, 7), (7, 5, 3)]),
    ("bij,bjk,bkl->bil", [(3, 4, 5), (3, 5, 6), (3, 6, 2)]),
    ("ea,fb,abcd,gc,hd->efgh", [(5, 6), (5, 7), (6, 7, 8, 9), (5, 8), (5, 9)]),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_as_opt_einsums_backend(db, oe, expr, shapes, dtype):
    ops = operands(shapes, [dtype])
    got = oe.contract(expr, *ops, backend="einsumdb")
    want = np.einsum(expr, *ops)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=tolerance(dtype) * 10, atol=tolerance(dtype) * 10)
    expression = oe.contract_expression(expr, *shapes)
    np.testing.assert_allclose(expression(*ops, backend="einsumdb"), want,
                               rtol=tolerance(dtype) * 10, atol=tolerance(dtype) * 10)


def test_tensordot_and_transpose_are_numpys(db):
    rng = np.random.default_rng(3)
    a, b = rng.random((3, 4, 5)), rng.random((5, 4, 6))
    for axes in (([1, 2], [1, 0]), 1, ([2], [0]), (2, 0)):
        try:
            want = np.tensordot(a, b, axes=axes)
        except Exception as e:  # noqa: BLE001
            with pytest.raises(type(e)):
                einsumdb.tensordot(a, b, axes=axes)
            continue
        np.testing.assert_allclose(einsumdb.tensordot(a, b, axes=axes), want)
    np.testing.assert_allclose(einsumdb.tensordot(a, a, axes=0), np.tensordot(a, a, axes=0))
    np.testing.assert_array_equal(einsumdb.transpose(a, (2, 0, 1)), np.transpose(a, (2, 0, 1)))
    np.testing.assert_array_equal(einsumdb.transpose(a), np.transpose(a))
