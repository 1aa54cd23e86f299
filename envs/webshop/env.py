"""``WebShopEnv``: the WebShop task as a multi-turn text env, played with ``search[...]`` / ``click[...]``.

Each episode gives one goal's instruction; the shopper searches, opens products, picks options and buys.
Clicking ``Buy Now`` ends the episode with the original reward. The same two actions exist in two forms:

* ``action_mode="text"`` (default): the model's turn is one WebShop action, ``search[red shoes]`` or
  ``click[Buy Now]``, read as the released text env reads it (:class:`OriginalActionParser`).
* ``action_mode="tools"``: ``search`` and ``click`` are tools (``info["tools"]`` has their schemas), called
  in any function-calling format (``parser=``, default ``hermes``).

An action the current page does not offer changes nothing, scores 0 and shows the unchanged page, as the
released text env does; it counts in ``info["step"].errors["invalid_action"]`` (a turn that is not an action at
all counts as a parse error). ``explain_invalid=True`` adds a line above the page saying what was wrong
(the default in tools mode, which has no original to match). ``info["available_actions"]`` always lists
what the page offers.

Example:
    >>> import tempfile
    >>> env = WebShopEnv(num_products=100, split="all", cache_dir=tempfile.mkdtemp())
    >>> observation, info = env.reset(seed=0)
    >>> observation.startswith("WebShop [SEP] Instruction: [SEP] ")
    True
    >>> observation, reward, terminated, truncated, info = env.step("search[desk lamp]")
    >>> info["page"], "back to search" in info["available_actions"]["clickables"]
    ('results', True)
    >>> env.step("click[Buy Now]")[0] == observation  # not on this page: nothing happens
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentfly_env.core.manifest import DataSpec, Manifest, RewardSpec, tool_schemas
from agentfly_env.core.spaces import TextSpace, random_words
from agentfly_env.core.types import ToolCall, ToolResult
from agentfly_env.tools.parsing import BracketParser, Parser
from agentfly_env.tools.rewards import Reward
from agentfly_env.tools.tool import tool
from agentfly_env.tools.tool_env import ToolEnv
from agentfly_env.tools.turn import TurnReport
from agentfly_envs.webshop.catalog import Catalog
from agentfly_envs.webshop.data import Variant
from agentfly_envs.webshop.goals import GoalTasks, Split
from agentfly_envs.webshop.index import open_index
from agentfly_envs.webshop.nouns import noun_extractor
from agentfly_envs.webshop.pages import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE, PRODUCT_WINDOW, Mode, Session
from agentfly_envs.webshop.reward import webshop_reward
from agentfly_envs.webshop.shared import DEFAULT_NUM_GOALS, DEFAULT_NUM_PRODUCTS, shared_catalog

__all__ = ["MANIFEST", "SYSTEM_PROMPT", "OriginalActionParser", "WebShopEnv", "click", "search"]

SYSTEM_PROMPT = (
    "You are shopping on WebShop, an online store. Find the product the instruction describes, choose the "
    "options it asks for, and buy it within the price it allows.\n"
    "Actions: search[keywords] on the search page; click[x] where x is a button, a product ID or an option "
    "value shown on the page, written as shown. 'Back to Search' starts over, '< Prev' goes back, 'Next >' "
    "shows more results, 'Description', 'Features' and 'Reviews' show more about a product. Clicking "
    "'Buy Now' buys the product on the page with the options selected and ends the episode."
)


@tool(examples=[{"keywords": "long lasting lipstick"}])
async def search(keywords: str, env: Any, turn: TurnReport) -> str:
    """Search the shop for products (only on the search page).

    Args:
        keywords: What to search for, e.g. "waterproof bluetooth speaker".
    """
    return await env.act("search", keywords, turn)


@tool(examples=[{"value": "Buy Now"}, {"value": "Back to Search"}])
async def click(value: str, env: Any, turn: TurnReport) -> str:
    """Click a button, a product ID or an option value shown on the current page.

    Args:
        value: The text of what to click, as shown, e.g. "Next >", "B07XYZ1234", "large" or "Buy Now".
    """
    return await env.act("click", value, turn)


class OriginalActionParser(BracketParser):
    """The released text env's reading of a turn (``parse_action``: ``re.match(r"(.+)\\[(.+)\\]", turn)``).

    Its quirks, kept: the turn is not stripped (``" click[x]"`` names `` click``, no action); text after the
    action is ignored (``click[x] please`` clicks ``x``); the brackets are the *last* ``]`` of the first
    line and the last ``[`` before it (``click[size [large]]`` names ``click[size `` and does nothing);
    an empty argument is no action (``search[]``); nothing is unescaped. A name that is no identifier is a
    parse error here, other names are calls (an unknown tool), so both change nothing, as in the original.
    The same reading in linear time: the regex backtracks quadratically on long turns.

    Example:
        >>> parse = OriginalActionParser().parse
        >>> parse("click[Buy Now] please").calls, parse("click[size [large]]").calls, parse("search[]").calls
        ([ToolCall(name='click', arguments='Buy Now', id=None)], [], [])
    """

    def _scan(self, text: str, found: Any) -> None:
        line = text.split("\n", 1)[0]  # the regex's "." stops at a newline
        close = line.rfind("]")
        open_ = line.rfind("[", 1, max(close - 1, 1))  # a name of one character at least, an argument too
        if close < 0 or open_ < 0:
            found.fail("No action found: the reply must start with one action.", text)
        elif not self._IDENTIFIER.fullmatch(line[:open_]):
            found.fail(f"No action found: {line[:open_][:60]!r} is not an action name.", text)
        else:
            found.calls.append(ToolCall(line[:open_], line[open_ + 1 : close]))


@dataclass
class _Choices:
    """What the current page offers, for sampling plausible actions (plain data: it pickles)."""

    has_search_bar: bool = True
    clickables: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)


class _ActionSpace(TextSpace):
    """Model turns; :meth:`sample` writes an action the current page offers, in the env's format."""

    def __init__(self, parser: Parser, choices: _Choices) -> None:
        self.parser = parser
        self.choices = choices
        super().__init__()

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        rng = self.np_random
        if self.choices.has_search_bar:
            words = self.choices.words
            if words:
                count = int(rng.integers(1, min(5, len(words)) + 1))
                keywords = " ".join(words[i] for i in sorted(rng.choice(len(words), size=count, replace=False)))
            else:
                keywords = random_words(rng)
            return self.parser.format_call(ToolCall("search", {"keywords": keywords}))
        options = self.choices.clickables or ["back to search"]
        return self.parser.format_call(ToolCall("click", {"value": options[int(rng.integers(len(options)))]}))


class WebShopEnv(ToolEnv):
    """WebShop (Yao et al., 2022): search, browse and buy the product an instruction describes.

    Args:
        data_dir: The original data files' directory (default ``$AGENTFLY_WEBSHOP_DATA``); when unset, a
            catalog generated offline in the same format.
        data_variant: ``"auto"``, ``"small"`` (``*_1000.json``) or ``"all"``: which files to read.
        num_products: Products to read (default all) or to generate (default 1,000).
        catalog_seed: Seed of the generated catalog.
        num_goals: Goals of the generated catalog.
        price_seed: Seeds price draws inside ``$a to $b`` ranges and the goals' price caps.
        human_goals: Human-written goals (``items_human_ins.json``) rather than synthetic ones.
        split: ``"train"``, ``"eval"``, ``"test"`` or ``"all"`` (the original's goal positions).
        max_goal_options: Keep only goals asking for at most this many options (``0``: an easy set where the
            product alone is the goal, three actions long); ``None`` (the original) keeps all.
        observation_mode: ``"text"`` (``" [SEP] "``-joined) or ``"text_rich"`` (``[button] x [button_]``).
        action_mode: ``"text"`` (one ``search[...]``/``click[...]`` per turn) or ``"tools"`` (function calls).
        parser: The tool-call format for ``action_mode="tools"`` (default ``"hermes"``).
        results_per_page: Products on a results page; fewer than the original's 10 make short pages (and
            episodes) for small models.
        show_attrs: Offer the ``Attributes`` sub-page on item pages.
        show_reviews: Show the data's ratings and reviews; the original shows ``Rating: N.A.`` and no
            reviews (its loader never reads them), and so does the default.
        explain_invalid: Put a line saying what was wrong above the unchanged page after an action the page
            does not take or a turn that is no action; default: off in text mode (the original shows just
            the page), on in tools mode.
        cache_dir: Where search indexes are kept (default: see :func:`~agentfly_envs.webshop.index.default_cache_dir`).
        title_nouns: How the reward finds title nouns: ``"auto"``, ``"spacy"`` or ``"heuristic"``.
        spacy_model: The spaCy model for title nouns (default: the first English one installed).
        reward: Replaces the original reward; it may ask for ``purchased``, ``purchased_options``,
            ``price``, ``goal`` and ``nouns`` besides the usual context.
        expert_query: What the scripted expert (:meth:`expert_action`) searches for: ``"instruction"`` (what
            the shopper is shown, so its demonstrations teach a model nothing it could not see) or
            ``"title"`` (the hidden target's title: the shortest path to it).
        **kwargs: Passed to :class:`~agentfly_env.tools.tool_env.ToolEnv` (``max_turns`` defaults to 15, the
            ReAct setting; ``max_observation_chars``, ...).
    """

    def __init__(
        self,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        data_variant: Variant = "auto",
        num_products: int | None = None,
        catalog_seed: int = 0,
        num_goals: int = DEFAULT_NUM_GOALS,
        price_seed: int = 0,
        human_goals: bool = True,
        split: Split = "train",
        max_goal_options: int | None = None,
        observation_mode: Mode = "text",
        action_mode: Literal["text", "tools"] = "text",
        parser: str | Parser | None = None,
        results_per_page: int = PRODUCT_WINDOW,
        show_attrs: bool = False,
        show_reviews: bool = False,
        explain_invalid: bool | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        title_nouns: Literal["auto", "spacy", "heuristic"] = "auto",
        spacy_model: str | None = None,
        reward: Reward | None = None,
        expert_query: Literal["instruction", "title"] = "instruction",
        **kwargs: Any,
    ) -> None:
        if observation_mode not in ("text", "text_rich"):
            raise ValueError(f"observation_mode must be 'text' or 'text_rich', got {observation_mode!r}")
        if action_mode not in ("text", "tools"):
            raise ValueError(f"action_mode must be 'text' or 'tools', got {action_mode!r}")
        if expert_query not in ("instruction", "title"):
            raise ValueError(f"expert_query must be 'instruction' or 'title', got {expert_query!r}")
        if action_mode == "text" and parser is not None:
            raise ValueError("parser= applies to action_mode='tools'; the text mode reads search[...]/click[...]")
        self.catalog: Catalog = shared_catalog(
            data_dir,
            data_variant=data_variant,
            num_products=num_products,
            catalog_seed=catalog_seed,
            num_goals=num_goals,
            price_seed=price_seed,
        )
        self.index = open_index(self.catalog, cache_dir)
        self.nouns = noun_extractor(title_nouns, spacy_model)
        self.observation_mode: Mode = observation_mode
        self.action_mode = action_mode
        if results_per_page < 1:
            raise ValueError(f"results_per_page must be at least 1, got {results_per_page}")
        self.results_per_page = results_per_page
        self.show_attrs = show_attrs
        self.show_reviews = show_reviews
        self.explain_invalid = action_mode == "tools" if explain_invalid is None else explain_invalid
        self.expert_query = expert_query
        kwargs.setdefault("max_turns", 15)
        kwargs.setdefault("system_prompt", SYSTEM_PROMPT)
        super().__init__(
            tools=[search, click],
            tasks=GoalTasks(self.catalog.goals(human_goals), split, max_goal_options),
            reward=reward or webshop_reward,
            parser=OriginalActionParser() if action_mode == "text" else (parser or "hermes"),
            answer_mode="none",  # an episode ends by buying
            max_calls_per_turn=1,
            **kwargs,
        )
        self._choices = _Choices()
        self.action_space = _ActionSpace(self.parser, self._choices)
        self.session: Session | None = None

    # ----------------------------------------------------------------- the prompt

    def _build_system_prompt(self, instructions: str) -> str:
        parts = [instructions.strip()]
        if self.action_mode == "tools":
            listed = "\n".join(json.dumps(schema["function"], ensure_ascii=False) for schema in self.tool_schemas)
            parts.append(f"You can call these tools:\n{listed}")
        parts.append(self.parser.instructions())
        return "\n\n".join(parts)

    # ----------------------------------------------------------------- episode

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        _, info = await super()._reset(seed, options)
        self.session = Session(
            self.catalog, self.index, self.task["prompt"], self.show_attrs, self.show_reviews, self.results_per_page
        )
        self._choices.words = self.task["prompt"].replace(",", " ").split()
        info.update(self._page_info())
        return self.session.render(self.observation_mode), info

    async def _finish_turn(self, turn: TurnReport) -> None:
        turn.info.update(self._page_info())

    def _page_info(self) -> dict[str, Any]:
        assert self.session is not None
        available = self.session.available()
        self._choices.has_search_bar = bool(available["has_search_bar"])
        self._choices.clickables = list(available["clickables"])
        return {"page": self.session.page, "available_actions": available}

    async def act(self, name: str, argument: str, turn: TurnReport) -> str:
        """Run one WebShop action on the current page and return the next observation (the tools call
        this); an invalid action counts as ``invalid_action``, buying ends the episode with the reward."""
        session = self.session
        assert session is not None and session.page != "done", "act() runs inside a step of an open episode"
        outcome = session.search(argument) if name == "search" else session.click(argument)
        if not outcome.valid:
            turn.count_error("invalid_action")
        if outcome.bought:
            assert session.product is not None
            context = self._reward_context(None)
            context.update(
                purchased=self.catalog.product(session.product),
                purchased_options=dict(session.options),
                price=self.catalog.price(session.product),
                nouns=self.nouns,
            )
            result = await self.reward.compute(context)
            session.score = result.score
            turn.end_episode(result)
        page = session.render(self.observation_mode)
        if not outcome.valid and self.explain_invalid:
            return f"Invalid action: {outcome.message} Nothing happened.\n{page}"
        return page

    def _format_observation(self, results: list[ToolResult], parse_errors: Sequence[Any], n_calls: int) -> str:
        if any(item.error is None for item in results):  # search or click ran: its output is the page
            return super()._format_observation(results, parse_errors, n_calls)
        assert self.session is not None
        if not self.explain_invalid:
            return self.session.render(self.observation_mode)
        if results or parse_errors:
            problem = super()._format_observation(results, parse_errors, n_calls)
        else:
            problem = f"No action found. {self.parser.instructions()}"
        return f"{problem}\n{self.session.render(self.observation_mode)}"

    # ----------------------------------------------------------------- the scripted expert

    def expert_action(self) -> str:
        """A scripted shopper that knows the goal: search the instruction (or the target's title, see
        ``expert_query``), open the target, pick its options, buy.

        Used for warm-start demonstrations (``agentfly-train collect --expert``), tests, ``agentfly-play``
        and ``agentfly-bench``. On a results page without the target it opens a product that scores 1 for a
        goal without options (its type, every attribute, the price), as a shopper who reads the titles
        would; else it looks through the next pages, and buys the first product of the last one.
        """
        assert self.session is not None
        return self.parser.format_call(self._expert_call())

    def _expert_call(self) -> ToolCall:
        session = self.session
        assert session is not None
        goal = self.task["goal"]
        target = self.catalog.ordinal(goal["asin"])
        if session.page == "search":
            query = goal["name"] if self.expert_query == "title" else self.task["prompt"]
            return ToolCall("search", {"keywords": query})
        if session.page == "results":
            shown = list(session.product_links().values())
            found = target if target in shown else next((o for o in shown if self._meets_goal(o)), None)
            if found is None and session.page_number * session.results_per_page < len(session.results):
                return ToolCall("click", {"value": NEXT_PAGE})  # "Next >" shows on the last page too
            if found is None:  # not among the results at all: the first product of the last page
                found = shown[0] if shown else None
            # Its ASIN written as the page shows it (clicks ignore case; a model copies what it sees).
            return ToolCall("click", {"value": BACK_TO_SEARCH if found is None else self.catalog.product(found).asin})
        if session.page == "item" and session.product is not None:
            wanted = goal["goal_options"].values() if isinstance(goal["goal_options"], dict) else goal["goal_options"]
            product = self.catalog.product(session.product)
            for value in wanted:
                value = str(value).strip().replace("/", " | ").lower()
                for name, values in product.options.items():
                    if value in values and session.options.get(name) != value:
                        return ToolCall("click", {"value": value})
            return ToolCall("click", {"value": BUY_NOW})
        return ToolCall("click", {"value": PREV_PAGE})  # a sub-page: back to the item

    def _meets_goal(self, ordinal: int) -> bool:
        """Whether buying product ``ordinal`` as it comes (no option chosen) scores 1 by WebShop's reward."""
        bought = webshop_reward(
            self.catalog.product(ordinal), {}, self.catalog.price(ordinal), self.task["goal"], self.nouns
        )
        return bought.score == 1.0


MANIFEST = Manifest(
    id="AgentFly/WebShop-v0",
    family="webshop",
    description="Find, configure and buy the product an instruction describes on WebShop's text pages.",
    benchmark="WebShop (Yao et al., 2022)",
    link="https://github.com/princeton-nlp/WebShop",
    tools=tool_schemas(search, click),  # written search[...] / click[...] in the default text mode
    reward=RewardSpec(
        range=(0.0, 1.0),
        measures="the original's: the purchase's product type, attributes, options and price against the goal",
        paid="once, when Buy Now is clicked; an episode cut at the turn budget earns 0",
        success="a reward of 1.0",
    ),
    seeded=True,
    max_turns=15,
    extra="webshop",
    data=(
        DataSpec(
            name="a catalog generated offline in the original files' schema, from this project's vocabulary.json "
            "(the original files with data_dir=)",
            size=f"{DEFAULT_NUM_PRODUCTS:,} products, {DEFAULT_NUM_GOALS:,} goals over three splits; vocabulary.json 31 KB",
            licence="Apache-2.0",
        ),
        DataSpec(
            name="spaCy's en_core_web_sm 3.8.0, for the reward's title nouns",
            size="15 MB",
            licence="MIT",
        ),
    ),
    parity="python -m pytest tests/envs/test_webshop_parity.py",
    expert="searches the instruction, opens the target (or a product that meets the goal), picks the goal's "
    "options and buys",
)
