"""AgentFly/Math-v0: reasoning-gym tasks, the calculator, the scorer as reward, options."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfly_env  # noqa: F401
from agentfly_envs.math import MathEnv, ReasoningGymTasks, dataset_names
from agentfly_envs.math.calculator import CalculatorError, evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4) - 10 / 4", "11.5"),
        ("10/4*4", "10"),
        ("2^10", "1024"),
        ("-(3)", "-3"),
        ("7 // 2 + 7 % 2", "4"),
        ("sqrt(16) + log10(1000)", "7"),
        ("gcd(12, 18)", "6"),
        ("1/3", "0.333333333333"),
        ("pi", "3.14159265359"),
    ],
)
def test_calculator_values(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("9**9**9", "exponents above"),
        ("__import__('os').system('id')", "not arithmetic"),
        ("open('/etc/passwd')", "not arithmetic"),
        ("x + 1", "unknown name `x`"),
        ("1/0", "division by zero"),
        ("", "empty"),
        ("(1", "cannot parse"),
        ("factorial(5000)", "limited"),
        ("(9**9999)**9999", "more than 4000 digits"),
        ("1" * 3000, "longer than"),
        ("[1, 2]", "not arithmetic"),
        ("sqrt(-1)", "domain"),
    ],
)
def test_calculator_refuses_what_is_not_bounded_arithmetic(expression, reason):
    with pytest.raises(CalculatorError, match=reason):
        evaluate(expression)


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_calculator_never_raises_anything_else(text):
    try:
        assert isinstance(evaluate(text), str)
    except CalculatorError as error:
        assert str(error)


def test_expert_solves_arithmetic_through_the_calculator():
    env = gym.make("AgentFly/Math-v0")
    for seed in range(10):
        observation, info = env.reset(seed=seed)
        assert observation == info["task"]["prompt"] and info["task"]["dataset"] == "basic_arithmetic"
        action = env.unwrapped.expert_action()
        observation, *_ = env.step(action)
        assert observation == info["task"]["answer"]  # the calculator agrees with the generator
        _, reward, terminated, _, step_info = env.step(env.unwrapped.expert_action())
        assert (reward, terminated, step_info["step"].success) == (1.0, True, True)
        assert step_info["step"].reward_components == {"correct": 1.0}
    env.close()


def test_wrong_answer_scores_below_one():
    env = gym.make("AgentFly/Math-v0")
    _, info = env.reset(seed=0)
    _, reward, terminated, _, step_info = env.step(f"<answer>{info['task']['answer']}1</answer>")
    assert terminated and reward < 1.0 and step_info["step"].success is False


def test_of_several_answers_in_a_turn_the_last_counts_as_in_reasoning_gym():
    env = gym.make("AgentFly/Math-v0")
    _, info = env.reset(seed=0)
    right, wrong = info["task"]["answer"], f"{info['task']['answer']}1"
    assert env.step(f"<answer>{wrong}</answer> no, wait: <answer> {right} </answer>")[1] == 1.0
    env.reset(seed=0)
    _, reward, _, _, step_info = env.step(f"<answer>{right}</answer><answer>{wrong}</answer>")
    assert reward < 1.0 and step_info["answer"] == wrong
    env.close()


@pytest.mark.parametrize("dataset", ["countdown", "simple_equations", "gcd", "letter_counting", "word_sorting"])
def test_other_datasets_are_reachable_and_scored_by_their_own_scorer(dataset):
    env = gym.make("AgentFly/Math-v0", dataset=dataset, size=20)
    _, info = env.reset(seed=1)
    assert info["task"]["dataset"] == dataset
    _, reward, terminated, _, _ = env.step(f"<answer>{info['task']['answer']}</answer>")
    assert terminated and reward == 1.0
    env.close()


def test_every_dataset_name_is_offered():
    assert len(dataset_names()) >= 100 and "basic_arithmetic" in dataset_names()


def test_difficulty_splits_and_config():
    easy = ReasoningGymTasks("basic_arithmetic", size=50, difficulty=0)
    hard = ReasoningGymTasks("basic_arithmetic", size=50, difficulty=3)
    assert max(task["metadata"]["num_terms"] for task in (easy[i] for i in range(50))) <= 2
    assert max(task["metadata"]["num_terms"] for task in (hard[i] for i in range(50))) > 2
    train, evaluation = ReasoningGymTasks(size=20), ReasoningGymTasks(size=20, split="eval")
    assert {train[i]["prompt"] for i in range(20)} != {evaluation[i]["prompt"] for i in range(20)}
    configured = ReasoningGymTasks("basic_arithmetic", size=10, config={"min_terms": 5, "max_terms": 5})
    assert configured[0]["metadata"]["num_terms"] == 5


def test_bad_options_are_clear():
    with pytest.raises(ValueError, match="unknown reasoning-gym dataset 'nope'"):
        MathEnv("nope")
    with pytest.raises(ValueError, match="unknown tools"):
        MathEnv(tools=["python"])
    with pytest.raises(ValueError, match="split must be"):
        MathEnv(split="test")


def test_sources_with_one_configuration_share_their_generated_items():
    first, second = ReasoningGymTasks("chain_sum", size=30), ReasoningGymTasks("chain_sum", size=30)
    assert first._task is second._task  # the envs of a vector generate each item once between them
    assert [first[i] for i in range(30)] == [second[i] for i in range(30)]
    others = [
        ReasoningGymTasks("chain_sum", size=31),
        ReasoningGymTasks("chain_sum", size=30, split="eval"),
        ReasoningGymTasks("chain_sum", size=30, difficulty=2),
        ReasoningGymTasks("chain_sum", size=30, config={"max_terms": 3}),
        ReasoningGymTasks("basic_arithmetic", size=30),
    ]
    assert all(other._task is not first._task for other in others)
    assert len({id(other._task) for other in others}) == len(others)


def test_a_seed_gives_the_same_task_everywhere():
    """Pinned: the seed picks the index (``rng.integers`` on the env's PCG64; see agentfly_env.core.tasks), the
    split's seed the item (reasoning-gym's generator)."""
    env = gym.make("AgentFly/Math-v0", dataset="chain_sum")
    drawn = [(info["task"]["id"], info["task"]["answer"]) for info in (env.reset(seed=seed)[1] for seed in range(5))]
    assert drawn == [
        ("chain_sum/8506", "-744"), ("chain_sum/4731", "-7"), ("chain_sum/8375", "-132"),
        ("chain_sum/8115", "105"), ("chain_sum/7264", "1153"),
    ]  # fmt: skip
    env.close()


def test_tasks_are_shared_read_only_and_score_as_before():
    env = gym.make("AgentFly/Math-v0", dataset="chain_sum")
    _, info = env.reset(seed=0)
    assert info["start"].task is env.unwrapped.task_source[8506]  # the cached task itself: no copy per episode
    with pytest.raises(TypeError, match="read-only"):
        info["task"]["metadata"]["expression"] = "1 + 1"
    assert env.step(f"<answer>{info['task']['answer']}</answer>")[1] == 1.0
    env.close()


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["<answer>", "</answer>", " ", "\n", "42", "x", "<", ">", "answer"]), max_size=12))
def test_the_final_answer_is_read_as_reasoning_gyms_extract_answer_reads_it(pieces):
    from reasoning_gym.utils import extract_answer

    text = "".join(pieces)
    assert MATH.find_answer(text, []) == extract_answer(text, tag_name="answer")


MATH = MathEnv("chain_sum", size=10)
