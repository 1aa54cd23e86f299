"""Optional parts and the extra that installs each: one clear error when an extra is missing.

The core (``pip install agentfly-gym``) installs only what :mod:`agentfly_env` itself needs. Each env
family's engine is an extra (``math``, ``webshop``, ``search``, ``code``, ``scienceworld``,
``alfworld``; ``envs`` for all of them), and so is the Redis client (``cache``). Code that needs one
wraps its imports in :func:`requires_extra`; without the extra it raises :class:`MissingExtraError`,
an :class:`ImportError` that names the extra and the install command, instead of a bare
``No module named ...``.

Example:
    >>> with requires_extra("math", "no_such_engine", feature="AgentFly/Example-v0"):
    ...     import no_such_engine
    Traceback (most recent call last):
    ...
    agentfly_env.extras.MissingExtraError: AgentFly/Example-v0 needs the 'math' extra (no_such_engine is not installed): pip install 'agentfly-gym[math]'
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

__all__ = [
    "DISTRIBUTION",
    "MissingExtraError",
    "Requirement",
    "declared_extras",
    "extra_installed",
    "parse_requirement",
    "requires_extra",
]

#: The distribution whose extras the messages name.
DISTRIBUTION = "agentfly-gym"


class MissingExtraError(ImportError):
    """An optional part was used without the extra that installs it.

    Attributes:
        feature: What was asked for (an env id, "a Redis cache", ...).
        extra: The extra that installs it.
        missing: The top-level modules that are not installed.
    """

    def __init__(self, feature: str, extra: str, missing: list[str], distribution: str = DISTRIBUTION) -> None:
        self.feature, self.extra, self.missing = feature, extra, missing
        super().__init__(
            f"{feature} needs the {extra!r} extra ({', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed): pip install '{distribution}[{extra}]'",
            name=missing[0],
        )


@contextmanager
def requires_extra(extra: str, *modules: str, feature: str, distribution: str = DISTRIBUTION) -> Iterator[None]:
    """Check that ``modules`` are installed, and name ``extra`` if they are not.

    On entry, every module in ``modules`` (top-level names, e.g. ``"textworld"``) is looked up
    without importing it, so one the block imports only later (in a worker, on first use) is
    checked up front too. A ``ModuleNotFoundError`` for one of them raised inside the block is
    turned into the same error; any other error passes through unchanged.

    Args:
        extra: The extra that installs the modules (``pip install 'agentfly-gym[<extra>]'``).
        modules: The top-level modules the extra provides.
        feature: What needs them, as the message's subject ("AgentFly/ALFWorld-v0").
        distribution: The distribution the extra belongs to (a third-party suite passes its own).

    Raises:
        MissingExtraError: When a module is missing (chained to the ``ModuleNotFoundError``, if any).
    """
    missing = [module for module in modules if not _installed(module)]
    if missing:
        raise MissingExtraError(feature, extra, missing, distribution)
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if top not in modules:
            raise
        raise MissingExtraError(feature, extra, [top], distribution) from exc


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package, or a module whose __spec__ is None
        return False


class Requirement(NamedTuple):
    """What :func:`parse_requirement` reads of one line of a distribution's ``Requires-Dist``."""

    name: str
    extras: tuple[str, ...]
    extra: str | None  # the extra whose marker (``extra == "..."``) guards it; None for a plain dependency


_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?[^;]*(?:;(.*))?", re.DOTALL)
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*(["'])(.*?)\1""")


def parse_requirement(line: str) -> Requirement:
    """One ``Requires-Dist`` line: the distribution, the extras it asks of it and the extra it belongs to.

    Only the ``extra == "..."`` part of a marker is read (other conditions, such as a Python version, are
    taken as met): enough to tell an extra's dependencies, without the ``packaging`` library.

    Example:
        >>> parse_requirement('agentfly-gym[math,search]; extra == "envs"')
        Requirement(name='agentfly-gym', extras=('math', 'search'), extra='envs')
        >>> parse_requirement("numpy<3,>=1.26")
        Requirement(name='numpy', extras=(), extra=None)

    Raises:
        ValueError: The line names no distribution.
    """
    match = _REQUIREMENT.fullmatch(line)
    if match is None:
        raise ValueError(f"not a requirement: {line!r}")
    name, extras, marker = match.groups()
    guard = _EXTRA_MARKER.search(marker or "")
    return Requirement(
        name,
        tuple(extra.strip() for extra in (extras or "").split(",") if extra.strip()),
        guard.group(2) if guard else None,
    )


def declared_extras(distribution: str = DISTRIBUTION) -> list[str] | None:
    """The extras ``distribution`` declares, or None when it is not installed.

    Example:
        >>> "math" in declared_extras()
        True
    """
    try:
        return importlib.metadata.metadata(distribution).get_all("Provides-Extra") or []
    except importlib.metadata.PackageNotFoundError:
        return None


def extra_installed(extra: str, distribution: str = DISTRIBUTION) -> bool | None:
    """Whether every distribution ``pip install 'DISTRIBUTION[EXTRA]'`` would install is installed (an extra
    that names other extras of its distribution needs theirs too); None when ``distribution`` is not
    installed or declares no such extra, so nothing can be said.

    Example:
        >>> extra_installed("no-such-extra") is None
        True
    """
    declared = declared_extras(distribution)
    if declared is None or extra not in declared:
        return None
    lines = importlib.metadata.requires(distribution) or []
    requirements = [parse_requirement(line) for line in lines]
    own = _canonical(distribution)
    wanted, seen = [extra], {extra}
    while wanted:  # the extra's own dependencies, and those of the extras it names (each once)
        current = wanted.pop()
        for requirement in requirements:
            if requirement.extra != current:
                continue
            if _canonical(requirement.name) != own:
                if not _distribution_installed(requirement.name):
                    return False
                continue
            for inner in requirement.extras:
                if inner not in declared:
                    return False
                if inner not in seen:
                    seen.add(inner)
                    wanted.append(inner)
    return True


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distribution_installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
