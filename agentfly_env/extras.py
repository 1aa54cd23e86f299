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

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["DISTRIBUTION", "MissingExtraError", "requires_extra"]

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
