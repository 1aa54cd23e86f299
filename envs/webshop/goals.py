"""Goals: what the shopper is asked to buy, built as the original builds them, and their splits.

A goal names a target product (``asin``, ``name``, ``query``, ``category``, ``product_category``), the
attributes and options the instruction asks for, and a price cap. As in the original:

* **Human goals** (default): one goal per record of ``items_human_ins.json`` that has instruction
  attributes; ``goal_options`` is the record's ``instruction_options`` list.
* **Synthetic goals**: for each product with an ``instruction`` in ``items_ins_v2*.json``, one goal per
  combination of its option values (``" with color: black, and size: large"``); weighted by how rare
  their attributes are.
* **Price cap**: of the first four multiples of 10 above the product's price, two are drawn and the
  larger is the cap (``", and price lower than 40.00 dollars"``); with fewer than two the cap is
  1,000,000 and the instruction says nothing. The original draws unseeded; here the draws are seeded.
* **Order and splits**: the list is shuffled with the original's fixed seed (233); ``test`` is goals
  ``[0, 500)``, ``eval`` ``[500, 1500)``, ``train`` the rest. A list shorter than 3,000 is cut in the same
  proportions (a sixth, then a third), so small catalogs keep all three splits.

Example:
    >>> price_cap(34.99, random.Random(0))
    (70.0, ', and price lower than 70.00 dollars')
    >>> price_cap(995.0, random.Random(0))
    (1000000.0, '')
    >>> split_range(6000, "eval"), split_range(600, "train")
    (range(500, 1500), range(300, 600))
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from agentfly_env.core.env import OptionsError
from agentfly_env.core.tasks import TaskSource
from agentfly_envs.webshop.products import DataError

if TYPE_CHECKING:
    from agentfly_envs.webshop.catalog import Catalog

__all__ = ["GOAL_SHUFFLE_SEED", "PRICE_STEPS", "GoalTasks", "Split", "build_goals", "price_cap", "split_range"]

Split = Literal["train", "eval", "test", "all"]

#: The price caps a goal can have: 10, 20, ..., 990 dollars.
PRICE_STEPS = [10.0 * step for step in range(1, 100)]
#: The original's fixed shuffle of the goal list (``random.seed(233); random.shuffle(goals)``).
GOAL_SHUFFLE_SEED = 233
#: Where ``test`` and ``eval`` end in the original's goal list.
SPLIT_ENDS = (500, 1500)
NO_PRICE_CAP = 1_000_000.0


def price_cap(price: float, rng: random.Random) -> tuple[float, str]:
    """The cap for a product at ``price`` and the clause the instruction ends with."""
    above = [step for step in PRICE_STEPS if step > price][:4]
    if len(above) < 2:
        return NO_PRICE_CAP, ""
    _, upper = sorted(rng.sample(above, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def build_goals(catalog: Catalog, *, human: bool = True) -> list[dict[str, Any]]:
    """Every goal of ``catalog``, shuffled as the original shuffles them.

    Args:
        catalog: Where the products and their goal records come from.
        human: Human goals (``items_human_ins.json``) or synthetic ones (``items_ins_v2*.json``).

    Raises:
        DataError: no goal can be built; the message names why (no product has a goal record, or every
            record lacks instruction attributes).
    """
    caps = random.Random(catalog.price_seed)
    goals: list[dict[str, Any]] = []
    products_with_records = 0
    for ordinal, records in catalog.instructions(human):
        products_with_records += 1
        product = catalog.product(ordinal)
        target = {
            "asin": product.asin,
            "category": product.category,
            "query": product.query,
            "name": product.title,
            "product_category": product.product_category,
        }
        if human:
            for record in records:
                attributes = list(record.get("instruction_attributes") or ())
                if not attributes:
                    continue  # the original skips (and counts) these
                upper, clause = price_cap(catalog.price(ordinal), caps)
                goals.append(
                    {
                        **target,
                        "instruction_text": str(record["instruction"]).strip(".") + clause,
                        "attributes": attributes,
                        "price_upper": upper,
                        "goal_options": list(record.get("instruction_options") or ()),
                        "weight": 1.0,
                    }
                )
            continue
        record = records[0]
        attributes = list(record.get("instruction_attributes") or ())
        if not attributes:
            continue
        upper, clause = price_cap(catalog.price(ordinal), caps)
        names = sorted(product.options)
        for combination in itertools.product(*(product.options[name] for name in names)):
            chosen = dict(zip(names, combination, strict=True))
            option_text = ", and ".join(f"{name}: {value}" for name, value in chosen.items())
            option_text = f" with {option_text}" if option_text else ""
            goals.append(
                {
                    **target,
                    "instruction_text": f"{record['instruction']}{option_text}{clause}",
                    "attributes": attributes,
                    "price_upper": upper,
                    "goal_options": chosen,
                }
            )
    if not goals:
        raise DataError(_no_goals_reason(catalog, human, products_with_records))
    if not human:
        counts = Counter(attribute for goal in goals for attribute in goal["attributes"])
        for goal in goals:
            goal["weight"] = sum(1.0 / counts[a] for a in goal["attributes"]) / len(goal["attributes"])
    random.Random(GOAL_SHUFFLE_SEED).shuffle(goals)
    return goals


def _no_goals_reason(catalog: Catalog, human: bool, products_with_records: int) -> str:
    """Why ``catalog`` gives no goal, for the error."""
    source = "a human goal in items_human_ins.json" if human else "an instruction in items_ins_v2*.json"
    if products_with_records == 0:
        return (
            f"{catalog!r}: no goal can be built: none of its {len(catalog)} products has {source}"
            + (" (the human goals name other products; read more of them with num_products, " if human else " (")
            + f"or use human_goals={not human})"
        )
    return (
        f"{catalog!r}: no goal can be built: the goal records of its {products_with_records} products with "
        f"{source} all have empty instruction_attributes, and the original skips those"
    )


def split_range(count: int, split: Split) -> range:
    """The goal positions of ``split`` in a shuffled list of ``count`` goals."""
    test_end, eval_end = min(SPLIT_ENDS[0], count // 6), min(SPLIT_ENDS[1], count // 2)
    ranges = {
        "test": range(test_end),
        "eval": range(test_end, eval_end),
        "train": range(eval_end, count),
        "all": range(count),
    }
    if split not in ranges:
        raise ValueError(f"split must be one of {sorted(ranges)}, got {split!r}")
    return ranges[split]


class GoalTasks(TaskSource):
    """The goals of one split as tasks: ``prompt`` is the instruction, ``goal`` the whole goal.

    Sampling follows the goals' weights (all equal for human goals), as the original samples sessions.

    Args:
        goals: The shuffled goal list (see :func:`build_goals`).
        split: ``train``, ``eval``, ``test`` or ``all``.
        max_options: Keep only the split's goals that ask for at most this many options (``0``: the product
            alone, an easy set for small models); ``None`` (the original) keeps every goal. The split is cut
            first, so the kept goals of two splits never overlap.

    Example:
        >>> goals = [{"instruction_text": f"buy {i}", "weight": 1.0, "goal_options": ["red"] * (i % 2)} for i in range(24)]
        >>> tasks = GoalTasks(goals, "test")
        >>> len(tasks), tasks[1]["prompt"], tasks[1]["goal_index"]
        (4, 'buy 1', 1)
        >>> easy = GoalTasks(goals, "test", max_options=0)
        >>> len(easy), easy[1]["prompt"]
        (2, 'buy 2')
    """

    def __init__(self, goals: list[dict[str, Any]], split: Split = "train", max_options: int | None = None) -> None:
        self.goals = goals
        self.split = split
        positions = split_range(len(goals), split)
        if max_options is not None:
            positions = [i for i in positions if len(goals[i].get("goal_options") or ()) <= max_options]
        self.positions: Sequence[int] = positions
        if not self.positions:
            hint = "use a larger catalog" if split == "all" else "use a larger catalog or split='all'"
            if max_options is not None:
                hint += f" or a max_goal_options above {max_options}"
            raise ValueError(f"the {split!r} split of {len(goals)} goals is empty; {hint}")
        weights = [float(goals[i].get("weight", 1.0)) for i in self.positions]
        uniform = all(weight == weights[0] for weight in weights)
        self._cumulative = None if uniform else list(itertools.accumulate(weights))

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, index: int) -> dict[str, Any]:
        position = self.positions[index]
        goal = self.goals[position]
        return {
            "id": f"{self.split}/{position}",
            "prompt": goal["instruction_text"],
            "goal": dict(goal),
            "goal_index": position,
        }

    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        if self._cumulative is None:
            return super().sample(rng)
        point = float(rng.random()) * self._cumulative[-1]
        return self[min(bisect.bisect(self._cumulative, point), len(self) - 1)]

    def select(self, options: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """As :meth:`TaskSource.select`; an ``options["task"]`` must carry a ``goal``."""
        task = super().select(options, rng)
        if "goal" not in task:
            raise OptionsError("task", "must have a 'goal' (a goal dict as in info['task']['goal'])")
        return task
