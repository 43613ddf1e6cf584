"""How deeply a template nests, judged without recursion, before and after Jinja2
parses it.

Jinja2's parser recurses about fourteen Python frames per bracket, and its compiler
(and Python's, on the code it generates) once or more per level of the tree, so a
template nested some sixty levels deep would exhaust the stack (RecursionError) where
it is compiled: in validation, or in a run.  Every template is therefore refused past
``MAX_NESTING`` levels, with a ``TooDeep`` (a syntax error):

1. while the parser reads its tokens (``depth_guarded``): brackets, blocks
   (``{% if %}`` ... ``{% endif %}``) and prefix operators (``not``, a sign, the ``else``
   of a conditional expression), each open until the bracket or the tag
   around it closes or the next item of a list begins (``,`` or ``:``), so that
   parsing never recurses deeper than that;
2. on the tree it built (``check_tree``): each node with children below another
   (``a + b + c`` is two levels, ``x | f | g`` two, ``a.b.c`` two), so that compiling
   never does either.
"""

from __future__ import annotations

from collections.abc import Iterator

from jinja2 import TemplateSyntaxError, nodes
from jinja2.lexer import Token

MAX_NESTING = 50

_OPEN = frozenset({"lparen", "lbracket", "lbrace"})
_CLOSE = frozenset({"rparen", "rbracket", "rbrace"})
_BLOCKS = frozenset({"if", "for", "macro", "call", "filter", "with", "block", "autoescape",
                     "trans"})
_PREFIX_NAMES = frozenset({"not", "else"})  # `else`: the parser recurses there
# a `-` or `+` after one of these is a sign (prefix), after anything else an operator
_OPERATOR_NAMES = frozenset({"and", "or", "not", "in", "is", "if", "else"})
_OPERANDS = frozenset({"name", "string", "integer", "float", "rparen", "rbracket",
                       "rbrace"})


class TooDeep(TemplateSyntaxError):
    """A template nested deeper than ``MAX_NESTING`` levels (or past what Python can
    compile)."""


def too_deep(lineno: int) -> TooDeep:
    return TooDeep(f"template nested deeper than {MAX_NESTING} levels", lineno)


class _Depth:
    """The levels open at the current token: blocks, and inside the current tag,
    brackets and prefix operators."""

    def __init__(self) -> None:
        self.blocks = 0
        self.level = 0  # inside the tag
        self.saved: list[int] = []  # ``level`` when each open bracket opened
        self.tag: str | None = None  # the first name of a `{% %}` tag, once read
        self.in_block_tag = False
        self.set_block = False  # `{% set x %}` (a block) rather than `{% set x = 1 %}`
        self.previous: Token | None = None

    def see(self, token: Token) -> int:
        kind = token.type
        if kind in ("variable_begin", "block_begin"):
            self.level, self.saved, self.tag = 0, [], None
            self.in_block_tag = kind == "block_begin"
        elif kind in ("variable_end", "block_end"):
            self._end_tag()
        elif kind in _OPEN:
            self.saved.append(self.level)
            self.level += 1
        elif kind in _CLOSE:
            self.level = self.saved.pop() if self.saved else self.level
        elif kind == "name":
            self._name(token.value)
        elif kind in ("add", "sub") and self._sign():
            self.level += 1
        elif kind in ("comma", "colon"):  # the next item: the last one's prefixes are done
            self.level = self.saved[-1] + 1 if self.saved else 0
        elif kind == "assign":
            self.set_block = False
        self.previous = token
        return self.blocks + self.level

    def _name(self, name: str) -> None:
        if self.in_block_tag and self.tag is None:
            self.tag = name
            if name in _BLOCKS:
                self.blocks += 1
            elif name.startswith("end"):
                self.blocks = max(0, self.blocks - 1)
            self.set_block = name == "set"
        elif name in _PREFIX_NAMES:
            self.level += 1

    def _sign(self) -> bool:
        before = self.previous
        return before is None or before.type not in _OPERANDS or (
            before.type == "name" and before.value in _OPERATOR_NAMES)

    def _end_tag(self) -> None:
        if self.set_block:
            self.blocks += 1
        self.level, self.saved, self.set_block = 0, [], False
        self.in_block_tag = False


def depth_guarded(tokens: Iterator[Token]) -> Iterator[Token]:
    """``tokens`` as they are, until one opens more than ``MAX_NESTING`` levels: then
    TooDeep (raised inside the parser, before it recurses that deep)."""
    depth = _Depth()
    for token in tokens:
        if depth.see(token) > MAX_NESTING:
            raise too_deep(token.lineno)
        yield token


def check_tree(tree: nodes.Node) -> None:
    """TooDeep when ``tree`` nests more than ``MAX_NESTING`` levels of nodes that have
    children (the template and its output nodes not counted); walked with a list, not
    by recursion."""
    todo: list[tuple[nodes.Node, int]] = [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        children = list(node.iter_child_nodes())
        if not children:
            continue
        if not isinstance(node, nodes.Template | nodes.Output):
            depth += 1
            if depth > MAX_NESTING:
                raise too_deep(node.lineno)
        todo.extend((child, depth) for child in children)
