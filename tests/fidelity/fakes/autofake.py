"""Permissive stand-ins for the heavy packages OpenRLHF imports (torch, deepspeed, vllm, ...).

`install()` puts an import hook first on `sys.meta_path` that answers every import under the names
in `FAKED` with a `Fake`: a module, function and value at once. Any attribute of a Fake is another
Fake (a capitalised one is a real class, so that it can be subclassed, used in `isinstance` and in
`X | None`); calling a Fake returns a Fake, or hands back the function it decorates.

A Fake refuses to be a number, a truth value or a container: such uses raise `HarnessError`
from this file, so a failure it causes is never mistaken for OpenRLHF rejecting a config. Where
the trainer needs a real value (a version string, a device count) it is listed in `VALUES`.
A second hook, last on `sys.meta_path`, fakes any other third-party module that is not installed,
and any `ray.*` submodule that the hand-written fake `ray` lacks.
"""

from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

FAKED = frozenset(
    {
        "PIL",
        "accelerate",
        "aiohttp",
        "bitsandbytes",
        "datasets",
        "deepspeed",
        "einops",
        "fastapi",
        "flash_attn",
        "huggingface_hub",
        "jsonlines",
        "latex2sympy2",
        "liger_kernel",
        "loralib",
        "math_verify",
        "modelscope",
        "numpy",
        "openai",
        "optimum",
        "peft",
        "pylatexenc",
        "pynvml",
        "requests",
        "ring_flash_attn",
        "safetensors",
        "scipy",
        "sympy",
        "tensorboard",
        "torch",
        "torchdata",
        "torchmetrics",
        "tqdm",
        "transformers",
        "transformers_stream_generator",
        "uvicorn",
        "vllm",
        "wandb",
    }
)

# Real values for the attributes where the trainer's driver code needs one; the runner adds the
# versions pinned by the release under test (`vllm.__version__`, ...).
VALUES: dict[str, Any] = {
    "torch.__version__": "2.8.0",
    "torch.cuda.is_available": lambda: True,
    "torch.cuda.device_count": lambda: 8,
    "torch.distributed.is_initialized": lambda: False,
    "torch.distributed.is_available": lambda: True,
}

# Every misuse seen, even one that OpenRLHF code caught and swallowed.
incidents: list[str] = []


class HarnessError(Exception):
    """A fake was used in a way it cannot answer: a gap in the harness, not a verdict of OpenRLHF."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        incidents.append(message)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _refuse(what: str) -> Callable[..., Any]:
    def refuse(self: Any, *args: Any) -> Any:
        raise HarnessError(f"fake {self!r} used as {what}; give it a real value in autofake.VALUES")

    return refuse


def _child(parent: str, attr: str) -> Any:
    full = f"{parent}.{attr}"
    if full in VALUES:
        return VALUES[full]
    if _dunder(attr):
        raise AttributeError(attr)
    return fake_class(full) if attr[:1].isupper() else Fake(full)


class Fake(types.ModuleType):
    """A fake module, function or value named by its dotted path."""

    def __getattr__(self, attr: str) -> Any:
        value = _child(self.__name__, attr)
        setattr(self, attr, value)
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], (types.FunctionType, type)):
            return args[0]  # used as a decorator: keep the real function or class
        return Fake(f"{self.__name__}()")

    def __repr__(self) -> str:
        return f"<fake {self.__name__}>"

    def __enter__(self) -> Any:  # a context manager: torch.no_grad(), ...
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    __bool__ = _refuse("a truth value")
    __len__ = _refuse("a sized container")
    __iter__ = _refuse("an iterable")
    __contains__ = _refuse("a container")
    __getitem__ = _refuse("a subscriptable")
    __int__ = __float__ = __index__ = _refuse("a number")
    __lt__ = __le__ = __gt__ = __ge__ = _refuse("an ordered value")
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse("a number")
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __pow__ = _refuse("a number")


class FakeMeta(abc.ABCMeta):
    """Metaclass of the fake classes: class attributes are Fakes. An ABCMeta, so ABC mixins still work."""

    def __getattr__(cls, attr: str) -> Any:
        if _dunder(attr):
            raise AttributeError(attr)
        return _child(f"{cls.__module__}.{cls.__qualname__}", attr)

    def __repr__(cls) -> str:
        return f"<fake class {cls.__module__}.{cls.__qualname__}>"


class FakeBase(metaclass=FakeMeta):
    """Base of every fake class: accepts any constructor arguments, any attribute is a Fake."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __class_getitem__(cls, item: Any) -> type:
        return cls

    def __getattr__(self, attr: str) -> Any:
        if _dunder(attr):
            raise AttributeError(attr)
        return _child(f"{type(self).__module__}.{type(self).__qualname__}()", attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Fake(f"{type(self).__module__}.{type(self).__qualname__}()()")

    __bool__ = _refuse("a truth value")
    __len__ = _refuse("a sized container")
    __iter__ = _refuse("an iterable")
    __int__ = __float__ = __index__ = _refuse("a number")
    __lt__ = __le__ = __gt__ = __ge__ = _refuse("an ordered value")


def fake_class(full: str) -> type:
    module, _, name = full.rpartition(".")
    return FakeMeta(name, (FakeBase,), {"__module__": module, "__qualname__": name})


class FakeFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of `names` (and their submodules) with Fakes."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = set(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: object = None) -> Any:
        if fullname.partition(".")[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        parent, _, attr = spec.name.rpartition(".")
        known = vars(sys.modules[parent]).get(attr) if parent in sys.modules else None
        # `from torch import nn` may have handed out torch.nn already: `import torch.nn` must agree.
        return known if isinstance(known, Fake) else Fake(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        for key, value in VALUES.items():
            parent, _, attr = key.rpartition(".")
            if parent == module.__name__ and _dunder(attr):
                setattr(module, attr, value)


class FallbackFinder(importlib.abc.MetaPathFinder):
    """Last on `sys.meta_path`: fakes what nothing else could import (a missing third-party module, `ray.*`)."""

    def __init__(self, main: FakeFinder) -> None:
        self.main = main

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: object = None) -> Any:
        top = fullname.partition(".")[0]
        if top in sys.stdlib_module_names or top == "openrlhf" or (top != "ray" and "." in fullname):
            return None
        if top != "ray":
            self.main.names.add(top)
        return importlib.machinery.ModuleSpec(fullname, self.main, is_package=True)


_installed: FallbackFinder | None = None


def install(values: dict[str, Any] | None = None) -> FallbackFinder:
    """Put the import hooks in place (once); `values` add to or override `VALUES` (None: leave it a Fake)."""
    global _installed
    for key, value in (values or {}).items():
        if value is None:
            VALUES.pop(key, None)
        else:
            VALUES[key] = value
    if _installed is None:
        main = FakeFinder(FAKED)
        _installed = FallbackFinder(main)
        sys.meta_path.insert(0, main)
        sys.meta_path.append(_installed)
    return _installed
