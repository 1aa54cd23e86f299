"""The examples in every module docstring run and give what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import agentfly_bench
import agentfly_env
import agentfly_envs

MODULES = sorted(
    info.name
    for package in (agentfly_env, agentfly_envs, agentfly_bench)
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
) + ["agentfly_env", "agentfly_envs"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    results = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed in {name}"
