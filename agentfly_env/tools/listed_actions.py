"""Listed actions: an observation that ends with the actions the game reports as valid, numbered, and a reply
that may name one by its number.

The option that text games offer a small model (ALFWorld's ``list_actions``, ScienceWorld's): the policy
chooses among the commands the game itself lists (ALFWorld's admissible commands, ScienceWorld's valid
action-object combinations), as the valid-action agents of both papers and verl-agent's ALFWorld prompts do.
It is never a default: the original games show no such list, so a model trained with it has been told what it
would otherwise have to find out.

Example:
    >>> actions = ["go to cabinet 1", "look", "take soapbar 1 from toilet 1"]
    >>> print(action_list(actions))
    <BLANKLINE>
    <BLANKLINE>
    Valid actions (reply with one, or its number):
    1. go to cabinet 1
    2. look
    3. take soapbar 1 from toilet 1
    >>> chosen_action("3", actions), chosen_action(" 2. ", actions), chosen_action("open cabinet 1", actions)
    ('take soapbar 1 from toilet 1', 'look', 'open cabinet 1')
    >>> chosen_action("4", actions)  # no such number: the game answers the reply as it is
    '4'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["HEADING", "PROMPT", "action_list", "chosen_action"]

HEADING = "Valid actions (reply with one, or its number):"
#: What an env's system prompt says of the list when the option is on.
PROMPT = "Each observation ends with the valid actions: reply with one of them, or its number."
_NUMBER = re.compile(r"\s*(\d{1,4})\s*[.)]?\s*")


def action_list(actions: Sequence[str]) -> str:
    """The block an observation ends with: a blank line, :data:`HEADING`, and the actions numbered from 1."""
    return "\n\n" + "\n".join([HEADING, *(f"{number}. {action}" for number, action in enumerate(actions, 1))])


def chosen_action(reply: str, actions: Sequence[str]) -> str:
    """The action a reply names: the listed one whose number it is (``3``, ``3.``, ``3)``), else the reply itself."""
    number = _NUMBER.fullmatch(reply)
    if number is not None and 1 <= int(number.group(1)) <= len(actions):
        return actions[int(number.group(1)) - 1]
    return reply
