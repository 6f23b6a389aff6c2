"""A fake `ray` that records what the trainer asks of it and runs nothing.

Recorded, in call order: `placement_groups` (bundles and strategy) and `actors` (class, resources,
scheduling). `ray.get` of a placement group's `ready()` returns at once; a remote function runs
in-process; an actor method call yields a Fake (or a canned value in `METHOD_RESULTS`).
`reset()` clears the record between two runs in one process.
"""

from __future__ import annotations

from typing import Any

from autofake import Fake, HarnessError

__version__ = "2.55.0"

placement_groups: list[dict[str, Any]] = []
actors: list[dict[str, Any]] = []
init_calls: list[dict[str, Any]] = []

# Actor methods whose result the driver unpacks.
METHOD_RESULTS: dict[str, Any] = {"get_master_addr_port": ("10.0.0.1", 29500)}
ENGINE_MARKERS = ("LLM", "Rollout", "Engine")


def reset() -> None:
    placement_groups.clear()
    actors.clear()
    init_calls.clear()


def jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    from ray.util.placement_group import PlacementGroup

    if isinstance(value, PlacementGroup):
        return {"placement_group": value.index}
    return f"<{type(value).__name__}>"


class ObjectRef:
    def __init__(self, value: Any) -> None:
        self.value = value


def is_initialized() -> bool:
    return bool(init_calls)


def init(*args: Any, **kwargs: Any) -> None:
    init_calls.append(jsonable(kwargs))


def shutdown() -> None:
    pass


def get(refs: Any, timeout: float | None = None) -> Any:
    if isinstance(refs, (list, tuple)):
        return [get(ref) for ref in refs]
    if not isinstance(refs, ObjectRef):
        raise HarnessError(f"fake ray.get() of {refs!r}, not an ObjectRef")
    return refs.value


def put(value: Any) -> ObjectRef:
    return ObjectRef(value)


def wait(refs: list[ObjectRef], num_returns: int = 1, timeout: float | None = None, **kwargs: Any) -> Any:
    return list(refs[:num_returns]), list(refs[num_returns:])


def kill(actor: Any, no_restart: bool = True) -> None:
    pass


def cancel(ref: Any, **kwargs: Any) -> None:
    pass


def get_gpu_ids() -> list[int]:
    return [0]


class RemoteFunction:
    def __init__(self, func: Any, options: dict[str, Any]) -> None:
        self._func = func
        self._options = options

    def options(self, **options: Any) -> RemoteFunction:
        return RemoteFunction(self._func, {**self._options, **options})

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        return ObjectRef(self._func(*args, **kwargs))


class ActorMethod:
    def __init__(self, cls: type, name: str) -> None:
        self._cls = cls
        self._name = name

    def options(self, **options: Any) -> ActorMethod:
        return self

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        if self._name in METHOD_RESULTS:
            return ObjectRef(METHOD_RESULTS[self._name])
        return ObjectRef(Fake(f"ray.get({self._cls.__name__}.{self._name}.remote())"))


class ActorHandle:
    def __init__(self, cls: type, index: int) -> None:
        self._cls = cls
        self._index = index

    def __getattr__(self, name: str) -> ActorMethod:
        if name.startswith("__"):
            raise AttributeError(name)
        if not callable(getattr(self._cls, name, None)):
            raise HarnessError(f"fake actor {self._cls.__name__} has no method {name}")
        return ActorMethod(self._cls, name)


class ActorClass:
    def __init__(self, cls: type, options: dict[str, Any]) -> None:
        self._cls = cls
        self._options = options
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__module__ = cls.__module__
        self.__doc__ = cls.__doc__

    def options(self, **options: Any) -> ActorClass:
        return ActorClass(self._cls, {**self._options, **options})

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle:
        options = self._options
        strategy = options.get("scheduling_strategy")
        pg = getattr(strategy, "placement_group", None)
        name = self._cls.__name__
        actors.append(
            {
                "class": name,
                "engine": any(marker in name for marker in ENGINE_MARKERS),
                "num_gpus": options.get("num_gpus"),
                "num_cpus": options.get("num_cpus"),
                "resources": jsonable(options.get("resources")),
                "placement_group": pg.index if pg is not None else None,
                "bundle_index": getattr(strategy, "placement_group_bundle_index", None) if pg is not None else None,
                "args": jsonable(args),
                "kwargs": jsonable(kwargs),
            }
        )
        return ActorHandle(self._cls, len(actors) - 1)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._cls, name)


def remote(*args: Any, **options: Any) -> Any:
    """`@ray.remote` and `@ray.remote(num_gpus=1, ...)` on a class (an actor) or a function (a task)."""

    def wrap(target: Any) -> Any:
        return ActorClass(target, options) if isinstance(target, type) else RemoteFunction(target, options)

    if len(args) == 1 and not options and callable(args[0]):
        return wrap(args[0])
    return wrap


def method(*args: Any, **kwargs: Any) -> Any:
    if len(args) == 1 and not kwargs and callable(args[0]):
        return args[0]
    return lambda func: func


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise HarnessError(f"the fake ray has no ray.{name}")
