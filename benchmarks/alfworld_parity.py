"""ALFWorld generated-game parity: how the generated games stand against ALFWorld's own rules.

Two figures, both computed here from the installed ``alfworld`` package (no release download):

* **floor plans**: for each of ALFRED's 120 floor plans, whether every receptacle the package's data
  places (``FloorPlanN-openable.json``) is in the generated room with its own id and the agent's spot
  from that file (or one step back from it, as ALFRED's rule steps back from a spot too close), and
  how many receptacles were made up for types the package lists without positions;
* **solvability**: over N seeds per task type, how many first draws ALFWorld's handcoded expert solves
  within its 200 steps (``alfworld-generate``'s check, run through ``AlfredExpert`` in an engine
  process), how many draws a kept game took, and its walkthrough's length.

Usage::

    .venv/bin/python benchmarks/alfworld_parity.py --seeds 20 [--out results.json]

Measured (generator v3, alfworld 0.4.2, 2 shared CPU cores, 3 min 15 s): 120 of 120 floor plans carry
every receptacle the package places, as placed; 384 of 2,139 receptacles made up (120 stove burners,
85 garbage cans, 30 coffee machines, 30 toasters, 87 bathroom holders, 32 others). The handcoded expert
solves 20 of 20 first draws of each task type but pick-two, where it solves 10 of 20 (20 of 44
candidates; the most draws a kept game took: 8); median walkthroughs 11 (pick and place) to 66.5
(pick two) steps, the longest 197.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentfly_envs.alfworld.engine import Engine
from agentfly_envs.alfworld.generator import (
    HEADINGS,
    STATIC_RECEPTACLES,
    TASK_TYPES,
    floor_plans,
    generate_game,
    handcoded_expert,
    layout_data,
    receptacle_type,
)


def floor_plan_parity() -> dict[str, Any]:
    """Per floor plan: the package's placed receptacles found as placed, and the made-up ones."""
    matched, made_up, by_type = 0, 0, Counter()
    mismatches = []
    for scene, plan in sorted(floor_plans().items()):
        listed = {
            alfred_id: spot
            for alfred_id, spot in layout_data(scene, "openable").items()
            if receptacle_type(alfred_id) in STATIC_RECEPTACLES
        }
        located = {r.id: r.location for r in plan.receptacles}
        good = True
        for alfred_id, (x, z, *_) in listed.items():
            if alfred_id not in located:
                good = False
                continue
            _, at_x, at_z, heading, _ = located[alfred_id].split("|")
            dx, dz = HEADINGS[int(heading)]
            spot = (round(x / 0.25), round(z / 0.25))
            good &= (int(at_x), int(at_z)) in {spot, (spot[0] - dx, spot[1] - dz)}
        matched += good
        if not good:
            mismatches.append(scene)
        extra = [r for r in plan.receptacles if r.id not in listed]
        made_up += len(extra)
        by_type.update(r.type for r in extra)
    return {
        "floor_plans": len(floor_plans()),
        "floor_plans_matching_package_data": matched,
        "mismatching_floor_plans": mismatches,
        "receptacles": sum(len(plan.receptacles) for plan in floor_plans().values()),
        "made_up_receptacles": made_up,
        "made_up_by_type": dict(by_type.most_common()),
        "floorplan14": sorted(r.type for r in floor_plans()[14].receptacles),
    }


def solvability(seeds: int) -> dict[str, Any]:
    """Per task type: first draws the handcoded expert solves, draws per kept game, walkthrough lengths."""
    engine = Engine.start()
    expert = handcoded_expert(engine)
    verdicts: list[bool] = []  # every candidate the expert played, in order: won or not

    def counted(game: Any) -> list[str] | None:
        path = expert(game)
        verdicts.append(path is not None)
        return path

    results: dict[str, Any] = {}
    try:
        for task_type in TASK_TYPES:
            first = len(verdicts)
            draws, lengths = [], []
            started = time.perf_counter()
            for seed in range(seeds):
                before = len(verdicts)
                game = generate_game(seed, task_type, expert=counted)
                draws.append(len(verdicts) - before)
                lengths.append(len(game.walkthrough or []))
            played = verdicts[first:]
            results[task_type] = {
                "seeds": seeds,
                "first_draws_solved": sum(1 for count in draws if count == 1),
                "candidates_played": len(played),
                "candidates_solved": sum(played),
                "max_draws_for_a_game": max(draws),
                "walkthrough_median": statistics.median(lengths),
                "walkthrough_max": max(lengths),
                "seconds": round(time.perf_counter() - started, 1),
            }
            print(task_type, results[task_type], flush=True)
    finally:
        engine.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per task type")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    figures = {"floor_plans": floor_plan_parity()}
    print(json.dumps(figures["floor_plans"], indent=2), flush=True)
    figures["solvability"] = solvability(args.seeds)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
