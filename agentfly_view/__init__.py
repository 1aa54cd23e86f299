"""agentfly_view: ``agentfly-view``, a local web page over run directories.

Curves (reward, success, turns, tool calls, KL, losses; per env; runs overlaid), an episode list that
filters and searches a 100k-episode run lazily, and one episode turn by turn with the tokens it was
trained on coloured by the action mask (an agent program's row by row, each row that began on a prefix
mismatch marked). :mod:`~agentfly_view.runs` reads run directories (incrementally, skipping and
counting damaged lines), :mod:`~agentfly_view.app` serves them (Starlette), and
:mod:`~agentfly_view.cli` starts it. The ``view`` extra installs the web server.
"""
