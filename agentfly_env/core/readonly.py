"""Read-only plain data: the task an env shares with its caller, its records and other episodes.

After ``reset`` the same task object is ``info["start"].task`` and the trajectory's ``task``, and
``info["task"]`` is a :class:`ReadOnlyView` of it; a task source may hand one item to many episodes
(Math-v0 keeps its generated items for all its envs). Copying it at every reset cost more than the rest
of a simple env's reset; so a task is frozen once, when the source makes it, and a change to it fails at
once instead of leaking into other episodes.

:func:`read_only` turns dicts and lists, at any depth, into :class:`ReadOnlyDict` and :class:`ReadOnlyList`.
They subclass ``dict`` and ``list``: they compare equal to the plain data, pass ``isinstance(x, dict)``,
and encode with msgspec and ``json`` as plain objects and arrays (a decoded copy is plain, mutable data);
pickled, they load read-only. Every method that would change one raises ``TypeError``. For a copy of
your own: ``dict(task)`` (shallow) or ``copy.deepcopy(task)`` (plain dicts and lists all the way down).

Example:
    >>> task = read_only({"id": "t0", "prompt": "2+2?", "metadata": {"terms": [2, 2]}})
    >>> task["metadata"]["terms"] == [2, 2], isinstance(task, dict)
    (True, True)
    >>> task["answer"] = "4"
    Traceback (most recent call last):
    ...
    TypeError: this ReadOnlyDict is read-only (a task is shared by the env, its records and other episodes); change a copy: dict(task), or copy.deepcopy(task) for nested data
    >>> mine = copy.deepcopy(task)
    >>> mine["metadata"]["terms"].append(3)
    >>> mine["metadata"], task["metadata"]
    ({'terms': [2, 2, 3]}, {'terms': [2, 2]})
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

__all__ = ["ReadOnlyDict", "ReadOnlyList", "ReadOnlyView", "read_only"]


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        f"this {type(self).__name__} is read-only (a task is shared by the env, its records and other "
        "episodes); change a copy: dict(task), or copy.deepcopy(task) for nested data"
    )


class ReadOnlyDict(dict):  # type: ignore[type-arg]
    """A ``dict`` whose every mutating method raises ``TypeError``; build one with :func:`read_only`."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return ReadOnlyDict, (dict(self),)

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}


class ReadOnlyList(list):  # type: ignore[type-arg]
    """A ``list`` whose every mutating method raises ``TypeError``; build one with :func:`read_only`."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return ReadOnlyList, (list(self),)

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]


def read_only(value: Any) -> Any:
    """``value`` with its mappings and lists, at any depth, made read-only; tuples keep their type with
    their items frozen, sets become frozensets, anything else is shared as it is. Already read-only data
    comes back as it is, at no cost."""
    kind = type(value)
    if kind is ReadOnlyDict or kind is ReadOnlyList or kind in (str, int, float, bool, type(None)):
        return value
    if isinstance(value, Mapping):
        return ReadOnlyDict({key: read_only(item) for key, item in value.items()})
    if isinstance(value, list):
        return ReadOnlyList([read_only(item) for item in value])
    if kind is tuple:
        return tuple(read_only(item) for item in value)
    if isinstance(value, set):
        return frozenset(value)
    return value


class ReadOnlyView(Mapping):  # type: ignore[type-arg]
    """A read-only view of a task: what ``info["task"]`` is after a reset.

    It reads as the task (``view["answer"]``, ``in``, iteration, ``==`` to the task or a plain dict), and
    every change fails with ``TypeError``, at any depth (its nested dicts and lists are the task's own
    read-only ones). It is a new object at every reset around the task the records share, and not a
    ``dict``: Gymnasium's env checker requires that no ``dict`` be shared by two calls' infos, and a copy of
    the task per reset cost more than the rest of a simple env's reset. For a dict of your own (to change
    it, or for ``json``): ``dict(view)``, or ``copy.deepcopy(view)`` for plain data all the way down.

    Example:
        >>> task = read_only({"id": "t0", "metadata": {"terms": [2, 2]}})
        >>> view = ReadOnlyView(task)
        >>> view == task, view["metadata"] is task["metadata"], isinstance(view, dict)
        (True, True, False)
        >>> view["id"] = "t1"
        Traceback (most recent call last):
        ...
        TypeError: this ReadOnlyView is read-only (a task is shared by the env, its records and other episodes); change a copy: dict(task), or copy.deepcopy(task) for nested data
        >>> copy.deepcopy(view)
        {'id': 't0', 'metadata': {'terms': [2, 2]}}
    """

    __slots__ = ("_task",)
    __setitem__ = __delitem__ = __ior__ = _refuse  # what a dict has, refused as ReadOnlyDict refuses it
    clear = pop = popitem = setdefault = update = _refuse

    def __init__(self, task: Mapping[str, Any]) -> None:
        self._task = task

    def __getitem__(self, key: str) -> Any:
        return self._task[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._task.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._task

    def __iter__(self) -> Iterator[str]:
        return iter(self._task)

    def __len__(self) -> int:
        return len(self._task)

    def __eq__(self, other: object) -> bool:
        return self._task == (other._task if type(other) is ReadOnlyView else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._task)

    def __reduce__(self) -> tuple[Any, ...]:
        return ReadOnlyView, (self._task,)

    def __copy__(self) -> dict[str, Any]:
        return dict(self._task)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(self._task, memo)
