"""``AgentFly/WebShop-v0``: the WebShop task (Yao et al., 2022), fast and offline by default.

A shopper gets an instruction ("i need a long lasting lipstick in ruby red, and price lower than 20.00
dollars"), searches a catalog, opens products, picks options and buys; the reward is the original's
(type, attributes, options and price). Modules:

* :mod:`.env` - :class:`WebShopEnv`, the ``search[...]`` / ``click[...]`` env (or tools), and its expert;
* :mod:`.pages` - the page machine and the ``text`` / ``text_rich`` renderings;
* :mod:`.reward` - the original reward; :mod:`.nouns` - title nouns (spaCy's en_core_web_sm, or a heuristic);
* :mod:`.index` - the tantivy BM25 index, built once per catalog and shared;
* :mod:`.catalog`, :mod:`.products`, :mod:`.data`, :mod:`.generator`, :mod:`.vocabulary` - products from
  the original files or generated offline; :mod:`.goals` - goals, price caps and splits;
* :mod:`.shared` - the catalogs every env in a process shares.

Example:
    >>> import gymnasium as gym, agentfly_env, tempfile
    >>> env = gym.make("AgentFly/WebShop-v0", cache_dir=tempfile.mkdtemp())  # default: ~/.cache/agentfly/webshop
    >>> observation, info = env.reset(seed=0)
    >>> info["page"], info["available_actions"]["has_search_bar"]
    ('search', True)
"""

from agentfly_env.extras import requires_extra

with requires_extra("webshop", "tantivy", feature="AgentFly/WebShop-v0"):
    from agentfly_envs.webshop.catalog import Catalog
    from agentfly_envs.webshop.data import FileCatalog
    from agentfly_envs.webshop.env import MANIFEST, WebShopEnv, click, search
    from agentfly_envs.webshop.generator import GeneratedCatalog
    from agentfly_envs.webshop.goals import GoalTasks, build_goals
    from agentfly_envs.webshop.index import SearchIndex, open_index
    from agentfly_envs.webshop.products import DataError, Product
    from agentfly_envs.webshop.reward import webshop_reward
    from agentfly_envs.webshop.shared import shared_catalog

__all__ = [
    "MANIFEST",
    "Catalog",
    "DataError",
    "FileCatalog",
    "GeneratedCatalog",
    "GoalTasks",
    "Product",
    "SearchIndex",
    "WebShopEnv",
    "build_goals",
    "click",
    "open_index",
    "search",
    "shared_catalog",
    "webshop_reward",
]
