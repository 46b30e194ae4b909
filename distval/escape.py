"""Text written by the image under test (case names, messages, op names, figure labels) is data: these
functions make it safe for each place it is shown — a Markdown table cell (also GitHub's step summary,
which renders HTML), and a terminal (no escape sequence of the image's reaches it).

Every report writer and every terminal line that can carry such text goes through here.
"""

from __future__ import annotations

import html
import re
import unicodedata

# C0 and C1 controls (ESC, OSC's BEL, CSI's 0x9b ...), and Unicode's bidirectional overrides and isolates
# (which reorder what a reader sees: "Trojan Source", CVE-2021-42574), and zero-width joiners/marks.
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]|#!~])")
_SURROGATE = re.compile("[\ud800-\udfff]")
# What no well-formed text holds: lone surrogates (json.loads makes them of "\udc80"; UTF-8 cannot encode them) and
# Unicode's noncharacters (U+FDD0..U+FDEF and the last two code points of every plane, U+FFFE and U+FFFF among
# them), which XML 1.0 forbids: either one in a figure label made the chart renderer's SVG unparseable.
_NOT_TEXT = re.compile(
    "[\ud800-\udfff\ufdd0-\ufdef"
    + "".join(f"{chr(plane * 0x10000 + 0xFFFE)}{chr(plane * 0x10000 + 0xFFFF)}" for plane in range(17))
    + "]"
)


def valid_text(text: str) -> str:
    """``text`` with every lone surrogate and noncharacter as U+FFFD: what any encoder and XML parser accepts."""
    return _NOT_TEXT.sub("\ufffd", text)


def strip_controls(text: str) -> str:
    """``text`` without C0/C1 control characters (but newline and tab) and without bidi overrides; other
    format characters (category Cf) are dropped too, since they are invisible."""
    text = valid_text(_CONTROL.sub("", text))
    return "".join(c for c in text if c in "\n\t" or unicodedata.category(c) != "Cf")


def terminal_text(text: str) -> str:
    """Text for a terminal, line breaks kept: controls removed, and lone surrogates (json.loads makes them of
    a record's ``"\\udc80"``) as U+FFFD, which stdout's strict UTF-8 encoder would otherwise raise on."""
    text = strip_controls(text)
    return _SURROGATE.sub("\ufffd", text)


def terminal_line(text: str) -> str:
    """One line for a terminal: controls removed, line breaks and tabs as spaces."""
    return " ".join(terminal_text(text).split())


def markdown_cell(text: str) -> str:
    """Text for a Markdown table cell (and for inline Markdown): one line, controls removed, Markdown
    characters backslash-escaped and HTML's <, >, & as entities (GitHub renders raw HTML in Markdown)."""
    one_line = " ".join(strip_controls(text).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(one_line, quote=False))


def markdown_code(text: str) -> str:
    """Inline code (a run id, a host name): one line, controls removed, between backtick fences longer than
    any backtick run in it (a code span ends at the first run of its own length), padded with a space where
    it starts or ends with a backtick. Markdown and HTML are not interpreted inside a code span."""
    one_line = " ".join(strip_controls(text).split())
    longest = max((len(run) for run in re.findall("`+", one_line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if one_line.startswith("`") or one_line.endswith("`") else ""
    return f"{fence}{pad}{one_line}{pad}{fence}"
