"""The GEM side of ``agentfly-bench --suite gem``, run by the Python of GEM's own venv.

GEM (``gem-llm``) pins another reasoning-gym than ours, so it cannot share our process: this script
runs in its venv and takes orders on stdin, one JSON object a line, answering each on stdout:

- ``{"mode": "sync", "seconds": s}``: one env from ``gem.make``, ``reset`` then ``step`` with the
  correct answer, for at least ``s`` seconds;
- ``{"mode": "vector", "seconds": s, "num_envs": n}``: ``gem.make_vec`` (its ``SyncVectorEnv``, which
  resets finished envs in the same step), one step with every env's correct answer per round;
- ``{"mode": "freeze"}``: ``gc.freeze()`` what exists (the envs, once warmed up), as we do;
- ``{"mode": "quit"}``.

Each answer is ``{"episodes": ..., "elapsed_s": ..., "episodes_per_s": ..., "solved": ...}``. It imports
nothing from agentfly; only GEM, the standard library and what GEM brings.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
from importlib import metadata

TASK = "chain_sum"
CHUNK = 256  # episodes between two looks at the clock (one env)


def main() -> int:
    # GEM prints (make_vec) and logs; only our answers may go to the real stdout.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    # This file sits next to our suite ``gem.py``: drop its folder from the path, so ``gem`` is GEM.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    import gem

    env_id = f"rg:{TASK}"
    single = gem.make(env_id)
    vectors: dict[int, object] = {}

    def answer_of(env: object) -> str:
        # rg envs return an empty info: the task, and so the expert's answer, is the env's ``data``.
        return "\\boxed{" + str(env.data["answer"]) + "}"

    def run_sync(seconds: float) -> tuple[int, float, float]:
        episodes, solved = 0, 0.0
        started = time.perf_counter()
        while True:
            for _ in range(CHUNK):
                single.reset()
                solved += single.step(answer_of(single))[1]
            episodes += CHUNK
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return episodes, elapsed, solved

    def run_vector(seconds: float, num_envs: int) -> tuple[int, float, float]:
        vec = vectors.get(num_envs)
        if vec is None:
            vec = vectors[num_envs] = gem.make_vec([env_id] * num_envs)
            vec.reset()
        envs = vec.envs
        episodes, solved = 0, 0.0
        started = time.perf_counter()
        while True:
            _, rewards, _, _, _ = vec.step([answer_of(env) for env in envs])
            solved += float(rewards.sum())
            episodes += num_envs
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return episodes, elapsed, solved

    # As agentfly-bench does in its own process: what is imported so far leaves the collector's reach.
    gc.collect()
    gc.freeze()
    versions = {
        "gem-llm": metadata.version("gem-llm"),
        "reasoning-gym": metadata.version("reasoning-gym"),
        "python": sys.version.split()[0],
    }
    print(json.dumps({"ready": True, "versions": versions}), file=answers)
    for line in sys.stdin:
        order = json.loads(line)
        if order["mode"] == "quit":
            break
        if order["mode"] == "freeze":  # after the warm-up: the envs built so far leave the collector's reach
            gc.collect()
            gc.freeze()
            print(json.dumps({"frozen": True}), file=answers)
            continue
        with contextlib.redirect_stdout(sys.stderr):
            if order["mode"] == "sync":
                episodes, elapsed, solved = run_sync(order["seconds"])
            else:
                episodes, elapsed, solved = run_vector(order["seconds"], order["num_envs"])
        reply = {
            "episodes": episodes,
            "elapsed_s": elapsed,
            "episodes_per_s": episodes / elapsed,
            "solved": solved / episodes,
        }
        print(json.dumps(reply), file=answers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
