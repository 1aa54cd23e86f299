"""The examples in every module docstring of the core, the suite and the benchmarks run and give what
they show (the trainer's run in train/test_train_cli.py, with the same runner). The core's examples play
the suite's envs, so this file sits beside the package folders rather than in env/."""

from __future__ import annotations

import pytest
from docstring_examples import module_names, run_docstring_examples

import agentfly_bench
import agentfly_env
import agentfly_envs

MODULES = sorted(
    [*module_names(agentfly_env), *module_names(agentfly_envs), *module_names(agentfly_bench, with_package=False)]
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    run_docstring_examples(name)
