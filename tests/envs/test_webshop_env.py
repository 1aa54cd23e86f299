"""AgentFly/WebShop-v0: the page machine, actions and their rules, observation and action modes, the expert."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfly_env
from agentfly_env import AgentVectorEnv, EnvStateError
from agentfly_envs.webshop import WebShopEnv
from agentfly_envs.webshop.pages import PRODUCT_WINDOW

LIMIT = 4096


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("webshop-cache"))


@pytest.fixture(scope="module")
def env(cache):
    env = WebShopEnv(num_products=400, split="all", cache_dir=cache, max_observation_chars=LIMIT)
    yield env
    env.close()


@pytest.fixture(scope="module")
def explaining_env(cache):
    """The env with ``explain_invalid=True``: a line above the unchanged page says what was wrong."""
    env = WebShopEnv(num_products=400, split="all", cache_dir=cache, max_observation_chars=LIMIT, explain_invalid=True)
    yield env
    env.close()


def play_expert(env, **reset):
    env.reset(**reset)
    actions = []
    while True:
        action = env.expert_action()
        actions.append(action)
        observation, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return reward, info, actions, observation


def to_item_page(env, seed=0):
    """Reset and walk the expert to the goal's item page."""
    env.reset(seed=seed)
    while env.session.page != "item":
        env.step(env.expert_action())
    return env.task["goal"]


def the_page(observation):
    """The page below an 'Invalid action' / 'Error' line."""
    return observation.split("\n", 1)[1]


# ----------------------------------------------------------------------------------------- the expert


def test_expert_reaches_reward_one_on_every_sampled_goal_of_the_default_env(cache):
    env = gym.make("AgentFly/WebShop-v0", cache_dir=cache, split="all").unwrapped
    for index in range(0, len(env.tasks), 50):  # 60 goals spread over the shuffled list
        reward, info, actions, observation = play_expert(env, options={"task_index": index})
        assert reward == 1.0 and info["step"].success is True, (index, actions, info["step"].reward_components)
        assert actions[0].startswith("search[") and actions[-1] == "click[Buy Now]"
        components = info["step"].reward_components
        assert components["r_type"] == components["r_att"] == components["r_price"] == 1.0
        # The original's done page (its MTurk template) prints the reward as Python prints a float.
        assert observation.startswith("Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] ")
        assert " [SEP] Your score (min 0.0, max 1.0) [SEP] 1.0 [SEP] Reward Details [SEP] None" in observation
    env.close()


def test_expert_searches_the_instruction_unless_told_to_search_the_title(env, cache):
    env.reset(seed=5)
    assert env.expert_action() == f"search[{env.task['prompt']}]"  # only what the shopper is shown
    by_title = WebShopEnv(num_products=400, split="all", cache_dir=cache, expert_query="title")
    by_title.reset(seed=5)
    assert by_title.expert_action() == f"search[{by_title.task['goal']['name']}]"
    with pytest.raises(ValueError, match="expert_query must be"):
        WebShopEnv(num_products=400, cache_dir=cache, expert_query="asin")


def test_the_easy_goal_set_keeps_the_goals_without_options_of_each_split(cache):
    every = {split: WebShopEnv(split=split, cache_dir=cache).tasks for split in ("train", "eval")}
    easy = {split: WebShopEnv(split=split, cache_dir=cache, max_goal_options=0).tasks for split in every}
    for split, tasks in easy.items():
        kept = [tasks[i]["goal_index"] for i in range(len(tasks))]
        expected = [
            every[split][i]["goal_index"]
            for i in range(len(every[split]))
            if not every[split][i]["goal"]["goal_options"]
        ]
        assert kept == expected and 0 < len(kept) < len(every[split])
    assert not {easy["train"][i]["goal_index"] for i in range(len(easy["train"]))} & {
        easy["eval"][i]["goal_index"] for i in range(len(easy["eval"]))
    }
    # Three actions: search the instruction, open the target, buy.
    env = WebShopEnv(split="eval", cache_dir=cache, max_goal_options=0)
    reward, info, actions, _ = play_expert(env, seed=1)
    assert reward == 1.0 and len(actions) == 3 and actions[-1] == "click[Buy Now]", actions
    with pytest.raises(ValueError, match="max_goal_options above 0"):
        WebShopEnv(num_products=20, num_goals=6, split="test", cache_dir=cache, max_goal_options=0)


def test_short_results_pages_and_the_expert_buying_a_product_that_meets_the_goal(cache):
    env = WebShopEnv(split="train", cache_dir=cache, max_goal_options=0, results_per_page=3)
    outside = 0
    for seed in range(12):
        env.reset(seed=seed)
        observation, *_, info = env.step(env.expert_action())
        shown = [c for c in info["available_actions"]["clickables"] if c.startswith("b0")]
        asins = [env.catalog.product(o).asin for o in env.session.results[:3]]
        assert shown == [asin.lower() for asin in asins] and all(asin in observation for asin in asins)
        choice = env.expert_action()
        assert choice in {f"click[{asin}]" for asin in asins}, choice  # written as shown
        if env.task["goal"]["asin"] not in asins:  # the target is further down: one that meets the goal instead
            outside += 1
        env.step(choice)
        _, reward, terminated, _, info = env.step(env.expert_action())
        assert terminated and reward == 1.0, (seed, info["step"].reward_components)
    assert outside > 0  # the case above was exercised
    with pytest.raises(ValueError, match="results_per_page must be at least 1"):
        WebShopEnv(split="train", cache_dir=cache, results_per_page=0)


def test_expert_in_tools_mode_with_function_calls(cache):
    env = WebShopEnv(num_products=400, split="all", cache_dir=cache, action_mode="tools")
    observation, info = env.reset(seed=3)
    assert sorted(tool["function"]["name"] for tool in info["tools"]) == ["click", "search"]
    parameters = {tool["function"]["name"]: tool["function"]["parameters"]["required"] for tool in info["tools"]}
    assert parameters == {"search": ["keywords"], "click": ["value"]}
    assert "<tool_call>" in info["system_prompt"] and "<answer>" not in info["system_prompt"]
    for seed in range(8):
        reward, info, actions, _ = play_expert(env, seed=seed)
        assert reward == 1.0 and all(action.startswith("<tool_call>") for action in actions)
    # Bracket text is not a function call in this mode: nothing happens and the page is shown again.
    observation, _ = env.reset(seed=0)
    after, reward, terminated, _, info = env.step("search[lamp]")
    assert after.startswith("No action found.") and after.endswith(observation)
    assert info["step"].errors == {"no_action": 1} and (reward, terminated) == (0.0, False)
    env.close()


def test_a_wrong_option_or_a_price_over_the_cap_lowers_the_reward_by_its_share(env):
    # A goal that asks for a size, on a product whose page offers another size the text never mentions.
    for seed in range(200):
        goal = to_item_page(env, seed)
        product = env.catalog.product(env.session.product)
        sizes = product.options.get("size", [])
        asked = [value for value in goal["goal_options"] if value in sizes]
        text = f"{product.title} {' '.join(product.bullet_points)} {product.description}".lower()
        others = [value for value in sizes if value not in goal["goal_options"] and value not in text]
        if asked and others:
            break
    else:
        pytest.fail("no suitable goal in 200 seeds")
    attributes, options = len(goal["attributes"]), len(goal["goal_options"])
    for value in goal["goal_options"]:
        env.step(f"click[{value}]")
    env.step(f"click[{others[0]}]")  # replaces the right size
    _, reward, terminated, _, info = env.step("click[Buy Now]")
    assert terminated and info["step"].reward_components["options_matched"] == options - 1
    assert reward == pytest.approx((attributes + options - 1 + 1) / (attributes + options + 1))
    assert info["step"].success is False

    # The same purchase with every option right but a cap below the price: only the price share is lost.
    price = env.catalog.price(env.catalog.ordinal(goal["asin"]))
    task = {"prompt": goal["instruction_text"], "goal": {**goal, "price_upper": price - 0.5}}
    reward, info, _, _ = play_expert(env, options={"task": task})
    assert info["step"].reward_components["r_price"] == 0.0
    assert reward == pytest.approx((attributes + options) / (attributes + options + 1))


def test_buying_another_kind_of_product_scores_by_type(env):
    env.reset(seed=1)
    goal = env.task["goal"]
    other = next(
        ordinal
        for ordinal in range(len(env.catalog))
        if env.catalog.product(ordinal).query != goal["query"]
        and env.catalog.product(ordinal).product_category.split(" › ")[0] != goal["product_category"].split(" › ")[0]
    )
    env.step(f"search[{env.catalog.product(other).title}]")
    env.step(f"click[{env.catalog.product(other).asin}]")
    _, reward, terminated, _, info = env.step("click[Buy Now]")
    components = info["step"].reward_components
    assert terminated and components["query_match"] == components["category_match"] == 0.0
    assert components["r_type"] in (0.0, 0.1, 0.5) and reward < 0.5
    assert info["reward_details"]["asin"] == env.catalog.product(other).asin


# ----------------------------------------------------------------------------------------- pages


def test_pagination_next_prev_and_the_last_page(env):
    env.reset(seed=0)
    observation, *_, info = env.step("search[our customers daily use design]")  # common words: 50 results
    results = env.session.results
    assert len(results) == 50 and "Page 1 (Total results: 50)" in observation
    clickables = info["available_actions"]["clickables"]
    assert "next >" in clickables and "< prev" not in clickables
    first_page = [env.catalog.product(o).asin.lower() for o in results[:PRODUCT_WINDOW]]
    assert [c for c in clickables if c.startswith("b0")] == first_page
    for page in range(2, 6):
        observation, *_, info = env.step("click[Next >]")
        assert f"Page {page} (Total results: 50)" in observation and "< prev" in info["available_actions"]["clickables"]
        shown = [env.catalog.product(o).asin for o in results[(page - 1) * PRODUCT_WINDOW : page * PRODUCT_WINDOW]]
        assert all(asin in observation for asin in shown)
    # As the original, "Next >" shows on the last page too, and leads to an empty page.
    assert "next >" in info["available_actions"]["clickables"]  # page 5 of 5
    observation, reward, _, _, info = env.step("click[Next >]")
    assert observation.endswith("Page 6 (Total results: 50) [SEP] < Prev [SEP] Next >") and info["step"].errors == {}
    assert [c for c in info["available_actions"]["clickables"] if c.startswith("b0")] == []
    observation, *_ = env.step("click[< Prev]")
    assert "Page 5 (Total results: 50)" in observation


def test_item_page_sub_pages_and_back_navigation(env):
    goal = to_item_page(env, seed=5)
    product = env.catalog.product(env.session.product)
    item = env.session.render()
    # The original never loads ratings: "N.A." whatever the data says.
    assert f"[SEP] {product.title} [SEP] Price: {product.price_tag} [SEP] Rating: N.A. [SEP]" in item
    assert item.endswith("Description [SEP] Features [SEP] Reviews [SEP] Buy Now")
    chosen = next(iter(product.options.values()))[-1] if product.options else None
    if chosen:
        env.step(f"click[{chosen}]")
    observation, *_ = env.step("click[Description]")
    assert observation.endswith(f"Back to Search [SEP] < Prev [SEP] {product.description}")
    assert env.step("click[Features]")[4]["step"].errors == {"invalid_action": 1}  # sub-pages only lead back
    env.step("click[< Prev]")
    observation, *_, info = env.step("click[features]")  # lower case works too
    assert observation.endswith(" [SEP] ".join(["< Prev", *product.bullet_points]))
    assert info["available_actions"] == {"has_search_bar": False, "clickables": ["back to search", "< prev"]}
    env.step("click[< Prev]")
    observation, *_ = env.step("click[Reviews]")
    assert observation.endswith("Back to Search [SEP] < Prev")  # nor reviews: no review is ever shown
    observation, *_ = env.step("click[< Prev]")  # back to the item, the chosen option kept
    assert env.session.page == "item" and observation == env.session.render()
    if chosen:
        assert chosen in env.session.options.values()
    observation, *_ = env.step("click[< Prev]")  # back to the results page it came from, options forgotten
    assert env.session.page == "results" and env.session.options == {} and goal["asin"] in observation
    observation, *_, info = env.step("click[Back to Search]")
    assert observation.startswith("WebShop [SEP] Instruction: [SEP]") and env.session.visited == set()
    assert info["available_actions"] == {"has_search_bar": True, "clickables": ["search"]}  # listed, inert


def test_attributes_sub_page_only_with_show_attrs(cache):
    env = WebShopEnv(num_products=400, split="all", cache_dir=cache, show_attrs=True)
    to_item_page(env, seed=2)
    assert "attributes" in env.session.available()["clickables"]
    observation, *_ = env.step("click[Attributes]")
    product = env.catalog.product(env.session.product)
    # As the original: the attributes, then the product's category, search query and category path.
    tail = [*product.attributes, product.category, product.query, product.product_category]
    assert observation.endswith("< Prev [SEP] " + " [SEP] ".join(tail))
    env.close()


@pytest.mark.parametrize(
    ("where", "action", "message"),
    [
        ("search", "click[Buy Now]", '"buy now" is not something to click on the search page'),
        ("search", "click[search]", "is not something to click"),
        ("results", "click[ back to search ]", "without spaces around it"),
        ("results", "click[B0NOTHERE1]", '"b0nothere1" is not something to click on the results page'),
        ("item", "click[Next >]", "is not something to click on the item page"),
        ("item", "click[a value no product has]", "is not something to click"),
    ],
)
@pytest.mark.parametrize("explain", [False, True])
def test_actions_the_page_does_not_offer_change_nothing(env, explaining_env, where, action, message, explain):
    env = explaining_env if explain else env
    env.reset(seed=4)
    while env.session.page != where:
        env.step(env.expert_action())
    before = env.session.render()
    state = (env.session.page, env.session.product, dict(env.session.options), list(env.session.results))
    observation, reward, terminated, truncated, info = env.step(action)
    if explain:
        assert observation.startswith("Invalid action:") and message in observation.split("\n")[0]
        assert the_page(observation) == before
    else:  # the original's text env: the same page, nothing said
        assert observation == before
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["step"].errors == {"invalid_action": 1}
    assert (env.session.page, env.session.product, dict(env.session.options), list(env.session.results)) == state


@pytest.mark.parametrize(
    ("action", "error", "said"),
    [
        ("click[Buy Now", "parse_error", "No action found"),
        ("search[lamp] click[Buy Now]", "parse_error", "'search[lamp] click' is not an action name"),
        ("I think I should search for a lamp.", "parse_error", "No action found"),
        ("", "parse_error", "No action found"),
        (" search[lamp]", "parse_error", "' search' is not an action name"),  # not stripped, as the original
        ("\nsearch[lamp]", "parse_error", "No action found"),  # the action must be on the first line
        ("buy[lamp]", "unknown_tool", "unknown tool `buy`. Available tools: search, click"),
        ("Search[lamp]", "unknown_tool", "unknown tool `Search`"),
        ("search[]", "parse_error", "No action found"),
        ("search[   ]", "invalid_action", "search needs keywords"),
        ("<answer>done</answer>", "parse_error", "No action found"),
    ],
)
def test_malformed_actions_get_a_clear_observation_and_a_counter(env, explaining_env, action, error, said):
    first, _ = explaining_env.reset(seed=6)
    observation, reward, terminated, truncated, info = explaining_env.step(action)
    assert said in observation and info["step"].errors == {error: 1}
    assert the_page(observation) == first  # the unchanged search page follows the explanation
    assert (reward, terminated, truncated) == (0.0, False, False)
    # By default, as the original: the unchanged page alone; the counter still says what happened.
    first, _ = env.reset(seed=6)
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation == first and info["step"].errors == {error: 1}


def test_100_kilobyte_actions_are_handled_and_bounded(explaining_env):
    env = explaining_env
    huge = "x" * 100_000
    env.reset(seed=7)
    for action in (huge, f"search[{huge}]", f"search[{'lamp ' * 20_000}]"):
        observation, *_, info = env.step(action)
        assert len(observation) <= LIMIT
        env.reset(seed=7)
    observation, *_, info = env.step(f"search[{'lamp ' * 20_000}]")
    assert info["page"] == "results" and len(env.session.results) > 0
    observation, *_, info = env.step(f"click[{huge}]")
    assert info["step"].errors == {"invalid_action": 1} and len(observation) <= LIMIT
    assert '"xxx' in observation and '..." is not something to click' in observation


actions = st.one_of(
    st.text(max_size=300),
    st.builds(
        lambda name, argument, close: f"{name}[{argument}{close}",
        st.sampled_from(["search", "click", "Click", "buy", ""]),
        st.text(max_size=80),
        st.sampled_from(["]", "", "]]", "] extra"]),
    ),
    st.sampled_from(
        ["click[Buy Now]", "click[< Prev]", "click[Next >]", "click[Back to Search]", "click[Description]"]
    ),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(actions, min_size=1, max_size=6))
def test_any_text_is_a_step_never_an_exception(env, turns):
    env.reset(seed=8)
    for action in turns:
        observation, reward, terminated, truncated, info = env.step(action)
        assert isinstance(observation, str) and 0 < len(observation) <= LIMIT
        assert set(info["step"].errors) <= {"parse_error", "unknown_tool", "invalid_action", "invalid_arguments"}
        assert info["page"] in {"search", "results", "item", "description", "features", "reviews", "done"}
        if terminated or truncated:
            break
        assert reward == 0.0


def test_truncation_after_max_turns_and_misuse_raises(cache):
    env = WebShopEnv(num_products=400, split="all", cache_dir=cache, max_turns=3)
    env.reset(seed=0)
    for _ in range(2):
        assert env.step("click[nothing]")[3] is False
    _, _, terminated, truncated, info = env.step("click[nothing]")
    assert (terminated, truncated, info["step"].truncation_reason) == (False, True, "max_turns")
    with pytest.raises(EnvStateError):
        env.step("click[Buy Now]")
    env.close()


# ----------------------------------------------------------------------------------------- modes, spaces, seeds


def test_text_rich_marks_buttons_selected_options_and_visited_products(cache):
    env = WebShopEnv(num_products=400, split="all", cache_dir=cache, observation_mode="text_rich")
    observation, _ = env.reset(seed=9)
    # The search page's template has "Instruction: " (with a space), which text_rich keeps.
    assert observation.splitlines() == ["WebShop", "Instruction: ", env.task["prompt"], "[button] Search [button_]"]
    goal = env.task["goal"]
    observation, *_ = env.step(env.expert_action())
    assert (
        "[button] Back to Search [button_]" in observation and f"\n\n[button] {goal['asin']} [button_]" in observation
    )
    observation, *_ = env.step(env.expert_action())  # the item page
    product = env.catalog.product(env.session.product)
    values = [value for values in product.options.values() for value in values]
    for value in values:
        assert f"  [button] {value} [button_]" in observation
    assert "[button] Buy Now [button_]" in observation and "[SEP]" not in observation
    if values:
        observation, *_ = env.step(f"click[{values[0]}]")
        assert observation.startswith(f"You have clicked {values[0]}.\n")
        assert f"  [clicked button] {values[0]} [clicked button_]" in observation
    observation, *_ = env.step("click[< Prev]")
    assert f"[clicked button] {goal['asin']} [clicked button_]" in observation
    env.close()


def test_sampled_actions_are_always_ones_the_page_offers(env):
    env.action_space.seed(0)
    kinds = set()
    for episode in range(30):
        env.reset(seed=episode)
        for _ in range(15):
            action = env.action_space.sample()
            assert env.action_space.contains(action)
            kinds.add(action.split("[")[0] if action.startswith("search") else action)
            _, _, terminated, truncated, info = env.step(action)
            assert info["step"].errors == {}, (action, info["step"].errors)
            if terminated or truncated:
                break
    assert "search" in kinds and "click[buy now]" in kinds and "click[next >]" in kinds


def test_seeded_resets_repeat_and_seeds_differ(env):
    first = env.reset(seed=11)
    again = env.reset(seed=11)
    other = env.reset(seed=12)
    assert first[0] == again[0] and first[1]["task"] == again[1]["task"]
    assert other[1]["task"]["goal_index"] != first[1]["task"]["goal_index"]
    assert first[1]["page"] == "search" and first[1]["task"]["prompt"] in first[0]


def test_reset_with_a_given_task_and_with_a_bad_one(env):
    goal = env.tasks[3]["goal"]
    observation, info = env.reset(options={"task": {"prompt": "buy it", "goal": goal}})
    assert "[SEP] buy it [SEP]" in observation and info["task"]["goal"] == goal
    with pytest.raises(ValueError, match="must have a 'goal'"):
        env.reset(options={"task": {"prompt": "buy it"}})


def test_many_concurrent_envs_share_one_catalog_and_index_and_all_succeed(cache):
    vec = AgentVectorEnv.make("AgentFly/WebShop-v0", 16, num_products=400, split="all", cache_dir=cache)
    assert len({id(env.catalog) for env in vec.envs}) == 1 and len({id(env.index) for env in vec.envs}) == 1
    vec.reset(seed=100)
    rewards = {}
    while len(rewards) < 16:
        actions = {i: env.expert_action() for i, env in enumerate(vec.envs) if i not in rewards}
        result = vec.step(actions)
        for i, reward, done in zip(result.indices, result.rewards, result.terminated, strict=True):
            if done:
                rewards[i] = reward
    assert set(rewards.values()) == {1.0}
    vec.close()


def test_bad_options_are_refused_clearly(cache):
    with pytest.raises(ValueError, match="observation_mode"):
        WebShopEnv(cache_dir=cache, observation_mode="html")
    with pytest.raises(ValueError, match="action_mode"):
        WebShopEnv(cache_dir=cache, action_mode="json")
    with pytest.raises(ValueError, match="parser= applies to action_mode='tools'"):
        WebShopEnv(cache_dir=cache, parser="hermes")
    with pytest.raises(ValueError, match="split must be one of"):
        WebShopEnv(cache_dir=cache, split="dev")
    with pytest.raises(ValueError, match="the 'test' split of 5 goals is empty"):
        WebShopEnv(cache_dir=cache, num_products=50, num_goals=5, split="test")


def test_registered_and_system_prompt(cache, monkeypatch):
    monkeypatch.setenv("AGENTFLY_WEBSHOP_CACHE_DIR", cache)
    assert "AgentFly/WebShop-v0" in agentfly_env.registered_ids()
    env = gym.make("AgentFly/WebShop-v0")
    observation, info = env.reset(seed=0)
    prompt = info["system_prompt"]
    assert "search[keywords]" in prompt and "Buy Now" in prompt and "<answer>" not in prompt
    assert re.fullmatch(r"WebShop \[SEP\] Instruction: \[SEP\] .+ \[SEP\] Search", observation)
    assert env.unwrapped.index.path.parent == Path(cache).absolute()
    env.close()
