"""The several-hosts probe's JSON line is the image's Python's output: each field is checked before it becomes a
placeholder of a command line (an interface name, an address, the rendezvous ports). Anything else is one line
(EngineError), never an exception and never a value passed on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distval.errors import EngineError
from distval.targets.engines.runtime import probe_facts

GOOD: dict[str, Any] = {"address": "10.0.0.1", "interface": "eth0", "ports": [40001, 40002]}


def test_a_good_answer_gives_the_facts() -> None:
    facts = probe_facts("h1", json.dumps(GOOD), first=True)
    assert facts["master_port"] == "40001" and facts["c10d_port"] == "40002"
    assert "eth0" in facts.values() and "10.0.0.1" in facts.values()


def test_a_host_other_than_node_0s_is_asked_for_no_ports() -> None:
    """plan.py asks the other hosts' probes for 0 ports: their empty list is their answer (found on two node Engines)."""
    facts = probe_facts("h2", json.dumps({**GOOD, "ports": []}), first=False)
    assert "master_port" not in facts and "eth0" in facts.values()
    with pytest.raises(EngineError, match="its ports are not only port numbers"):
        probe_facts("h2", json.dumps({**GOOD, "ports": ["1; rm -rf /"]}), first=False)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"ports": ["1; rm -rf /", 2]}, "its ports are not two port numbers"),
        ({"ports": [0, 70000]}, "its ports are not two port numbers"),
        ({"ports": [True, 2]}, "its ports are not two port numbers"),
        ({"ports": [40001]}, "its ports are not two port numbers"),
        ({"ports": "40001,40002"}, "its ports are not two port numbers"),
        ({"address": "10.0.0.1; id"}, "its address is not an IP address"),
        ({"address": ["10.0.0.1"]}, "its address is not an IP address"),
        ({"interface": "eth0 $(id)"}, "its interface is not a network interface's name"),
        ({"interface": "a" * 16}, "its interface is not a network interface's name"),
        ({"interface": ""}, "found no interface holding 10.0.0.1"),
    ],
)
def test_a_field_that_is_not_what_it_says_is_refused(change: dict[str, Any], said: str) -> None:
    with pytest.raises(EngineError, match=said.replace("(", r"\(").replace(")", r"\)")) as caught:
        probe_facts("h1", json.dumps({**GOOD, **change}), first=True)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("line", ["not json", "[1, 2]", '{"address": "10.0.0.1", "address": "10.0.0.2"}', "[" * 5000, "\x1b[2J"])
def test_a_line_that_is_no_json_object_is_refused(line: str) -> None:
    with pytest.raises(EngineError, match="the host probe on h1 printed") as caught:
        probe_facts("h1", line, first=False)
    assert "\x1b" not in str(caught.value)
