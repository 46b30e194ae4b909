"""The history page's trend charts: Vega-Lite specs rendered to SVG offline by vl-convert, then rebuilt from an
allow list of SVG elements and attributes before they go into the page.

Why this way (docs/reports.md, "History at a glance"): vl-convert runs Vega-Lite in an embedded JavaScript engine at
render time and hands back a static SVG, so the page carries no JavaScript at all and can forbid scripts in its
Content-Security-Policy; a chart is ~10-50 KB of SVG instead of plotly.js's 4.6 MB per page; and nothing is fetched,
then or when the page opens (``allowed_base_urls=[]``: the spec has its data inline, and no URL may be loaded).

The SVG is the output of a third party's renderer fed with an image's untrusted text (series names in the legend,
in each point's aria-label). It is parsed and written again element by element: only the elements and
attributes charts use are kept, every value is escaped by this module, and a ``clip-path`` may only name a
fragment of the same SVG. Script, event handlers, links and foreign content cannot survive that, whatever the
renderer wrote.

vl-convert is an optional dependency (the ``html`` extra): without it, ``available()`` is False and
``HtmlUnavailable`` says how to install it.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distval.comparing.history import Series
from distval.errors import BadInput
from distval.escape import strip_controls

try:  # the optional html extra: distval without it still runs, and --html says what to install
    import vl_convert
except ImportError:  # pragma: no cover - the test extra installs it
    vl_convert = None  # type: ignore[assignment]  # mypy types the name as the module; None marks it missing

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
# What Vega's SVG renderer writes for line, point, rule and text marks, axes and legends (vl-convert 1.9).
ELEMENTS = frozenset({"svg", "g", "path", "rect", "line", "circle", "text", "tspan", "title", "desc", "defs", "clipPath"})
ATTRIBUTES = frozenset(
    {
        "aria-hidden", "aria-label", "aria-roledescription", "class", "clip-path", "cx", "cy", "d", "display", "dx",
        "dy", "fill", "fill-opacity", "font-family", "font-size", "font-style", "font-weight", "height", "id",
        "opacity", "pointer-events", "r", "role", "rx", "ry", "stroke", "stroke-dasharray", "stroke-dashoffset",
        "stroke-linecap", "stroke-linejoin", "stroke-miterlimit", "stroke-opacity", "stroke-width", "text-anchor",
        "transform", "version", "viewBox", "width", "x", "x1", "x2", "y", "y1", "y2",
    }
)  # fmt: skip
_FRAGMENT = re.compile(r"url\(#[A-Za-z0-9_-]{1,64}\)")
# A series name in a legend or a point's label: the image's text, one line and short.
SERIES_NAME_MAX_CHARS = 60
WIDTH = 560
HEIGHT = 170


class HtmlUnavailable(BadInput):
    """--html without vl-convert installed."""

    kind = "html"


def available() -> bool:
    return vl_convert is not None


def require() -> None:
    """HtmlUnavailable (exit code 2, one line) unless the charts can be rendered."""
    if vl_convert is None:
        raise HtmlUnavailable(
            "the HTML report needs vl-convert-python, which renders its charts offline: pip install 'distval[html]'"
        )


def series_name(text: str) -> str:
    """An image's text as a series name: one line, no controls, at most SERIES_NAME_MAX_CHARS characters."""
    one_line = " ".join(strip_controls(text).split())
    return one_line if len(one_line) <= SERIES_NAME_MAX_CHARS else one_line[: SERIES_NAME_MAX_CHARS - 1] + "…"


@dataclass(frozen=True)
class Chart:
    """One rendered chart: its sanitized SVG and what it plots (the page says it in text too)."""

    svg: str
    points: int
    regressed: int


def spec(runs: Sequence[str], series: Sequence[Series], title: str, log: bool) -> dict[str, Any]:
    """A Vega-Lite spec: one line with points per series over the runs (x: every run, in order, so that the charts
    of all scenarios line up), regressed points drawn again as red down-pointing triangles."""
    values = [
        {"run": runs[p.run], "value": p.value, "series": series_name(s.name), "regressed": p.regressed}
        for s in series
        for p in s.points
    ]
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "width": WIDTH,
        "height": HEIGHT,
        "data": {"values": values},
        "encoding": {
            "x": {"field": "run", "type": "ordinal", "scale": {"domain": list(runs)}, "axis": {"labelAngle": 0}, "title": "run"},
            "y": {"field": "value", "type": "quantitative", "scale": {"type": "log" if log else "linear"}, "title": title},
            "color": {
                "field": "series",
                "type": "nominal",
                "scale": {"scheme": "tableau20"},
                "legend": {"title": None, "labelLimit": 220, "columns": 1} if len(series) > 1 else None,
            },
        },
        "layer": [
            {"name": "trend", "mark": {"type": "line", "point": {"filled": True, "size": 40}}},
            {
                "name": "regressed",
                "transform": [{"filter": "datum.regressed"}],
                "mark": {"type": "point", "shape": "triangle-down", "size": 220, "filled": True},
                # Red whatever the series' colour (a mark's own colour loses to the shared encoding).
                "encoding": {"color": {"value": "#c00000"}},
            },
        ],
        "config": {"font": "sans-serif", "view": {"stroke": "#ccc"}},
    }


def render(runs: Sequence[str], series: Sequence[Series], title: str) -> Chart:
    """The chart of ``series`` over ``runs`` (the x labels, by run index) as sanitized SVG. A log scale when every
    value is above 0 and they span more than a factor of 20 (busbw of 4 KiB and 64 MiB messages)."""
    require()
    assert vl_convert is not None
    numbers = [p.value for s in series for p in s.points]
    log = bool(numbers) and min(numbers) > 0 and max(numbers) > 20 * min(numbers)
    svg = vl_convert.vegalite_to_svg(spec(runs, series, title, log), allowed_base_urls=[])
    return Chart(sanitized_svg(svg), len(numbers), sum(p.regressed for s in series for p in s.points))


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1] if name.startswith("{") else name


def _attributes(element: ElementTree.Element) -> str:
    kept = []
    for name, value in element.attrib.items():
        if name.startswith("{") or name not in ATTRIBUTES:
            continue  # namespaced (xlink:href, xml:space) or not on the allow list: dropped
        if name == "clip-path" and not _FRAGMENT.fullmatch(value):
            continue
        kept.append(f' {name}="{html.escape(value, quote=True)}"')
    return "".join(kept)


def _write(element: ElementTree.Element, out: list[str]) -> None:
    tag = _local(element.tag)
    if element.tag.startswith("{") and not element.tag.startswith("{" + SVG_NAMESPACE + "}") or tag not in ELEMENTS:
        return  # not an SVG element of the allow list (script, foreignObject, a, image, use, style): dropped whole
    namespace = f' xmlns="{SVG_NAMESPACE}"' if tag == "svg" and not out else ""
    out.append(f"<{tag}{namespace}{_attributes(element)}>")
    out.append(html.escape(element.text or "", quote=False))
    for child in element:
        _write(child, out)
        out.append(html.escape(child.tail or "", quote=False))
    out.append(f"</{tag}>")


def sanitized_svg(svg: str) -> str:
    """``svg`` rebuilt from its allowed elements and attributes, every text and value escaped (module docstring)."""
    root = ElementTree.fromstring(svg)
    if _local(root.tag) != "svg":
        raise ValueError(f"the chart renderer returned a {_local(root.tag)!r}, not an SVG")
    out: list[str] = []
    _write(root, out)
    return "".join(out)
