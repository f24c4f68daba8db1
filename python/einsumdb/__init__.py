"""einsumdb: tensor contractions that remember how to run fast.

``einsumdb.einsum`` is a drop-in for ``numpy.einsum`` (its whole call: ellipsis and broadcasting,
the sublist form, ``dtype=``, ``casting=``, ``order=``, ``optimize=``, ``out=``) that runs each
contraction with the fastest verified transform this machine's performance store knows for it
(measured under any spelling of the same computation: other index letters, array names or
operand order), or a default when the store knows none. It computes natively in float32, float64,
complex64 and complex128; other computation dtypes are numpy.einsum's own (see NATIVE_DTYPES).
``einsumdb.tensordot`` and ``einsumdb.transpose`` complete opt_einsum's backend protocol:
``opt_einsum.contract(..., backend="einsumdb")`` runs opt_einsum's path with einsumdb's pairwise
contractions. ``einsumdb.tune`` measures and records; ``einsumdb.Store`` inspects the store;
``einsumdb.canonicalize`` shows the canonical key; ``einsumdb.plan`` partitions a graph of
einsums over P processes.

Results that are objects of the model are typed: ``Answer`` (the store's answer), ``CanonicalForm``,
``Choice`` (what an Expression runs), ``TuneReport`` with its ``TuneResult`` rows, ``Workload``
(a row of ``Store.list``). Their fields are attributes named as the keys of the JSON the
``einsumdb`` command prints, and each also reads as a mapping (``answer["gflops"]``, ``keys()``,
``as_dict()``). Documents (spec forms, parameters, store rows, statistics, plan files) are dicts.

The store is ``db=`` when given, else ``$EINSUMDB_DB``, else
``$XDG_DATA_HOME/einsumdb/einsumdb.sqlite`` (``~/.local/share/einsumdb/einsumdb.sqlite``), the same
file the ``einsumdb`` command uses. Every function may be called from several threads at once;
the GIL is released while kernels, tuning and planning run.
"""

import json as _json
import numbers as _numbers
import operator as _operator
import sys as _sys

import numpy as _np

from . import _einsumdb

__all__ = [
    "Error", "SpecError", "DatabaseError", "einsum", "tensordot", "transpose", "batched_einsum",
    "contract_expression", "Expression", "canonicalize", "Store", "tune", "plan", "machine",
    "strategies", "NATIVE_DTYPES", "Answer", "CanonicalForm", "Choice", "TuneReport", "TuneResult",
    "Workload",
]

#: Every error einsumdb raises (a bad spec, an unreadable store, ...).
Error = _einsumdb.Error
#: A spec, an operand or a parameter that is wrong; the message names it (also a ValueError).
SpecError = _einsumdb.SpecError
#: The store could not be read or written.
DatabaseError = _einsumdb.DatabaseError

from ._numpy_einsum import NATIVE_DTYPES  # noqa: E402

#: The store's answer for a workload (Store.best, top_k, best_many).
Answer = _einsumdb.Answer
#: The canonical form of a batched einsum (canonicalize).
CanonicalForm = _einsumdb.CanonicalForm
#: What an Expression runs and why (Expression.choice).
Choice = _einsumdb.Choice
#: What tune measured and recorded, and one candidate's result.
TuneReport = _einsumdb.TuneReport
TuneResult = _einsumdb.TuneResult
#: A workload of the store with what is known about it (Store.list).
Workload = _einsumdb.Workload


def _plain(value):
    """A field's value with typed results (also inside lists) as dicts."""
    if hasattr(type(value), "_fields"):
        return value.as_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _as_mapping(cls):
    """Gives a typed result class the read-only mapping protocol over its ``_fields``."""

    def __getitem__(self, key):
        if key not in cls._fields:
            raise KeyError(key)
        return getattr(self, key)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __repr__(self):
        shown = ", ".join(f"{f}={getattr(self, f)!r}" for f in cls._shown)
        return f"einsumdb.{cls.__name__}({shown})"

    cls.__getitem__ = __getitem__
    cls.__contains__ = lambda self, key: key in cls._fields
    cls.__iter__ = lambda self: iter(cls._fields)
    cls.__len__ = lambda self: len(cls._fields)
    cls.keys = lambda self: list(cls._fields)
    cls.get = lambda self, key, default=None: getattr(self, key) if key in cls._fields else default
    cls.as_dict = lambda self: {f: _plain(getattr(self, f)) for f in cls._fields}
    cls.as_dict.__doc__ = "Every field as a dict (typed results within as dicts too)."
    cls.__eq__ = __eq__
    cls.__hash__ = None
    cls.__repr__ = __repr__


for _cls, _shown in ((Answer, ("transform", "params", "match", "gflops")),
                     (CanonicalForm, ("hash", "key")),
                     (Choice, ("strategy", "params", "source")),
                     (TuneReport, ("workload", "run", "candidates", "measured")),
                     (TuneResult, ("strategy", "params", "status", "gflops")),
                     (Workload, ("hash", "measurements", "best_gflops", "best_strategy"))):
    _cls._shown = _shown
    _as_mapping(_cls)

_FLOAT = tuple(d.type for d in NATIVE_DTYPES)


def _operand(x, what):
    """x as an ndarray einsumdb can read: a native dtype, strides in whole elements."""
    a = _np.asarray(x)
    if a.dtype.type not in _FLOAT:
        raise TypeError(f"{what} has dtype {a.dtype}; einsumdb computes natively in float32, "
                        f"float64, complex64 and complex128 (convert it with .astype)")
    if any(s % a.itemsize for s in a.strides) or not a.dtype.isnative:
        a = _np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
    return a


def _db(db):
    return "" if db is None else str(db)


#: einsum(subscripts, *operands, out=None, dtype=None, order='K', casting='safe', optimize=False,
#: db=None, threads=0, transform=None, params=None): numpy.einsum, remembered (see its docstring).
#: The common call is implemented in C++ so that a repeated small call pays no Python layer.
einsum = _einsumdb.einsum

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def tensordot(a, b, axes=2):
    """numpy.tensordot's call, contracted by einsumdb: ``axes`` is N (the last N axes of ``a``
    with the first N of ``b``) or a pair of axis lists; the result's axes are ``a``'s free axes,
    then ``b``'s."""
    a, b = _np.asarray(a), _np.asarray(b)
    try:
        n = _operator.index(axes)
        xa, xb = list(range(a.ndim - n, a.ndim)), list(range(n))
        if n < 0:
            raise ValueError("negative dimensions are not allowed")
    except TypeError:
        xa, xb = axes
        xa = [xa] if _np.ndim(xa) == 0 else list(xa)
        xb = [xb] if _np.ndim(xb) == 0 else list(xb)
    if len(xa) != len(xb):
        raise ValueError("shape-mismatch for sum")
    xa = [x % a.ndim if a.ndim else x for x in xa]
    xb = [x % b.ndim if b.ndim else x for x in xb]
    for i, j in zip(xa, xb):
        if a.shape[i] != b.shape[j]:
            raise ValueError("shape-mismatch for sum")
    if a.ndim + b.ndim - len(xa) > len(_LETTERS):
        raise ValueError("tensordot: more axes than einsum's 52 letters")
    sa = list(_LETTERS[:a.ndim])
    sb = [None] * b.ndim
    for i, j in zip(xa, xb):
        sb[j] = sa[i]
    free = iter(_LETTERS[a.ndim:])
    sb = [c if c is not None else next(free) for c in sb]
    out = [sa[i] for i in range(a.ndim) if i not in xa] + [sb[j] for j in range(b.ndim)
                                                           if j not in xb]
    return einsum("".join(sa) + "," + "".join(sb) + "->" + "".join(out), a, b)


def transpose(a, axes=None):
    """numpy.transpose: a view with the axes permuted (no data moves, so nothing for einsumdb to
    compute; the contraction that reads it takes its strides)."""
    return _np.transpose(a, axes)


def batched_einsum(subscripts, rows, db=None, threads=0):
    """One einsum applied to several rows of operands; returns one result per row.

    ``batched_einsum("ij,j->i", [[A, u], [A, v]])`` is ``[A @ u, A @ v]``. Operands that are the
    same array object in several rows are one shared array of the batched einsum, and rows that
    share operands run as the store says (fused into one larger contraction, or one by one).
    """
    arrays = [[_operand(x, f"row {r} operand {k}") for k, x in enumerate(row)]
              for r, row in enumerate(rows)]
    # Keep identity: the same object in several rows stays one array.
    seen = {}
    for r, row in enumerate(rows):
        for k, x in enumerate(row):
            seen.setdefault(id(x), arrays[r][k])
            arrays[r][k] = seen[id(x)]
    return _einsumdb.batched_einsum(subscripts, arrays, _db(db), int(threads))


class Expression:
    """An einsum prepared for fixed shapes and dtypes (see ``contract_expression``)."""

    def __init__(self, prepared, subscripts):
        self._prepared = prepared
        self.subscripts = subscripts

    def __call__(self, *operands, out=None):
        """Runs on ``operands`` (of the prepared shapes and dtypes), into ``out`` if given."""
        return self._prepared(*operands, out=out)

    @property
    def choice(self):
        """The transform chosen: strategy, params (in these subscripts), source and reason."""
        return self._prepared.choice

    def __repr__(self):
        c = self.choice
        return f"<einsumdb.Expression {self.subscripts!r}: {c.strategy} ({c.source})>"


def contract_expression(subscripts, *shapes, dtype="float64", db=None, threads=0):
    """Prepares ``subscripts`` for operands of ``shapes``: the returned Expression runs it with no
    lookup beyond the kernel (like ``opt_einsum.contract_expression``). ``dtype`` is one dtype or
    one per operand."""
    dtypes = dtype if isinstance(dtype, (list, tuple)) else [dtype] * len(shapes)
    names = []
    codes = {_np.dtype(_np.float32): "f32", _np.dtype(_np.float64): "f64",
             _np.dtype(_np.complex64): "c64", _np.dtype(_np.complex128): "c128"}
    for k, d in enumerate(dtypes):
        t = _np.dtype(d)
        if t not in codes:
            raise TypeError(f"operand {k} has dtype {t}; einsumdb computes natively in float32, "
                            "float64, complex64 and complex128")
        names.append(codes[t])
    prepared = _einsumdb.prepare(subscripts, [list(map(int, s)) for s in shapes], names,
                                 _db(db), int(threads))
    return Expression(prepared, subscripts)


def _length(n):
    """An axis length as spec JSON holds it: an int (numpy's too), or a symbol's name."""
    return int(n) if isinstance(n, _numbers.Integral) else n


def _spec(spec, shapes=None, batch=None, dtype=None):
    """A spec as the core reads it: a dict, JSON text, or subscripts with shapes (and batch
    rows), made a dict."""
    if isinstance(spec, dict):
        return spec
    text = str(spec)
    if text.lstrip().startswith("{"):
        return text
    j = {"einsum": text}
    if batch is None and shapes is not None:
        batch = [list(dict(shapes).keys())]  # one row: the arrays in the order given
    if batch is not None:
        j["batch"] = [list(row) for row in batch]
    if shapes is not None:
        j["shapes"] = {k: [_length(n) for n in v] for k, v in dict(shapes).items()}
    if dtype is not None:
        j["dtype"] = str(dtype)
    return j


def canonicalize(spec, shapes=None, batch=None, dtype=None):
    """The canonical form of a batched einsum (a CanonicalForm): key, hash, structure key,
    canonical spec and the sigma maps from canonical names to yours.

    ``spec`` is spec JSON (a dict or text) or subscripts with ``shapes={"A": (96, 4), ...}``,
    optional ``batch=[["A", "B"], ["A", "C"]]`` (default: one row of the arrays of ``shapes`` in
    their order) and ``dtype``.
    """
    return _einsumdb.canonicalize(_spec(spec, shapes, batch, dtype))


class Store:
    """The performance store: ``Store()`` is the default one, ``Store(path)`` another, a SQLite
    file or a PostgreSQL server (``Store("postgresql://user@host/dbname")``). Every method opens
    the store for that call; a missing file (or an empty server database) is an empty store."""

    def __init__(self, path=None):
        self._s = _einsumdb.Store(_db(path))

    @property
    def path(self):
        return self._s.path

    def top_k(self, spec, k=5, exact=False, machine=None, shapes=None, batch=None, dtype=None):
        """The k fastest verified transforms (Answers) for the spec on this machine (or ``machine``: a
        fingerprint, its 12-digit prefix, or ``"model=NAME"``), highest rate first, parameters in
        the spec's own names. Each answer's ``match`` says what answered: ``"exact"``, a
        ``"symbolic"`` form of a concrete spec (with its ``binding``), or, unless ``exact``, the
        ``"nearest"`` measured size."""
        return self._s.top_k(_spec(spec, shapes, batch, dtype), int(k), bool(exact),
                             machine or "")

    def best(self, spec, exact=False, machine=None, shapes=None, batch=None, dtype=None):
        """The fastest verified transform for the spec (an Answer), or None when nothing is
        known."""
        answers = self.top_k(spec, 1, exact, machine, shapes, batch, dtype)
        return answers[0] if answers else None

    def best_many(self, specs, exact=False, machine=None):
        """``best`` of many specs at once (spec JSON, dicts or text), in their order: ``None``
        where nothing is known. One open store and one read transaction for them all: what a
        framework asking for many shapes at once should call."""
        texts = [_spec(s) for s in specs]
        return self._s.best_many(texts, bool(exact), machine or "")

    def show(self, spec_or_hash, shapes=None, batch=None, dtype=None):
        """Every measurement of one workload (spec, hash, or the hash's 12-digit prefix), all
        machines."""
        if isinstance(spec_or_hash, str) and 4 <= len(spec_or_hash) <= 32 and \
                all(c in "0123456789abcdef" for c in spec_or_hash):
            return self._s.show(spec_or_hash)
        return self._s.show(_spec(spec_or_hash, shapes, batch, dtype))

    def list(self, machine="", strategy="", since="", limit=0):
        """The workloads (Workloads) with their counts, best GFLOP/s and strategy."""
        return self._s.list(machine, strategy, since, int(limit))

    def stats(self):
        """What the store holds."""
        return self._s.stats()

    def record(self, measurements, label=""):
        """Records measurements (dicts as ``einsumdb record`` reads them: spec, transform,
        seconds, status, max_rel_err, ...), all checked before any is written."""
        return self._s.record(list(measurements), label)

    def export(self):
        """Every measurement as a dict (the lines of ``einsumdb export``)."""
        return [_json.loads(line) for line in self._s.export_lines().splitlines() if line]

    def import_feinsum(self, path):
        """Imports Feinsum's fact database (FEINSUM_TIMING_FACTS of an SQLite file) as verified
        measurements; idempotent. Returns the counts."""
        return self._s.import_feinsum(str(path))

    def import_(self, rows, source="python"):
        """Merges exported rows (dicts or JSON lines) in one transaction; returns the counts."""
        text = "\n".join(r if isinstance(r, str) else _json.dumps(r) for r in rows)
        return self._s.import_lines(text, source)


def _progress_bar(total_hint):
    """A callback drawing progress on a terminal (tqdm when installed), else None."""
    if not _sys.stderr.isatty():
        return None, None
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    state = {"bar": None}

    def update(done, total, strategy, status, best_gflops):
        if tqdm is not None:
            if state["bar"] is None:
                state["bar"] = tqdm(total=total, desc="tune", unit="candidate", file=_sys.stderr)
            bar = state["bar"]
            bar.update(done - bar.n)
            best = "" if best_gflops is None else f" best {best_gflops:.2f} GFLOP/s"
            bar.set_postfix_str(f"{strategy}: {status}{best}")
        else:
            _sys.stderr.write(f"\r[{done}/{total}] {strategy}: {status}")
            _sys.stderr.flush()

    def close():
        if state["bar"] is not None:
            state["bar"].close()
        elif tqdm is None:
            _sys.stderr.write("\n")

    return update, close


def tune(spec, shapes=None, batch=None, dtype=None, db=None, budget=None, threads=(1,),
         strategies=(), warmup=5, min_reps=20, min_time=2.0, time_limit=60.0, seed=1, label="",
         progress=None):
    """Measures the applicable transforms of a workload on this machine, verifies each against
    the reference, and records every candidate in the store; returns the TuneReport.

    ``time_limit`` bounds the tune of a workload large enough to be probed (more than 2^27 loop
    iterations): at that many seconds the search stops once one candidate is measured, and the
    candidates not reached are not recorded (``report["not_measured"]``); 0 removes the limit.

    A progress bar is drawn on a terminal (``progress=False`` turns it off; a callable
    ``progress(done, total, strategy, status, best_gflops)`` replaces it). Ctrl-C stops after the
    current candidate: what was measured is kept, then KeyboardInterrupt is raised.
    """
    close = None
    if progress is None or progress is True:
        progress, close = _progress_bar(None)
    elif progress is False:
        progress = None
    try:
        report = _einsumdb.tune(
            _spec(spec, shapes, batch, dtype), _db(db),
            None if budget is None else float(budget), [int(t) for t in threads],
            [str(s) for s in strategies], int(warmup), int(min_reps), float(min_time),
            float(time_limit), int(seed),
            label, progress)
    finally:
        if close is not None:
            close()
    if report.interrupted:
        raise KeyboardInterrupt(
            f"einsumdb.tune interrupted: {report.measured} of {report.candidates} "
            f"candidates measured and recorded (run {report.run})")
    return report


def plan(graph, procs, method="eindecomp"):
    """Plans a graph of einsums (EinGraph JSON as a dict or text) for ``procs`` processes:
    contraction orders and EinDecomp partition vectors, with block placement; the plan file of
    ``einsumdb plan --output`` as a dict."""
    return _einsumdb.plan(graph, int(procs), method)


def machine():
    """This machine's fingerprint and description, as the store files facts under it."""
    return _einsumdb.machine()


def strategies():
    """The execution strategies this build knows."""
    return [s.strip() for s in _einsumdb.strategies().split(",")]
