"""A strict stand-in for CuPy, so that every test run proves the device discipline without a GPU.

The package promises one code path for CPU and GPU: ops and layers ask the
backend for ``xp`` and never call NumPy on their arrays. On a machine without a
GPU nothing checks that promise -- a stray ``numpy.asarray`` inside an op works
on the CPU and breaks only on CuPy, in front of a student. This module is the
check. It plays CuPy at the host-device boundary:

* its arrays (``ndarray``) live "on the device": ``backend.get_device`` says
  ``"cuda"`` for them;
* they refuse to become NumPy arrays implicitly -- ``numpy.asarray(x)``,
  ``x.__array__()``, a NumPy function or ufunc given one, NumPy arithmetic
  with a host array -- with the ``TypeError`` CuPy raises; the way home is
  explicit: ``asnumpy(x)``, ``x.get()``, ``x.item()``, ``x.tolist()``,
  ``float(x)`` of a single value (CuPy allows these, and so does the double);
* the module offers only the names CuPy really has: every function, ufunc
  method, array method, ``random`` and ``linalg`` name is checked against
  tests/cupy_names.json, read from an installed CuPy by tools/cupy_names.py;
* where CuPy differs from NumPy in a way our code meets, it follows CuPy: a
  repeated-index add is ``cupyx.scatter_add``; an integer-array index out of
  range wraps around instead of raising; ``random.RandomState`` draws
  with a ``dtype``; ``einsum`` takes no ``out``/``order``/``casting`` and only
  ``optimize=False`` or an explicit path; a reduction or a scalar index gives a
  0-d device array, not a host scalar.

It is *stricter* than CuPy in one place on purpose: CuPy quietly serves some
NumPy functions given a device array (``numpy.exp(x)`` runs on the GPU through
``__array_ufunc__``), the double refuses them all, because the house rule is
``xp = xp_of(x)`` and a NumPy call that happens to dispatch today is one that
does not tomorrow.

Every trip from device to host is counted in ``host_syncs`` (a GPU waits for
its queue to drain at each one), so a test can say how many a training step
makes.

Use it through ``on_device_double(monkeypatch)``: the backend's CuPy slots
(``backend._cupy``, ``backend._cupyx``) get the double, the default device
becomes ``"cuda"``, and everything is put back after the test. Under the double,
"cuda" *means* the double, so the code paths a GPU takes are the ones tested.
"""
from __future__ import annotations

import collections
import json
import types
from pathlib import Path

import numpy

NAMES = json.loads((Path(__file__).with_name("cupy_names.json")).read_text())

# CuPy's own words for an implicit conversion (cupy/_core/core.pyx, ndarray.__array__).
IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly.")

host_syncs: collections.Counter = collections.Counter()   # kind of trip home -> how many


def _unsupported(value) -> TypeError:
    return TypeError(f"Unsupported type {type(value)}")    # CuPy's message for a host array operand


def _to_host_args(value, host_data_ok: bool = False):
    """The NumPy arrays under ``value`` (recursing into lists, tuples, dicts) for the call underneath.

    A host array where CuPy wants a device array is refused as CuPy refuses it;
    ``host_data_ok`` is for the few places CuPy accepts host data (``asarray``,
    an index, a value to store), a copy host -> device.
    """
    if isinstance(value, ndarray):
        return value._host
    if isinstance(value, numpy.ndarray):
        if not host_data_ok:
            raise _unsupported(value)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host_args(v, host_data_ok) for v in value)
    if isinstance(value, dict):
        return {k: _to_host_args(v, host_data_ok) for k, v in value.items()}
    return value


def _on_device(value):
    """Results stay on the device: NumPy arrays and NumPy scalars become (0-d) device arrays."""
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        return ndarray._adopt(numpy.asarray(value))
    if isinstance(value, tuple):
        return tuple(_on_device(v) for v in value)
    if isinstance(value, list):
        return [_on_device(v) for v in value]
    return value


class ndarray:  # noqa: N801 - named as CuPy names it
    """An array "on the device": the data sit in a NumPy array nobody else may touch."""

    __slots__ = ("_host",)
    __array_priority__ = 100

    def __init__(self, shape, dtype=float):
        self._host = numpy.empty(shape, dtype)

    @classmethod
    def _adopt(cls, host: numpy.ndarray) -> ndarray:
        array = object.__new__(cls)
        array._host = host
        return array

    # -- the boundary: no implicit trip to the host ------------------------------------
    def __array__(self, *args, **kwargs):
        raise TypeError(IMPLICIT)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        others = [x for x in inputs if x is not self]
        if method == "__call__" and ufunc.nin == 2 and not kwargs and len(others) == 1 \
                and isinstance(others[0], numpy.generic):
            # `numpy.float32(2) * x`: a NumPy scalar on the left of an operator. CuPy serves it.
            return _on_device(ufunc(*(x._host if x is self else x for x in inputs)))
        raise TypeError(f"numpy.{ufunc.__name__} was given a device array: {IMPLICIT} "
                        "(in the package: xp = backend.xp_of(x))")

    def __array_function__(self, func, types, args, kwargs):
        raise TypeError(f"numpy.{func.__name__} was given a device array: {IMPLICIT} "
                        "(in the package: xp = backend.xp_of(x))")

    # -- explicit trips home: allowed, counted ------------------------------------------
    def get(self) -> numpy.ndarray:
        host_syncs["get"] += 1
        return self._host.copy()

    def set(self, host) -> None:
        self._host[...] = host

    def item(self):
        host_syncs["item"] += 1
        return self._host.item()

    def tolist(self):
        host_syncs["tolist"] += 1
        return self._host.tolist()

    def __float__(self):
        host_syncs["float"] += 1
        return float(self._host)          # a non-scalar raises NumPy's TypeError, as on CuPy

    def __int__(self):
        host_syncs["int"] += 1
        return int(self._host)

    def __complex__(self):
        host_syncs["complex"] += 1
        return complex(self._host)

    def __bool__(self):
        host_syncs["bool"] += 1
        return bool(self._host)

    def __format__(self, spec):
        host_syncs["format"] += 1
        return format(self._host.item() if self._host.ndim == 0 else self._host, spec)

    def __repr__(self):
        return repr(self._host)           # CuPy prints like NumPy: array([...])

    def __str__(self):
        return str(self._host)

    # -- the array protocol CuPy offers -------------------------------------------------
    def __len__(self):
        return len(self._host)

    def __iter__(self):
        for row in self._host:
            yield _on_device(row)

    def __getitem__(self, key):
        key = _to_host_args(key, host_data_ok=True)
        if any(getattr(k, "dtype", None) == bool for k in (key if isinstance(key, tuple) else (key,))):
            host_syncs["boolean index"] += 1     # the result's size depends on the data: CuPy waits for it
        return _on_device(self._host[_wrap_like_cupy(self._host.shape, key)])

    def __setitem__(self, key, value):
        key = _wrap_like_cupy(self._host.shape, _to_host_args(key, host_data_ok=True))
        self._host[key] = _to_host_args(value, host_data_ok=True)

    def __copy__(self):
        return ndarray._adopt(self._host.copy())

    def __deepcopy__(self, memo):
        return ndarray._adopt(self._host.copy())

    __hash__ = None

    def __getattr__(self, name):
        # Only what cupy.ndarray has; `data` there is a device pointer, never host memory.
        if name not in NAMES["ndarray"] or name in ("data", "flat", "ctypes"):
            raise AttributeError(f"cupy.ndarray has no attribute {name!r} (device double)")
        if name in ("tobytes", "tofile", "dump", "dumps"):
            host_syncs[name] += 1
        attribute = getattr(self._host, name)
        if not callable(attribute):
            return _on_device(attribute)

        def method(*args, **kwargs):
            return _on_device(attribute(*_to_host_args(args), **_to_host_args(kwargs)))
        return method

    @property
    def device(self):
        return _DEVICE

    def scatter_add(self, slices, value):
        cupyx.scatter_add(self, slices, value)


def _wrap_like_cupy(shape: tuple, key):
    """CuPy wraps an out-of-range integer-array index around instead of raising IndexError (one of its
    documented differences from NumPy): ``x[[3]]`` of a length-3 ``x`` reads ``x[0]``. So only our own
    range checks stand between a bad id and a wrong row; the double wraps too, so the tests see that."""
    keys = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis or k is None or getattr(k, "dtype", None) == bool for k in keys):
        return key                                  # axes no longer line up one to one: leave as is
    wrapped = tuple(numpy.mod(k, shape[axis]) if isinstance(k, numpy.ndarray) and k.dtype.kind in "iu"
                    and axis < len(shape) and shape[axis] > 0 else k for axis, k in enumerate(keys))
    return wrapped if isinstance(key, tuple) else wrapped[0]


class _Device:
    """What ``cupy.ndarray.device`` is: the GPU the array lives on (never NumPy's "cpu")."""

    id = 0

    def __repr__(self):
        return "<CUDA Device 0>"


_DEVICE = _Device()


def _operand(other):
    if isinstance(other, ndarray):
        return other._host
    if isinstance(other, (numpy.ndarray, list)):
        raise _unsupported(other)         # host data in device arithmetic: CuPy refuses
    if isinstance(other, (bool, int, float, complex, numpy.generic)):
        return other
    return NotImplemented


def _binary(name):
    def method(self, other):
        other = _operand(other)
        if other is NotImplemented:
            return NotImplemented
        return _on_device(getattr(self._host, name)(other))
    method.__name__ = name
    return method


def _in_place(name):
    def method(self, other):
        other = _operand(other)
        if other is NotImplemented:
            return NotImplemented
        getattr(self._host, name)(other)
        return self
    method.__name__ = name
    return method


def _unary(name):
    def method(self):
        return _on_device(getattr(self._host, name)())
    method.__name__ = name
    return method


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
            "lshift", "rshift", "divmod"):
    setattr(ndarray, f"__{_op}__", _binary(f"__{_op}__"))
    setattr(ndarray, f"__r{_op}__", _binary(f"__r{_op}__"))
    if _op != "divmod":
        setattr(ndarray, f"__i{_op}__", _in_place(f"__i{_op}__"))
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(ndarray, f"__{_op}__", _binary(f"__{_op}__"))
for _op in ("neg", "pos", "abs", "invert"):
    setattr(ndarray, f"__{_op}__", _unary(f"__{_op}__"))


# -- functions and ufuncs ---------------------------------------------------------------
UPLOADS = {"array", "asarray", "asanyarray", "ascontiguousarray"}   # CuPy takes host data here


def _function(name: str, numpy_function, host_data_ok: bool = False):
    def function(*args, **kwargs):
        return _on_device(numpy_function(*_to_host_args(args, host_data_ok), **_to_host_args(kwargs, host_data_ok)))
    function.__name__ = name
    function.__qualname__ = name
    return function


def _counting_sync(name: str, function):
    """Functions whose output size depends on the data: on CuPy they wait for the device."""
    def counted(*args, **kwargs):
        host_syncs[name] += 1
        return function(*args, **kwargs)
    counted.__name__ = name
    return counted


DATA_SIZED = {"nonzero", "flatnonzero", "argwhere", "unique", "compress", "extract"}


def einsum(subscripts, *operands, dtype=None, optimize=False, **kwargs):
    """CuPy's einsum: no out/order/casting, and optimize only False or an explicit contraction path."""
    if kwargs:
        raise TypeError(f"cupy.einsum does not take {sorted(kwargs)} (only dtype and optimize)")
    if not (optimize is False or isinstance(optimize, (list, tuple))):
        raise TypeError(f"cupy.einsum supports optimize=False or an explicit path, not {optimize!r}")
    return _on_device(numpy.einsum(subscripts, *_to_host_args(operands), dtype=dtype,
                                   optimize=False if optimize is False else list(optimize)))


class ufunc:  # noqa: N801
    """A NumPy ufunc that takes and gives device arrays, with only the methods CuPy's ufuncs have."""

    def __init__(self, numpy_ufunc):
        self._ufunc = numpy_ufunc
        self.name = self.__name__ = numpy_ufunc.__name__
        self.nin, self.nout = numpy_ufunc.nin, numpy_ufunc.nout

    def __call__(self, *args, **kwargs):
        return _on_device(self._ufunc(*_to_host_args(args), **_to_host_args(kwargs)))

    def __getattr__(self, name):
        if name not in NAMES["ufunc_methods"] or not hasattr(self._ufunc, name):
            raise AttributeError(f"cupy.ufunc has no attribute {name!r} (device double)")
        return _function(f"{self.name}.{name}", getattr(self._ufunc, name))


def _numpy_member(namespace_name: str, name: str, numpy_namespace):
    """The double's version of ``cupy[.namespace].name``, from NumPy, if CuPy has the name."""
    if name not in NAMES[namespace_name] or not hasattr(numpy_namespace, name):
        prefix = "cupy" if namespace_name == "cupy" else f"cupy.{namespace_name}"
        raise AttributeError(f"module {prefix!r} has no attribute {name!r} (device double)")
    value = getattr(numpy_namespace, name)
    if isinstance(value, numpy.ufunc):
        return ufunc(value)
    if isinstance(value, type) or not callable(value):
        return value                      # dtypes, exceptions, constants: CuPy shares NumPy's
    function = _function(name, value, host_data_ok=name in UPLOADS)
    return _counting_sync(name, function) if name in DATA_SIZED else function


# -- random: CuPy's generators and their methods -----------------------------------------
def _draw(numpy_method, args, kwargs):
    """Call a NumPy draw the way CuPy's takes it: CuPy's draws take a ``dtype`` that some of NumPy's lack."""
    dtype = kwargs.pop("dtype", None)
    try:
        values = numpy_method(*args, **kwargs, **({} if dtype is None else {"dtype": dtype}))
    except TypeError as error:
        if dtype is None or "dtype" not in str(error):
            raise
        values = numpy.asarray(numpy_method(*args, **kwargs)).astype(dtype)
    return _on_device(values)


class _Stream:
    """A CuPy random generator: only the methods the CuPy class has, draws land on the device."""

    _names_key = ""

    def __init__(self, numpy_stream):
        self._stream = numpy_stream

    def __getattr__(self, name):
        if name.startswith("_") or name not in NAMES[self._names_key]:
            raise AttributeError(f"cupy.random.{type(self).__name__} has no attribute {name!r} (device double)")
        numpy_method = getattr(self._stream, name)
        return lambda *args, **kwargs: _draw(numpy_method, args, dict(kwargs))


class Generator(_Stream):
    _names_key = "random_generator"


class RandomState(_Stream):
    _names_key = "random_state"

    def __init__(self, seed=None):
        super().__init__(numpy.random.RandomState(seed))


class _Namespace(types.ModuleType):
    def __init__(self, name: str, names_key: str, numpy_namespace, extra: dict):
        super().__init__(name)
        self._names_key, self._numpy = names_key, numpy_namespace
        self.__dict__.update(extra)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _numpy_member(self._names_key, name, self._numpy)
        setattr(self, name, value)
        return value


random = _Namespace("cupy.random", "random", numpy.random, {
    "default_rng": lambda seed=None: Generator(numpy.random.default_rng(seed)),
    "Generator": Generator,
    "RandomState": RandomState,
})
for _name in NAMES["random"]:   # module-level draws (rand, randn, ...) also take CuPy's dtype
    _numpy_draw = getattr(numpy.random, _name, None)
    if _name not in random.__dict__ and callable(_numpy_draw) and not isinstance(_numpy_draw, type):
        setattr(random, _name, (lambda f: lambda *a, **k: _draw(f, a, dict(k)))(_numpy_draw))
linalg = _Namespace("cupy.linalg", "linalg", numpy.linalg, {})


def asnumpy(array, *args, **kwargs) -> numpy.ndarray:
    if isinstance(array, ndarray):
        host_syncs["asnumpy"] += 1
        return array._host.copy()
    return numpy.asarray(array)


def get_array_module(*arrays):
    return cupy if any(isinstance(a, ndarray) for a in arrays) else numpy


cupy = _Namespace("cupy (device double)", "cupy", numpy, {
    "ndarray": ndarray, "ufunc": ufunc, "random": random, "linalg": linalg, "einsum": einsum,
    "asnumpy": asnumpy, "get_array_module": get_array_module, "__version__": NAMES["cupy_version"],
})


def _scatter_add(target, slices, value) -> None:
    """cupyx.scatter_add: ``target[slices] += value`` where repeated indices accumulate."""
    if not isinstance(target, ndarray):
        raise TypeError(f"cupyx.scatter_add: target must be a cupy.ndarray, not {type(target).__name__}")
    numpy.add.at(target._host, _to_host_args(slices, host_data_ok=True), _to_host_args(value))


cupyx = types.ModuleType("cupyx (device double)")
cupyx.scatter_add = _scatter_add


def on_device_double(monkeypatch, default_device: str = "cuda") -> types.ModuleType:
    """Put the double in the backend's CuPy slots and make ``default_device`` the default, until the test ends."""
    from minitransformer import backend  # noqa: PLC0415

    monkeypatch.setattr(backend, "_cupy", cupy)
    monkeypatch.setattr(backend, "_cupyx", cupyx)
    monkeypatch.setattr(backend, "_default_device", default_device)
    host_syncs.clear()
    return cupy
