from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

import numpy as np
import numpy.typing as npt

Spec = Union[str, Dict[str, Any]]
Shapes = Mapping[str, Sequence[Union[int, str]]]

class Error(Exception): ...
class SpecError(Error, ValueError): ...
class DatabaseError(Error): ...

NATIVE_DTYPES: Tuple[np.dtype, ...]

class _Typed:
    """Fields as attributes; also a read-only mapping over them."""
    _fields: Tuple[str, ...]
    def __getitem__(self, key: str) -> Any: ...
    def __contains__(self, key: object) -> bool: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def keys(self) -> List[str]: ...
    def get(self, key: str, default: Any = ...) -> Any: ...
    def as_dict(self) -> Dict[str, Any]: ...

class Answer(_Typed):
    transform: str
    params: Dict[str, Any]
    match: str
    approximate: bool
    distance: Optional[float]
    binding: Optional[Dict[str, int]]
    measured_on: Optional[Dict[str, str]]
    median_s: float
    min_s: float
    gflops: Optional[float]
    flops: Optional[float]
    measured_at: List[Dict[str, int]]
    measurements: int
    repetitions: int
    machine: str
    hash: str
    key: str
    canonical_params: Dict[str, Any]
    origin: Optional[Dict[str, Any]]

class CanonicalForm(_Typed):
    key: str
    hash: str
    structure_key: str
    structure_hash: str
    canonical: Dict[str, Any]
    sigma: Dict[str, Dict[str, Any]]

class Choice(_Typed):
    strategy: str
    params: Dict[str, Any]
    source: str
    reason: str
    stored: bool
    distance: float

class TuneResult(_Typed):
    strategy: str
    params: Dict[str, Any]
    status: str
    median_s: Optional[float]
    repetitions: int
    seconds: List[float]
    search_median_s: Optional[float]
    gflops: Optional[float]
    max_rel_err: Optional[float]
    error: Optional[str]

class TuneReport(_Typed):
    workload: Dict[str, str]
    run: int
    oracle: str
    binding: Optional[Dict[str, int]]
    candidates: int
    measured: int
    probed: int
    interrupted: bool
    budget_exhausted: bool
    time_limit_reached: bool
    not_measured: int
    results: List[TuneResult]
    best: Optional[TuneResult]

class Workload(_Typed):
    hash: str
    key: str
    measurements: int
    ok: int
    best_gflops: Optional[float]
    best_strategy: str
    last_recorded: str

def einsum(*operands: Any, out: Optional[np.ndarray] = ..., dtype: npt.DTypeLike = ...,
           order: str = ..., casting: str = ..., optimize: Any = ...,
           db: Optional[str] = ..., threads: int = ..., transform: Optional[str] = ...,
           params: Optional[Mapping[str, Any]] = ...) -> Any: ...
def tensordot(a: npt.ArrayLike, b: npt.ArrayLike,
              axes: Union[int, Tuple[Sequence[int], Sequence[int]]] = ...) -> np.ndarray: ...
def transpose(a: npt.ArrayLike, axes: Optional[Sequence[int]] = ...) -> np.ndarray: ...
def batched_einsum(subscripts: str, rows: Sequence[Sequence[npt.ArrayLike]],
                   db: Optional[str] = ..., threads: int = ...) -> List[np.ndarray]: ...

class Expression:
    subscripts: str
    def __call__(self, *operands: npt.ArrayLike, out: Optional[np.ndarray] = ...) -> np.ndarray: ...
    @property
    def choice(self) -> Choice: ...

def contract_expression(subscripts: str, *shapes: Sequence[int],
                        dtype: Union[npt.DTypeLike, Sequence[npt.DTypeLike]] = ...,
                        db: Optional[str] = ..., threads: int = ...) -> Expression: ...
def canonicalize(spec: Spec, shapes: Optional[Shapes] = ...,
                 batch: Optional[Sequence[Sequence[str]]] = ...,
                 dtype: Optional[str] = ...) -> CanonicalForm: ...

class Store:
    def __init__(self, path: Optional[str] = ...) -> None: ...
    @property
    def path(self) -> str: ...
    def top_k(self, spec: Spec, k: int = ..., exact: bool = ..., machine: Optional[str] = ...,
              shapes: Optional[Shapes] = ..., batch: Optional[Sequence[Sequence[str]]] = ...,
              dtype: Optional[str] = ...) -> List[Answer]: ...
    def best(self, spec: Spec, exact: bool = ..., machine: Optional[str] = ...,
             shapes: Optional[Shapes] = ..., batch: Optional[Sequence[Sequence[str]]] = ...,
             dtype: Optional[str] = ...) -> Optional[Answer]: ...
    def best_many(self, specs: Iterable[Spec], exact: bool = ...,
                  machine: Optional[str] = ...) -> List[Optional[Answer]]: ...
    def show(self, spec_or_hash: Spec, shapes: Optional[Shapes] = ...,
             batch: Optional[Sequence[Sequence[str]]] = ...,
             dtype: Optional[str] = ...) -> List[Dict[str, Any]]: ...
    def list(self, machine: str = ..., strategy: str = ..., since: str = ...,
             limit: int = ...) -> List[Workload]: ...
    def stats(self) -> Dict[str, Any]: ...
    def record(self, measurements: Iterable[Union[str, Dict[str, Any]]],
               label: str = ...) -> Dict[str, Any]: ...
    def export(self) -> List[Dict[str, Any]]: ...
    def import_feinsum(self, path: str) -> Dict[str, Any]: ...
    def import_(self, rows: Iterable[Union[str, Dict[str, Any]]],
                source: str = ...) -> Dict[str, Any]: ...

def tune(spec: Spec, shapes: Optional[Shapes] = ..., batch: Optional[Sequence[Sequence[str]]] = ...,
         dtype: Optional[str] = ..., db: Optional[str] = ..., budget: Optional[float] = ...,
         threads: Sequence[int] = ..., strategies: Sequence[str] = ..., warmup: int = ...,
         min_reps: int = ..., min_time: float = ..., time_limit: float = ..., seed: int = ...,
         label: str = ...,
         progress: Union[None, bool, Callable[[int, int, str, str, Optional[float]], None]] = ...
         ) -> TuneReport: ...
def plan(graph: Union[str, Dict[str, Any]], procs: int, method: str = ...) -> Dict[str, Any]: ...
def machine() -> Dict[str, Any]: ...
def strategies() -> List[str]: ...
