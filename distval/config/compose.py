"""YAML text -> one node tree, composed from the parser's events without recursion.

PyYAML's own composer recurses once per nesting level (500 nested lists raise RecursionError), accepts
aliases to a node that contains them (a cycle every later reader must guard against), and its errors
name a line but not where in the config that line is. This composer works on the parser's events (the
C parser where PyYAML has it, with the same line numbers), keeps a stack of open collections, and so:

- refuses nesting deeper than MAX_DEPTH and aliases to a node still open (recursive), with their line;
- names the key path in every error, syntax errors and characters YAML forbids included, keeping
  PyYAML's own context ("while parsing a block mapping ...");
- applies YAML merge keys (``<<: *defaults``, ``<<: [*a, *b]``) as YAML 1.1 says: the mapping's own keys
  win, then the merged mappings in the order listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.resolver import Resolver

from distval.config.values import text_problem
from distval.config.yaml_nodes import SHOWN_MAX, Problems, child_path, describe, index_path, line_of, shown
from distval.errors import ConfigError

# The parser: libyaml's where PyYAML was built with it (much faster on big files), else the pure-Python one.
LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# A scenario file nests 7 levels deep at most (scenarios[0].checks[0].args.names[0]); 32 leaves room.
MAX_DEPTH = 32
MERGE_TAG = "tag:yaml.org,2002:merge"
# Nodes in a document once its aliases are expanded: a 20 KB file of aliases to aliases once asked the
# loader for a million checks (10,000 scenarios written out one by one are some 200,000 nodes).
EXPANDED_MAX = 300_000
# What YAML 1.1 allows in a stream (its c-printable set): every other character is an error.
_FORBIDDEN = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_RESOLVER: Any = Resolver()  # PyYAML's resolver of implicit tags (untyped in types-PyYAML)
_COLLECTION_TAGS = {yaml.SequenceNode: "tag:yaml.org,2002:seq", yaml.MappingNode: "tag:yaml.org,2002:map"}


@dataclass
class _Open:
    """A collection being composed: its node, its path, and (a mapping) the key waiting for its value."""

    node: yaml.SequenceNode | yaml.MappingNode
    path: str
    pairs: list[tuple[yaml.Node, yaml.Node]] = field(default_factory=list)
    key: yaml.Node | None = None
    size: int = 1  # the nodes in it, each alias counted as the nodes it repeats


def _cut(name: str | None) -> str:
    """An anchor's name for a message (anchors have no blanks, but any length)."""
    text = str(name)
    return text if len(text) <= SHOWN_MAX else f"{text[:SHOWN_MAX]}... ({len(text)} characters)"


def _key_text(node: yaml.Node) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


class _Composer:
    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        self.stack: list[_Open] = []
        self.anchors: dict[str, tuple[yaml.Node, int]] = {}
        self.open_ids: set[int] = set()
        self.root: yaml.Node | None = None
        self.sizes: dict[int, int] = {}  # a finished collection's size, for the aliases to it
        self.documents = 0
        self.built = 0  # the nodes so far, each alias counted as the nodes it repeats

    def path(self) -> str:
        """The key path of what the parser is reading now."""
        if not self.stack:
            return ""
        top = self.stack[-1]
        if isinstance(top.node, yaml.SequenceNode):
            return index_path(top.path, len(top.node.value))
        return top.path if top.key is None else child_path(top.path, _key_text(top.key))

    def fail(self, line: int | None, message: str, where: str | None = None) -> ConfigError:
        where = self.path() if where is None else where
        number = f":{line}" if line is not None else ""
        return ConfigError([f"{self.problems.path}{number}: {where + ': ' if where else ''}{message}"])

    def feed(self, event: Any) -> None:
        """Compose one parser event (typed Any: types-PyYAML's events may lack marks, the parser's never do)."""
        start: Any = event.start_mark
        end: Any = event.end_mark
        line = start.line + 1
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise self.fail(line, "not valid YAML: expected a single document in the stream; found another document")
        elif isinstance(event, yaml.AliasEvent):
            known = self.anchors.get(event.anchor or "")
            if known is None:
                raise self.fail(line, f"alias *{_cut(event.anchor)} refers to no anchor defined before it")
            if id(known[0]) in self.open_ids:
                raise self.fail(line, f"alias *{_cut(event.anchor)} is inside the node it refers to (line {known[1]}): a cycle")
            size = self.sizes.get(id(known[0]), 1)
            self.count(line, size)
            self.add(known[0], size)
        elif isinstance(event, yaml.ScalarEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
            self.count(line, 1)
            node = yaml.ScalarNode(tag, event.value, start, end, style=event.style)
            # Every key and value of the file passes here once (an alias does not): the one check of its text.
            problem = text_problem(event.value)
            if problem is not None:
                top = self.stack[-1] if self.stack else None
                is_key = top is not None and isinstance(top.node, yaml.MappingNode) and top.key is None
                self.problems.add_general(node, child_path(top.path, event.value) if top and is_key else self.path(), problem)
            self.anchor(event, node)
            self.add(node, 1)
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(self.stack) >= MAX_DEPTH:
                raise self.fail(line, f"expected at most {MAX_DEPTH} levels of nesting; this is deeper")
            self.count(line, 1)
            kind: type[yaml.SequenceNode] | type[yaml.MappingNode]
            kind = yaml.SequenceNode if isinstance(event, yaml.SequenceStartEvent) else yaml.MappingNode
            tag = event.tag
            if tag is None or tag == "!":
                tag = _RESOLVER.resolve(kind, None, event.implicit)
            collection = kind(tag, [], start, end, flow_style=event.flow_style)
            if tag != _COLLECTION_TAGS[kind]:
                what = "list" if kind is yaml.SequenceNode else "mapping"
                self.problems.add(collection, self.path(), f"expected a {what} without a tag; got one tagged {shown(tag)}")
            self.anchor(event, collection)
            self.stack.append(_Open(collection, self.path()))
            self.open_ids.add(id(collection))
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            done = self.stack.pop()
            self.open_ids.discard(id(done.node))
            done.node.end_mark = end
            if isinstance(done.node, yaml.MappingNode):
                done.node.value = self.merged(done)
            self.sizes[id(done.node)] = done.size
            self.add(done.node, done.size)

    def count(self, line: int, size: int) -> None:
        """Count nodes as they are built: a bound checked only when a collection closed let one 4 MB list
        build millions of nodes (620 MB) before it was refused."""
        self.built += size
        if self.built > EXPANDED_MAX:
            raise self.fail(
                line,
                f"expected at most {EXPANDED_MAX} nodes in the file once aliases are expanded (an alias repeats what "
                f"it refers to); this {'alias' if size > 1 else 'node'} makes {self.built}",
            )

    def anchor(self, event: Any, node: yaml.Node) -> None:
        if event.anchor is None:
            return
        line = event.start_mark.line + 1
        if event.anchor in self.anchors:
            raise self.fail(
                line, f"anchor &{_cut(event.anchor)} is defined twice (first on line {self.anchors[event.anchor][1]})"
            )
        self.anchors[event.anchor] = (node, line)

    def add(self, node: yaml.Node, size: int) -> None:
        if not self.stack:
            self.root = node
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.node, yaml.SequenceNode):
            top.node.value.append(node)
        elif top.key is None:
            top.key = node
        else:
            top.pairs.append((top.key, node))
            top.key = None

    def merged(self, done: _Open) -> list[tuple[yaml.Node, yaml.Node]]:
        """The mapping's pairs with its merge keys applied: its own keys first in precedence, then each merged mapping's."""
        own = [(k, v) for k, v in done.pairs if k.tag != MERGE_TAG]
        sources: list[yaml.MappingNode] = []
        for key, value in done.pairs:
            if key.tag != MERGE_TAG:
                continue
            items = value.value if isinstance(value, yaml.SequenceNode) else [value]
            for item in items:
                if isinstance(item, yaml.MappingNode):
                    sources.append(item)
                else:
                    self.problems.add(
                        item,
                        child_path(done.path, "<<"),
                        f"expected a mapping or a list of mappings to merge (<<: *anchor); got {describe(item)}",
                    )
        if not sources:
            return own
        seen = {_key_text(k) for k, _ in own}
        result: list[tuple[yaml.Node, yaml.Node]] = []
        for source in sources:
            for key, value in source.value:  # already merged itself: it ended before this mapping did
                text = _key_text(key)
                if text is None or text not in seen:
                    result.append((key, value))
                    seen.add(text)
        return result + own


def _syntax_message(exc: yaml.YAMLError) -> str:
    """PyYAML's own explanation, on one line: its context (with the context's line) and the problem."""
    parts: list[str] = []
    context = getattr(exc, "context", None)
    if context:
        mark = getattr(exc, "context_mark", None)
        parts.append(f"{context} (line {mark.line + 1})" if mark is not None else str(context))
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc).splitlines()[0]
    parts.append(str(problem))
    note = getattr(exc, "note", None)
    if note:
        parts.append(str(note))
    return "not valid YAML: " + ": ".join(" ".join(part.split()) for part in parts)


def compose(text: str, problems: Problems) -> yaml.Node | None:
    """The document's node tree (None: an empty document). Raises ConfigError (one line) for text that is not
    YAML, nests too deep or holds a cycle; a bad merge key is a problem added to ``problems``."""
    forbidden = _FORBIDDEN.search(text)
    composer = _Composer(problems)
    if forbidden is not None:
        # Where the character is: the pure-Python parser (its marks count characters) over the text with it
        # replaced, up to the event that reaches past it; the composer's path is then the character's.
        at = forbidden.start()
        try:
            event: Any
            for event in yaml.parse(f"{text[:at]}x{text[at + 1 :]}", Loader=yaml.SafeLoader):
                if event.end_mark.index > at:
                    break
                composer.feed(event)
        except (yaml.YAMLError, ConfigError):
            pass  # a problem before the character: the path is where the parser stopped
    else:
        try:
            for event in yaml.parse(text, Loader=LOADER):
                composer.feed(event)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise composer.fail(mark.line + 1 if mark is not None else None, _syntax_message(exc)) from None
    if forbidden is not None:
        character = forbidden.group()
        if "\udc80" <= character <= "\udcff":  # a byte that was not UTF-8 (decoded with surrogateescape)
            message = f"not UTF-8: byte {ord(character) - 0xDC00:#04x} is not a UTF-8 character"
        else:
            message = (
                f"not valid YAML: character {character!r} (U+{ord(character):04X}) is not allowed in YAML; "
                "write it as an escape in a double-quoted string"
            )
        raise composer.fail(line_of(text, forbidden.start()), message)
    return composer.root
