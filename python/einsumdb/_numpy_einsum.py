"""The whole of numpy.einsum's call, around einsumdb's native core.

``einsumdb.einsum`` is implemented in C++ for the common call (subscripts and arrays of one
float32, float64, complex64 or complex128 dtype); every other call comes here, and this module
gives numpy's behaviour for it (numpy 1.24's documented contract):

- the sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``, subscripts 0-51 and ``Ellipsis``;
- ``dtype=`` and ``casting=``: the operands are cast to ``dtype`` (default: numpy's result type
  of the operands) under the ``casting`` rule (default ``'safe'``), the TypeError numpy raises
  when a cast is not allowed, and ``out=`` of another dtype filled under the same rule;
- ``order=`` (``'C'``, ``'F'``, ``'A'``, ``'K'``, in either case);
- ``optimize=``: ``False``, ``True``, ``'greedy'``, ``'optimal'``, ``(name, memory_limit)`` or an
  explicit path ``['einsum_path', (0, 1), ...]``. numpy's ``einsum_path`` checks it (so a bad one
  raises what numpy raises); an explicit path is followed, each pairwise step run by einsumdb.
  Otherwise einsumdb orders the contraction itself (its store's choice, or its default);
- a full contraction returns a numpy scalar, as numpy does;
- one operand whose subscripts only permute its axes or take a diagonal is numpy's view of it
  (numpy computes nothing there, and returns a view that writes through).

Where the computation dtype is float32, float64, complex64 or complex128 (also for mixed operands
that promote to one of them), einsumdb computes natively. For every other computation dtype
(integers, bool, float16, longdouble, clongdouble, object, ...) the result is numpy.einsum's
own: its integer wrap-around, boolean logic and extended precision are what those dtypes mean,
and einsumdb's store holds no transforms for them. ``einsumdb.native_dtypes`` lists the native
ones.
"""

import operator as _operator

import numpy as _np

from . import _einsumdb

#: The dtypes einsumdb computes in itself; other computation dtypes go to numpy.einsum.
NATIVE_DTYPES = (_np.dtype(_np.float32), _np.dtype(_np.float64), _np.dtype(_np.complex64),
                 _np.dtype(_np.complex128))

_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
_ORDERS = ("C", "F", "A", "K")
# numpy.einsum's keywords, and einsumdb's own.
_NUMPY_KEYS = ("out", "dtype", "order", "casting", "optimize")
_EINSUMDB_KEYS = ("db", "threads", "transform", "params")


def _label(s):
    if s is Ellipsis:
        return "..."
    try:
        s = _operator.index(s)
    except TypeError:
        raise TypeError("each subscript must be either an integer or an ellipsis") from None
    if not 0 <= s < 52:
        raise ValueError("subscript is not within the valid range [0, 52)")
    # numpy's mapping: 0-25 are 'A'-'Z', 26-51 'a'-'z' (so the implicit output's ASCII order is
    # numpy's).
    return chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26)


def _sublist_subscripts(args):
    """(subscripts, operands) of the interleaved form op0, sub0, op1, sub1, ..., [out]."""
    operands, terms = [], []
    items = list(args)
    output = None
    if len(items) % 2 == 1:
        output = items.pop()
    for k in range(0, len(items), 2):
        operands.append(items[k])
        terms.append("".join(_label(s) for s in items[k + 1]))
    text = ",".join(terms)
    if output is not None:
        text += "->" + "".join(_label(s) for s in output)
    return text, operands


def _cast_error(operand, frm, to, casting):
    return TypeError(f"Iterator operand {operand} dtype could not be cast from dtype('{frm}') "
                     f"to dtype('{to}') according to the rule '{casting}'")


def _check_keywords(kwargs):
    for key in kwargs:
        if key not in _NUMPY_KEYS and key not in _EINSUMDB_KEYS:
            raise TypeError(f"'{key}' is an invalid keyword for einsum")


def _order(order):
    if order is None:
        return "K"
    if not isinstance(order, str) or order.upper() not in _ORDERS:
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    return order.upper()


def _casting(casting):
    if casting not in _CASTINGS:
        raise ValueError("casting must be one of 'no', 'equiv', 'safe', 'same_kind', or "
                         f"'unsafe' (got {casting!r})")
    return casting


def _explicit_path(optimize):
    return (isinstance(optimize, (list, tuple)) and len(optimize) > 0
            and isinstance(optimize[0], str) and optimize[0] == "einsum_path")


def _layout(result, order, operands):
    if order == "F" or (order == "A" and operands and
                        all(o.flags.f_contiguous and not o.flags.c_contiguous
                            for o in operands if o.ndim > 1)
                        and any(o.ndim > 1 for o in operands)):
        return _np.asfortranarray(result)
    return result


def _native(subscripts, operands, out, own):
    """einsumdb's core on operands of one native dtype (out: None or of that dtype)."""
    return _einsumdb.einsum_native(subscripts, operands, out, own.get("db"),
                                   own.get("threads", 0), own.get("transform"), own.get("params"))


def _follow_path(subscripts, operands, path, own):
    """Contracts as numpy's explicit path says, each step run by einsumdb (numpy's einsum_path
    checks the path first, and raises what numpy raises for a bad one)."""
    operands, steps = _np.einsum_path(subscripts, *operands, optimize=path, einsum_call=True)
    operands = list(operands)
    for step in steps:
        positions, text = step[0], step[2]
        taken = [operands.pop(x) for x in positions]
        operands.append(_native(text, taken, None, own))
    return operands[0]


def _a_view(subscripts):
    """Whether one operand's subscripts only permute its axes or take a diagonal (nothing is
    summed): numpy returns a view of the operand for that, computing nothing."""
    if "," in subscripts:
        return False
    text = subscripts.replace(" ", "")
    term, arrow, output = text.partition("->")
    labels = term.replace("...", "")
    if not arrow:
        return all(labels.count(c) == 1 for c in labels)
    return all(c in output for c in labels)


def einsum(*args, **kwargs):
    """numpy.einsum's call: the slow half of ``einsumdb.einsum`` (see the module's docstring)."""
    _check_keywords(kwargs)
    own = {k: kwargs.pop(k) for k in _EINSUMDB_KEYS if k in kwargs}
    if not args:
        raise ValueError("must specify the einstein sum subscripts string and at least one "
                         "operand, or at least one operand and its corresponding subscripts list")
    if isinstance(args[0], str):
        subscripts, operands = args[0], list(args[1:])
    else:
        subscripts, operands = _sublist_subscripts(args)
    if not operands:
        raise ValueError("must specify the einstein sum subscripts string and at least one "
                         "operand, or at least one operand and its corresponding subscripts list")
    if len(operands) == 1 and _a_view(subscripts):
        # A transposition or diagonal: numpy's view (nothing to compute), exactly as numpy
        # returns it.
        return _np.einsum(subscripts, *operands, **kwargs)
    out = kwargs.get("out")
    order = _order(kwargs.get("order", "K"))
    casting = _casting(kwargs.get("casting", "safe"))
    optimize = kwargs.get("optimize", False)
    arrays = [_np.asarray(x) for x in operands]
    for a in arrays:
        if a.dtype.kind in "OSUVMm":
            raise TypeError("invalid data type for einsum")
    if kwargs.get("dtype") is not None:
        dtype = _np.dtype(kwargs["dtype"])
    elif isinstance(out, _np.ndarray):
        dtype = _np.result_type(*arrays, out)  # numpy computes in the output's type too
    else:
        dtype = _np.result_type(*arrays)
    if dtype not in NATIVE_DTYPES:
        # Integers, bool, float16, extended precision: numpy's own arithmetic is the result.
        return _np.einsum(subscripts, *arrays, **kwargs)
    for k, a in enumerate(arrays):
        if not _np.can_cast(a.dtype, dtype, casting):
            raise _cast_error(k, a.dtype, dtype, casting)
    if out is not None:
        if not isinstance(out, _np.ndarray):
            raise TypeError("out must be an array")
        if not _np.can_cast(dtype, out.dtype, casting):
            raise TypeError(f"Iterator requested dtype could not be cast from dtype('{dtype}') "
                            f"to dtype('{out.dtype}'), the operand {len(arrays)} dtype, "
                            f"according to the rule '{casting}'")
    cast = [a if a.dtype == dtype else a.astype(dtype) for a in arrays]
    if optimize is not False and optimize is not None and not isinstance(optimize, bool):
        if _explicit_path(optimize):
            result = _follow_path(subscripts, cast, optimize, own)
        else:
            _np.einsum_path(subscripts, *cast, optimize=optimize)  # checks it as numpy does
            result = None
    else:
        result = None
    if result is None:
        direct = out is not None and out.dtype == dtype and order in ("K", "C")
        result = _native(subscripts, cast, out if direct else None, own)
        if direct:
            return out
    result = _layout(result, order, arrays)
    if out is not None:
        if out.shape != result.shape:
            raise ValueError(f"output parameter for einsum has shape {out.shape}, but the result "
                             f"has shape {result.shape}")
        _np.copyto(out, result, casting="unsafe")  # allowed: checked above
        return out
    return result[()] if result.ndim == 0 else result
