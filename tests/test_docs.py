"""The examples in every module docstring of the core, the suite and the benchmarks run and give what
they show (the trainer's run in train/test_train_cli.py, with the same runner). The core's examples play
the suite's envs, so this file sits beside the package folders rather than in env/. And the README and docs/
pages: every relative link reaches its file and heading, and the README stays a short front door."""

from __future__ import annotations

import re
from pathlib import Path

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


# ----------------------------------------------------------------------------- README and docs/

REPO_ROOT = Path(__file__).resolve().parent.parent
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation but ``-`` and ``_`` dropped, spaces
    as ``-``), code blocks left out."""
    text = FENCED.sub("", page.read_text())
    headings = (line.lstrip("#").strip().lower() for line in text.splitlines() if line.startswith("#"))
    return {re.sub(r"[^\w\- ]", "", heading).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO_ROOT)))
def test_every_relative_link_of_the_docs_reaches_its_file_and_heading(page):
    problems = []
    for target in LINK.findall(FENCED.sub("", page.read_text())):
        if "pypi.org" in target:
            problems.append(f"{target}: link a project by its own repository or docs, not a package index")
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            problems.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in heading_anchors(destination):
            problems.append(f"{target}: no heading #{anchor}")
    assert not problems, problems


def test_the_readme_is_a_front_door():
    """The README stays short: what it is, the two commands, snippets, headline tables; the rest is in docs/."""
    assert len((REPO_ROOT / "README.md").read_text().splitlines()) <= 250


def test_the_readmes_env_list_is_what_agentfly_env_list_prints(capsys):
    """The "Which envs are there" block is the command's output, as a fresh machine with every extra prints it."""
    from agentfly_env.runners.catalog import main

    readme = (REPO_ROOT / "README.md").read_text()
    block = readme.split("## Which envs are there", 1)[1].split("```\n", 2)[1]
    assert main(["list"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("AgentFly/")]
    # Compared word by word: the id column is as wide as the longest registered id (tests register longer ones).
    assert [line.split() for line in block.rstrip("\n").splitlines()] == [line.split() for line in printed]
