"""Mermaid ``xychart-beta`` blocks: busbw against message size, one line per series, for the Markdown
reports (GitHub and GitLab render them without any plugin).

xychart-beta draws no legend, and its default palette differs by theme: each chart sets its palette in an
init directive (``themeVariables.xyChart.plotColorPalette``: the Okabe-Ito colours, told apart with colour
blindness too) and is followed by a legend that names each line's colour, in drawing order. Only the sizes
every series measured are categories (a line needs a number for each).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from distval.escape import markdown_cell, strip_controls
from distval.results.bandwidth import Figure


@dataclass(frozen=True)
class Series:
    name: str  # a scenario, or "image: scenario" when comparing
    figures: tuple[Figure, ...]  # one operation's figures


# (name, hex) in drawing order: the n-th line takes the n-th colour (Mermaid cycles the palette past its end).
PALETTE = (
    ("blue", "#0072B2"),
    ("orange", "#E69F00"),
    ("bluish green", "#009E73"),
    ("vermillion", "#D55E00"),
    ("sky blue", "#56B4E9"),
    ("reddish purple", "#CC79A7"),
    ("yellow", "#F0E442"),
    ("black", "#000000"),
)


def colour(index: int) -> tuple[str, str]:
    """The (name, hex) of the line drawn ``index``-th (from 0)."""
    return PALETTE[index % len(PALETTE)]


def palette_directive(lines: int) -> str:
    """The init directive that gives ``lines`` lines their PALETTE colours, whatever the reader's theme."""
    colours = ", ".join(colour(i)[1] for i in range(min(lines, len(PALETTE))))
    return '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + colours + '"}}}}%%'


# Labels come from rank records (operation names, size labels) and configs (scenario names): untrusted text.
LABEL_MAX_CHARS = 80
# Inside a Mermaid string: '"' would end it (it cannot be escaped), '<' and '>' could reach the SVG as
# HTML where labels render as HTML, and '%%' starts a directive (%%{init: ...}%%) that Mermaid looks for
# anywhere in the source; each becomes a look-alike that means nothing to Mermaid.
_MERMAID_SPECIAL = str.maketrans({'"': "'", "<": "\u2039", ">": "\u203a", "`": "'"})


def _quoted(text: str) -> str:
    """A Mermaid string of untrusted text: one line without controls, at most LABEL_MAX_CHARS characters,
    and nothing in it that ends the string, becomes markup or forms a directive."""
    one_line = " ".join(strip_controls(text).split())
    if len(one_line) > LABEL_MAX_CHARS:
        one_line = one_line[: LABEL_MAX_CHARS - 3] + "..."
    safe = one_line.translate(_MERMAID_SPECIAL)
    while "%%" in safe:
        safe = safe.replace("%%", "% %")
    return f'"{safe}"'


def _number(value: float) -> str:
    return f"{value:.4g}" if value < 1e4 else f"{value:.0f}"


def _axis_max(peak: float) -> float:
    """A round upper bound above ``peak``: 1, 2 or 5 times a power of ten."""
    if peak <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(peak))
    return float(next(step * power for step in (1, 2, 5, 10) if step * power >= peak))


def busbw_chart(operation: str, series: Sequence[Series]) -> str | None:
    """The xychart-beta source for ``operation`` (no fence), or None when no size is common to every series."""
    if not series:
        return None
    common = set.intersection(*({f.size for f in s.figures if f.operation == operation} for s in series))
    sizes = sorted(common)
    if not sizes:
        return None
    labels = {f.size: f.label for s in series for f in s.figures}
    values = [
        [next(f.busbw_gbps for f in s.figures if f.operation == operation and f.size == size) for size in sizes] for s in series
    ]
    top = _axis_max(max(max(v) for v in values))
    lines = [
        palette_directive(len(series)),
        "xychart-beta",
        f"    title {_quoted(f'{operation} busbw (GB/s) by message size')}",
        f"    x-axis {_quoted('message size')} [{', '.join(_quoted(labels[size]) for size in sizes)}]",
        f"    y-axis {_quoted('busbw (GB/s)')} 0 --> {_number(top)}",
    ]
    lines += [f"    line [{', '.join(_number(v) for v in row)}]" for row in values]
    return "\n".join(lines)


def chart_section(operations: Sequence[str], series: Sequence[Series]) -> list[str]:
    """Markdown lines: per operation a fenced ``mermaid`` chart and the names of its lines, in order."""
    lines: list[str] = []
    for operation in operations:
        chart = busbw_chart(operation, series)
        if chart is None:
            continue
        lines += ["```mermaid", chart, "```", ""]
        lines += [legend(series), ""]
    return lines


def legend(series: Sequence[Series]) -> str:
    """The chart's lines, each with its colour, in drawing order: ``Lines: 1. blue (#0072B2): inside; ...``."""
    names = "; ".join(
        f"{i}. {colour(i - 1)[0]} ({colour(i - 1)[1]}): {markdown_cell(s.name)}" for i, s in enumerate(series, start=1)
    )
    if len(series) > len(PALETTE):
        return f"Lines: {names}. The colours repeat after {len(PALETTE)} lines: the order tells those apart."
    return f"Lines: {names}."
