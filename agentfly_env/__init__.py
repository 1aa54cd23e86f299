"""AgentFly-Gym: multi-turn text Gymnasium environments for training LLM agents.

Importing the package registers the ``AgentFly/*`` ids of every installed env suite with Gymnasium
(suites announce themselves in the ``agentfly.envs`` entry-point group; see
:mod:`agentfly_env.registration`)::

    import gymnasium as gym
    import agentfly_env

    env = gym.make("AgentFly/Math-v0")
    observation, info = env.reset(seed=0)
"""

from agentfly_env.core.aio import run_sync
from agentfly_env.core.env import AgentEnv, EnvStateError, OptionsError
from agentfly_env.core.manifest import DataSpec, Manifest, RewardSpec, manifest_of, tool_schemas
from agentfly_env.core.spaces import TextSpace, ToolCallSpace
from agentfly_env.core.tasks import ListTasks, TaskSource, load_jsonl_tasks
from agentfly_env.core.types import Message, ParseError, ParseResult, Step, ToolCall, ToolResult, Trajectory
from agentfly_env.registration import register, register_envs, registered_ids
from agentfly_env.resources.pool import PoolConfig, ResourceManager, ResourcePool, ResourceSpec
from agentfly_env.runners.vector import AgentVectorEnv
from agentfly_env.tools.parsing import Parser, get_parser
from agentfly_env.tools.rewards import Reward, RewardResult, reward
from agentfly_env.tools.tool import Tool, tool
from agentfly_env.tools.tool_env import ToolEnv

register_envs()

__all__ = [
    "AgentEnv",
    "AgentVectorEnv",
    "DataSpec",
    "EnvStateError",
    "OptionsError",
    "ListTasks",
    "Manifest",
    "Message",
    "ParseError",
    "ParseResult",
    "Parser",
    "PoolConfig",
    "ResourceManager",
    "ResourcePool",
    "ResourceSpec",
    "Reward",
    "RewardResult",
    "RewardSpec",
    "Step",
    "TaskSource",
    "TextSpace",
    "Tool",
    "ToolCall",
    "ToolCallSpace",
    "ToolEnv",
    "ToolResult",
    "Trajectory",
    "get_parser",
    "load_jsonl_tasks",
    "manifest_of",
    "register",
    "register_envs",
    "registered_ids",
    "reward",
    "run_sync",
    "tool",
    "tool_schemas",
]
