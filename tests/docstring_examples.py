"""The one runner of the examples in module docstrings; each test folder parametrises it over its package:

@pytest.mark.parametrize("name", module_names(agentfly_env))
def test_docstring_examples(name):
    run_docstring_examples(name)
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType


def module_names(package: ModuleType, *, with_package: bool = True) -> list[str]:
    """Every module under ``package``, sorted, then the package itself unless ``with_package=False``."""
    names = sorted(info.name for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."))
    return [*names, package.__name__] if with_package else names


def run_docstring_examples(name: str) -> None:
    """Run the docstring examples of module ``name``; fail with a count of those that went wrong."""
    module = importlib.import_module(name)
    results = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed in {name}"
