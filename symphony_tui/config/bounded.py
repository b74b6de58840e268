"""Budgets for evaluating ``WORKFLOW.md``: its YAML front matter and its Liquid prompt.

A workflow file is input like any other: a YAML alias bomb ("billion laughs") or a prompt
loop over ``(1..100000000)`` must cost a clear one-line error, not the scheduler's memory
and event loop. Three layers:

* YAML (:class:`BudgetLoader`): at most :data:`MAX_FRONT_MATTER_BYTES` of text, at most
  :data:`MAX_YAML_FLOW_DEPTH` nested ``[`` / ``{``, at most :data:`MAX_YAML_ALIASES`
  aliases and at most :data:`MAX_YAML_NODES` values once every alias is expanded (counted
  on the composed graph, each shared node once per use, before any Python object is
  built);
* Liquid (``prompt.py``): the environment's loop, output, namespace and depth limits
  (:data:`LIQUID_LIMITS`, python-liquid's ``Environment`` class settings);
* a deadline (:func:`run_within`): the whole evaluation runs in a thread of its own and
  the caller gets its answer or, after :data:`EVALUATION_DEADLINE_S`, a one-line error
  (``workflow_parse_error`` for a load, ``template_render_error`` for a render).
  Python cannot stop a thread: one past its deadline finishes in the background, bounded
  by the limits above.

Errors are :class:`~symphony_tui.config.errors.WorkflowError` (one line).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import yaml

from symphony_tui.config.errors import WorkflowError

#: Bytes of YAML front matter read at most (a real front matter is a few kilobytes).
MAX_FRONT_MATTER_BYTES = 1_000_000
#: Aliases (``*name``) allowed in the front matter.
MAX_YAML_ALIASES = 1_000
#: Values (scalars, lists, maps) the front matter may hold with every alias expanded.
MAX_YAML_NODES = 200_000
#: Flow collections (``[`` / ``{``) open at once at most. PyYAML's scanner costs the square
#: of this depth, and its composer recurses once per level (Python's recursion limit ends
#: it near 300 anyway): past this, one line instead of seconds of work.
MAX_YAML_FLOW_DEPTH = 200
#: Seconds the front matter and the prompt check may take together.
EVALUATION_DEADLINE_S = 5.0
#: python-liquid ``Environment`` limits (their names): loops may run this many iterations
#: in all (nested loops multiply), a render may write this many characters, assigned and
#: captured values may hold this many bytes, and contexts may nest this deep.
LIQUID_LIMITS = {
    "loop_iteration_limit": 100_000,
    "output_stream_limit": 2_000_000,
    "local_namespace_limit": 2_000_000,
    "context_depth_limit": 30,
}

T = TypeVar("T")


class YamlBudgetExceeded(yaml.YAMLError):
    """The front matter is over one of the budgets; ``str()`` says which, in one line."""


class BudgetLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the alias and expanded-size budgets (module docstring).
    Use it as ``yaml.load(text, Loader=BudgetLoader)``; raises :class:`YamlBudgetExceeded`."""

    def __init__(self, stream: str) -> None:
        if len(stream) > MAX_FRONT_MATTER_BYTES:
            raise YamlBudgetExceeded(
                f"the front matter is {len(stream)} characters, over the "
                f"{MAX_FRONT_MATTER_BYTES} allowed"
            )
        super().__init__(stream)
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise YamlBudgetExceeded(
                    f"the front matter uses more than {MAX_YAML_ALIASES} aliases (*name)"
                )
        return super().compose_node(parent, index)  # type: ignore[arg-type]  # also None or a key node; stubs say int

    def fetch_flow_collection_start(self, TokenClass: type[yaml.Token]) -> None:
        if self.flow_level >= MAX_YAML_FLOW_DEPTH:
            raise YamlBudgetExceeded(
                f"the front matter is nested too deeply (more than {MAX_YAML_FLOW_DEPTH} [ or {{)"
            )
        super().fetch_flow_collection_start(TokenClass)

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {})
        return node


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """The number of values under ``node`` with every alias expanded (a node reached twice
    counts twice); raises :class:`YamlBudgetExceeded` past :data:`MAX_YAML_NODES`.
    ``sizes`` memoizes per node, so the walk costs the graph's size, not the expansion's."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    total = 1
    if isinstance(node, yaml.SequenceNode):
        children: list[yaml.Node] = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    sizes[id(node)] = MAX_YAML_NODES + 1  # a cycle (a recursive alias) counts as too big
    for child in children:
        total += _expanded_size(child, sizes)
        if total > MAX_YAML_NODES:
            raise YamlBudgetExceeded(
                f"the front matter expands to more than {MAX_YAML_NODES} values through "
                "its aliases (&anchor / *alias)"
            )
    sizes[id(node)] = total
    return total


def run_within(
    work: Callable[[], T],
    what: str,
    *,
    code: str = "workflow_parse_error",
    deadline_s: float = EVALUATION_DEADLINE_S,
) -> T:
    """``work()`` in a daemon thread, its result or exception returned or raised here;
    ``WorkflowError(code)`` naming ``what`` when it has not finished after ``deadline_s``
    seconds (it then finishes in the background). Blocks the caller: from an event loop,
    call it through ``asyncio.to_thread``."""
    done = threading.Event()
    value: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            value.append(work())
        except BaseException as err:  # handed to the caller
            error.append(err)
        finally:
            done.set()

    threading.Thread(target=target, name="workflow-evaluation", daemon=True).start()
    if not done.wait(deadline_s):
        raise WorkflowError(
            code,
            f"{what} took longer than {deadline_s:g} s; refused",
        )
    if error:
        raise error[0]
    return value[0]
