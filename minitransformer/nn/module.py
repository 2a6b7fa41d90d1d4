"""Module and Parameter: how layers hold their weights (chapter 5).

A ``Parameter`` is a Tensor that requires a gradient and that a Module
registers. Assigning a Parameter or a Module to an attribute registers it
under that name, in assignment order, so

    self.w_q = Linear(512, 512)

makes ``w_q.weight`` and ``w_q.bias`` appear in ``named_parameters()``,
``state_dict()``, ``to()`` and ``zero_grad()`` without any bookkeeping in the
layer itself. Names are dotted paths: 'encoder.layers.0.self_attn.w_q.weight'.

A module owns its randomness the same way: a dropout ``Generator`` assigned to
an attribute is registered, so ``rng_state_dict()`` says where every random
stream of a model stands and ``load_rng_state_dict`` puts them back (a resumed
training run then drops exactly the units an uninterrupted one would have).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy

from .. import backend
from ..generator import Generator
from ..tensor import Tensor

_DEVICE_NAMES = ("cpu", "cuda", "gpu", "cuda:0")


class Parameter(Tensor):
    """A learnable Tensor: requires_grad=True, and registered by the Module it is assigned to.

    Built from an array, a Tensor or Python data; arrays keep their dtype, others become float32
    on the default device.
    """

    __slots__ = ()

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        if isinstance(data, Tensor):
            data = data.data
        if not backend.is_array(data):
            data = backend.xp_for(backend.default_device()).asarray(data, dtype=numpy.float32)
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("Tensor"):]


class Module:
    """Base class of every layer. Subclasses set attributes in __init__ and implement ``forward``."""

    def __init__(self) -> None:
        object.__setattr__(self, "_registry", {})   # name -> Parameter | Module, in assignment order
        object.__setattr__(self, "_buffers", {})    # name -> array (not learned; moved by to())
        object.__setattr__(self, "_generators", {})  # name -> Generator (random streams, e.g. dropout's)
        object.__setattr__(self, "training", True)

    # -- registration ---------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        registry = self.__dict__.get("_registry")
        if registry is None:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        if isinstance(value, (Parameter, Module)):
            registry[name] = value
        else:
            registry.pop(name, None)
            self.__dict__["_buffers"].pop(name, None)
        if isinstance(value, Generator):
            self.__dict__["_generators"][name] = value
        else:
            self.__dict__["_generators"].pop(name, None)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._registry.pop(name, None)
        self._buffers.pop(name, None)
        self._generators.pop(name, None)
        object.__delattr__(self, name)

    def register_buffer(self, name: str, array) -> None:
        """Keep a non-learned array (e.g. a positional table) that ``to()`` moves; not in state_dict."""
        self.__dict__["_registry"].pop(name, None)
        self._buffers[name] = True
        object.__setattr__(self, name, array)

    # -- walking the tree -------------------------------------------------------------
    def children(self) -> Iterator[Module]:
        """The direct sub-modules, in assignment order."""
        for value in self._registry.values():
            if isinstance(value, Module):
                yield value

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, value in self._registry.items():
            if isinstance(value, Module):
                yield name, value

    def modules(self) -> Iterator[Module]:
        """This module and every module below it, depth first, in assignment order."""
        yield self
        for child in self.children():
            yield from child.modules()

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module (named ``prefix``) and every module below it, depth first."""
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter) for every parameter, in assignment order; shared ones once."""
        seen: set[int] = set()
        for name, p in self._named_parameters_all(prefix):
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def _named_parameters_all(self, prefix: str) -> Iterator[tuple[str, Parameter]]:
        for name, value in self._registry.items():
            if isinstance(value, Parameter):
                yield prefix + name, value
            else:
                yield from value._named_parameters_all(prefix + name + ".")

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        """How many numbers are learned (a parameter shared by two layers counts once)."""
        return sum(p.size for p in self.parameters())

    def named_generators(self) -> Iterator[tuple[str, Generator]]:
        """(dotted name, Generator) for every random stream in this module and below, depth first,
        in assignment order; a shared one once. E.g. 'encoder.layers.0.dropout.generator'."""
        seen: set[int] = set()
        for module_name, module in self.named_modules():
            for name, generator in module._generators.items():
                if id(generator) not in seen:
                    seen.add(id(generator))
                    yield (f"{module_name}.{name}" if module_name else name), generator

    # -- modes and gradients ------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active) for this module and all below it; returns self."""
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        """Evaluation mode (dropout off); returns self."""
        return self.train(False)

    @contextmanager
    def evaluating(self) -> Iterator[Module]:
        """``with model.evaluating():`` eval mode inside the block (dropout off); afterwards every
        module is back in the mode it was in, also when the block raises."""
        modes = [(module, module.training) for module in self.modules()]
        self.eval()
        try:
            yield self
        finally:
            for module, training in modes:
                object.__setattr__(module, "training", training)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    # -- saving and loading ---------------------------------------------------------------
    def state_dict(self) -> dict[str, numpy.ndarray]:
        """{dotted name: host NumPy copy of the parameter}, in assignment order."""
        return {name: backend.asnumpy(p.data).copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict, strict: bool = True) -> Module:
        """Copy ``state`` into the parameters, casting to each parameter's dtype and device.

        Raises KeyError for missing or unexpected keys (when strict) and ValueError for a
        shape mismatch; every message names the key(s) and, for shapes, both shapes.
        """
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys {missing}")
            if unexpected:
                parts.append(f"unexpected keys {unexpected}")
            raise KeyError(f"load_state_dict: {type(self).__name__} state does not match: {'; '.join(parts)}")
        mismatched = []
        for name, p in own.items():
            if name in state:
                value = state[name]
                shape = tuple(value.shape) if hasattr(value, "shape") else numpy.shape(value)
                if shape != tuple(p.shape):
                    mismatched.append(f"'{name}': checkpoint has shape {shape}, model has shape {tuple(p.shape)}")
        if mismatched:
            raise ValueError("load_state_dict: shape mismatch for " + "; ".join(mismatched))
        for name, p in own.items():
            if name in state:
                value = state[name]
                value = value.data if isinstance(value, Tensor) else value
                host = backend.asnumpy(value).astype(p.dtype, copy=True)   # dtype of the parameter
                p.data = backend.to_device(host, p.device)
        return self

    def rng_state_dict(self) -> dict[str, dict]:
        """{dotted name: ``Generator.state_dict()``} for every random stream: JSON-ready, for checkpoints."""
        return {name: generator.state_dict() for name, generator in self.named_generators()}

    def load_rng_state_dict(self, state: dict) -> Module:
        """Put every random stream back where ``rng_state_dict()`` found it.

        Raises KeyError naming the missing or unexpected generators, and ValueError naming a
        generator whose state is not one ``Generator.state_dict()`` wrote.
        """
        if not isinstance(state, dict):
            raise TypeError(f"load_rng_state_dict: expected a dict of generator states, got {type(state).__name__}")
        own = dict(self.named_generators())
        missing, unexpected = [k for k in own if k not in state], [k for k in state if k not in own]
        if missing or unexpected:
            parts = ([f"missing generators {missing}"] if missing else []) + \
                    ([f"unexpected generators {unexpected}"] if unexpected else [])
            raise KeyError(f"load_rng_state_dict: {type(self).__name__} random state does not match: "
                           f"{'; '.join(parts)}")
        for name, generator in own.items():
            try:
                generator.load_state_dict(state[name])
            except (ValueError, TypeError, KeyError) as error:
                raise ValueError(f"load_rng_state_dict: generator '{name}': {error}") from None
        return self

    # -- device and dtype ---------------------------------------------------------------
    def to(self, target) -> Module:
        """Move ('cpu'/'cuda') or cast (a float dtype) every parameter and buffer IN PLACE; returns self.

        Optimizers keep references to the Parameter objects, which stay the same.
        """
        if isinstance(target, str) and target.lower() in _DEVICE_NAMES:
            convert = lambda array: backend.to_device(array, target)   # noqa: E731
        else:
            dtype = numpy.dtype(target)
            if dtype.kind != "f":
                raise TypeError(f"Module.to: parameters must stay floating point, got dtype {dtype}")

            def convert(array):
                return array.astype(dtype) if array.dtype.kind == "f" else array
        for p in self.parameters():
            p.data = convert(p.data)
            if p.grad is not None:
                p.grad = convert(p.grad)
        for module in self.modules():
            for name in module._buffers:
                array = getattr(module, name)
                if backend.is_array(array):
                    object.__setattr__(module, name, convert(array))
        return self

    # -- calling and printing ---------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        """The constructor arguments shown by repr(); layers override it."""
        return ""

    def __repr__(self) -> str:
        children = list(self.named_children())
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in children:
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        lines.append(")")
        return "\n".join(lines)


def counts_by_part(module: Module, parts: Iterable[str], renamed: dict[str, str]) -> dict[str, int]:
    """Learned numbers per part of a model, for its parameter report. A parameter belongs to the part its
    top-level name says ('encoder.cells.0.bias' to 'encoder'), or to ``renamed[top-level name]``."""
    counts = {part: 0 for part in parts}
    for name, p in module.named_parameters():
        top = name.split(".")[0]
        counts[renamed.get(top, top)] += p.size
    return counts


def parts_table(counts: dict[str, int], notes: dict[str, str]) -> str:
    """The parameter report: one line per part with its count and a note, then the total."""
    lines = [f"{'part':<12}{'parameters':>14}  note"]
    for part, count in counts.items():
        lines.append(f"{part:<12}{count:>14,}  {notes[part]}")
    lines.append(f"{'total':<12}{sum(counts.values()):>14,}")
    return "\n".join(lines)


class ModuleList(Module):
    """A list of modules whose parameters are registered as '0', '1', ... (e.g. the N = 6 layers)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__} holds Modules, got {type(module).__name__}")
        setattr(self, str(len(self._registry)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for module in modules:
            self.append(module)
        return self

    def __len__(self) -> int:
        return len(self._registry)

    def __getitem__(self, index: int) -> Module:
        return list(self.children())[index]

    def __iter__(self) -> Iterator[Module]:
        return self.children()

    def forward(self, *args, **kwargs):
        raise TypeError("ModuleList is a container, not a layer: iterate over it and call each module")


class Sequential(ModuleList):
    """Modules applied one after another: Sequential(a, b, c)(x) = c(b(a(x)))."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def forward(self, x):
        for module in self.children():
            x = module(x)
        return x
