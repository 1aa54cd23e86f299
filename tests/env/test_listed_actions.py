"""Listed actions: the list an observation ends with, and the reply that names one of its actions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentfly_env.tools.listed_actions import HEADING, action_list, chosen_action

ACTIONS = st.lists(st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=30), max_size=40)


@given(ACTIONS, st.text(max_size=40))
def test_any_reply_is_a_listed_action_or_itself(actions, reply):
    chosen = chosen_action(reply, actions)
    assert chosen == reply or chosen in actions


@given(ACTIONS.filter(bool), st.data())
def test_each_number_the_list_shows_names_its_action(actions, data):
    lines = action_list(actions).split("\n")
    assert lines[:3] == ["", "", HEADING] and len(lines) == len(actions) + 3
    index = data.draw(st.integers(0, len(actions) - 1))
    number, _, shown = lines[3 + index].partition(". ")
    assert shown == actions[index]
    spacing = data.draw(st.sampled_from(["{}", " {} ", "{}.", "{})", "\\t{}. \\n"]))
    assert chosen_action(spacing.replace("\\t", "\t").replace("\\n", "\n").format(number), actions) == actions[index]


@given(ACTIONS, st.integers(-5, 10_000))
def test_a_number_outside_the_list_is_passed_on_as_written(actions, number):
    if not 1 <= number <= len(actions):
        assert chosen_action(str(number), actions) == str(number)
