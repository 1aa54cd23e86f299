"""One episode through the ``openenv`` package's own client, run in openenv's venv (not this project's).

Usage: python _openenv_client.py URL SEED ACTIONS_JSON
Prints one JSON object: every StepResult (the reset's first) and the session's state.
"""

import dataclasses
import json
import sys

from openenv.core import GenericEnvClient

url, seed, actions = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
with GenericEnvClient(base_url=url).sync() as env:
    results = [dataclasses.asdict(env.reset(seed=seed))]
    results += [dataclasses.asdict(env.step({"message": action})) for action in actions]
    state = env.state()
print(json.dumps({"results": results, "state": state}))
