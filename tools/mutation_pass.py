"""A small mutation pass: does any plausible change to a module's logic survive the module's fast tests?

    python tools/mutation_pass.py distval/results/expectations.py [distval/results/faults.py ...] [--jobs N]

For each module it parses the source with ``ast``, makes one mutant per plausible slip (a comparison's
operator or boundary, a numeric constant off by one or by an epsilon, ``and``/``or``, a negated condition,
two ``if`` branches of a chain in the other order, a sort reversed or keyed differently, ``min``/``max``
swapped, a verdict constant returned in place of another, a ``continue`` dropped), runs the tests that
cover the module against each mutant and prints one table row per mutant: killed, survived, or
equivalent (a survivor listed in ``EQUIVALENT`` with the reason no test can tell it from the original).
``--named`` runs instead the hand-written mutants of ``NAMED`` (slips no operator makes: another operation's known
answer, a call form dropped, a tolerance widened); one whose text the module no longer has is bad use (exit 2),
so that a rewrite of the module says which to write again. The suite's, against its checks run on Debian's torch:

    python tools/mutation_pass.py distval_suite/collectives.py distval_suite/ddp.py distval_suite/answers.py \
        --named --timeout 600

The mutants are written into a temporary copy of the repository (one per job); the working tree is never
touched. Each test run is its own ``pytest`` process (``-x``, no cache, no bytecode: two mutants written
in the same second must not share a stale ``.pyc``), with a timeout: a mutant that hangs the tests is
killed too. Exit status: 0 when no mutant survived outside ``EQUIVALENT``, 1 otherwise, 2 for bad use or where an
entry of ``EQUIVALENT`` names no mutant its module makes now (an edit moved it: the table shows where).
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The fast (no Docker, no host venv) test files that exercise each module, directly or through its callers:
# fault_results.fault_cases calls expectations.evaluate, fault_runtime calls decided and first_failures.
TESTS: dict[str, tuple[str, ...]] = {
    "distval/results/expectations.py": (
        "tests/results/test_expectations.py",
        "tests/results/test_faults_results.py",
        "tests/plan/test_faults_plan.py",
    ),
    "distval/results/faults.py": ("tests/results/test_faults_results.py",),
    "distval/results/outcome.py": ("tests/results/test_results.py",),
    # The verdicts of the comparisons: --reference's pairs, --baseline's figures, compare's items.
    "distval/comparing/reference.py": (
        "tests/comparing/test_reference.py",
        "tests/comparing/test_rank_test.py",
        "tests/comparing/test_confirmation.py",
    ),
    "distval/comparing/baseline.py": (
        "tests/comparing/test_baseline.py",
        "tests/comparing/test_compare.py",
        "tests/comparing/test_baseline_rules.py",
        "tests/comparing/test_compare_rules.py",
        "tests/results/test_remeasure_rule.py",
        "tests/comparing/test_reference.py",
    ),
    # test_bandwidth: compare on a figure one report holds as no measurement (refused_busbw).
    "distval/comparing/comparison.py": (
        "tests/comparing/test_compare.py",
        "tests/comparing/test_compare_rules.py",
        "tests/results/test_bandwidth.py",
    ),
    "distval/comparing/rank_test.py": ("tests/comparing/test_rank_test.py", "tests/comparing/test_reference.py"),
    "distval/comparing/system_references.py": ("tests/comparing/test_system_references.py",),
    # What each judge was asked and the testcase it adds to every scenario of a run.
    "distval/comparing/judges.py": (
        "tests/comparing/test_judges.py",
        "tests/comparing/test_reference.py",
        "tests/comparing/test_confirmation.py",
        "tests/comparing/test_baseline.py",
        "tests/comparing/test_system_references.py",
        "tests/results/test_bandwidth.py",
    ),
    # The run stage's rules: what is re-measured, --reference's refusals and pairs, --references' refusals, the
    # sample image refused in a pipeline, the report paths refused and a report not written never a quiet 0, what
    # --filter and the check selection run.
    "distval/session/remeasure.py": (
        "tests/comparing/test_baseline.py",
        "tests/results/test_bandwidth.py",
        "tests/results/test_remeasure_rule.py",
    ),
    "distval/session/pairs.py": ("tests/comparing/test_reference.py", "tests/comparing/test_confirmation.py"),
    "distval/session/references.py": ("tests/comparing/test_system_references.py",),
    "distval/session/sample.py": ("tests/cli/test_sample_image.py", "tests/cli/test_cli.py"),
    "distval/session/reports.py": (
        "tests/reports/test_report_writers.py",
        "tests/cli/test_options.py",
        "tests/reports/test_report.py",
        "tests/comparing/test_baseline.py",
    ),
    "distval/session/selection.py": (
        "tests/cli/test_selection_cli.py",
        "tests/cli/test_bad_input.py",
        "tests/plan/test_selection.py",
    ),
    "distval/plan/selection.py": ("tests/plan/test_selection.py", "tests/cli/test_selection_cli.py"),
    # A run's own curve and stragglers: their rules, and the references report that turns them into verdicts.
    "distval/results/shape.py": (
        "tests/results/test_shape.py",
        "tests/results/test_shape_edges.py",
        "tests/comparing/test_system_references.py",
    ),
    "distval/config/references.py": ("tests/config/test_references_file.py", "tests/comparing/test_system_references.py"),
    "distval/attestation/policy.py": ("tests/attestation/test_policy.py", "tests/cli/test_attest_rules.py"),
    # The suite's checks run on a real torch (Debian's 1.13 on the host, no Docker): about 30 s a run, so pass
    # --timeout 600 (a run cut short counts as killed). answers.py's formulas also have their property test.
    "distval_suite/collectives.py": ("tests/suite/test_suite_on_torch.py",),
    # Which variants collectives runs (its coverage model): the same checks on torch judge a variant left out.
    "distval_suite/coverage.py": ("tests/suite/test_suite_on_torch.py",),
    "distval_suite/ddp.py": ("tests/suite/test_suite_on_torch.py",),
    "distval_suite/answers.py": ("tests/suite/test_suite_answers.py", "tests/suite/test_suite_on_torch.py"),
}


@dataclass(frozen=True)
class Replacement:
    """A hand-written mutant: ``old``, found exactly once in the module, becomes ``new``."""

    path: str
    old: str
    new: str
    description: str


# Slips in the suite that a mutation pass of its Docker-only era found surviving every quick test.
NAMED: tuple[Replacement, ...] = (
    Replacement(
        "distval_suite/collectives.py",
        "    return _answer(v, _reduce_expected_formula, op, v.world)",
        '    return _answer(v, _reduce_expected_formula, "MAX" if op == "PRODUCT" else op, v.world)',
        "PRODUCT checked against MAX's answer",
    ),
    Replacement(
        "distval_suite/collectives.py",
        "    return _answer(v, _reduce_expected_formula, op, v.world)",
        '    if op == "MIN":\n        return _answer(v, answers.reduce_input, op, 0, v.world)\n'
        "    return _answer(v, _reduce_expected_formula, op, v.world)",
        "MIN checked against rank 0's buffer",
    ),
    Replacement(
        "distval_suite/answers.py",
        "            result = result * value",
        "            result = maximum(result, value)",
        "PRODUCT's answer folded as MAX",
    ),
    Replacement(
        "distval_suite/collectives.py",
        "AVG_RTOL = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}",
        "AVG_RTOL = {torch.float16: 0.5, torch.bfloat16: 0.5, torch.float32: 0.5, torch.float64: 0.5}",
        "AVG's tolerance widened to 50 %",
    ),
    Replacement(
        "distval_suite/ddp.py",
        "SYNC_RTOL, SYNC_ATOL = 1e-4, 1e-5",
        "SYNC_RTOL, SYNC_ATOL = 0.5, 1e-5",
        "ddp_sync's tolerance widened to 50 %",
    ),
    Replacement(
        "distval_suite/collectives.py",
        "        work.wait()\n",
        "",
        "an async result checked without wait()",
    ),
    Replacement(
        "distval_suite/coverage.py",
        '    Rule("view", VIEW, SMALL, ONE, ONE, ONE, ALL_OPERATIONS, excluded=(EVERY_DTYPE_OPERATION,)),\n'
        '    Rule("view, every dtype", VIEW, SMALL, EVERY, ONE, ONE, (EVERY_DTYPE_OPERATION,)),\n',
        "",
        "the view form dropped",
    ),
    Replacement(
        "distval_suite/collectives.py",
        "    (tensor,), outside = _guarded(v)\n    tensor.copy_(data.reshape(tensor.shape))",
        "    if v.form == VIEW:\n        return data, lambda: None\n"
        "    (tensor,), outside = _guarded(v)\n    tensor.copy_(data.reshape(tensor.shape))",
        "the view form's input not placed in a view",
    ),
    Replacement(
        "distval_suite/coverage.py",
        '    Rule("async", ASYNC, SMALL, ONE, ONE, ONE, ALL_OPERATIONS, excluded=("send_recv_ring",)),\n',
        "",
        "the async form dropped",
    ),
)

# The verdict code's slips that a generated mutant does not make.
NAMED += (
    Replacement(
        "distval/comparing/rank_test.py",
        "    return alpha / max(1, family)",
        "    return alpha",
        "the multiplicity correction removed (each figure at the whole run's alpha)",
    ),
    Replacement(
        "distval/comparing/reference.py",
        "        regressed = high < 1 - tolerances.busbw and (p_value is None or p_value < alpha)",
        "        regressed = high < 1 - tolerances.busbw",
        "busbw judged by the pairs' interval alone, the rank test ignored",
    ),
    Replacement(
        "distval/comparing/reference.py",
        "t95(len(logs) - 1) * statistics.stdev(logs)",
        "t95(len(logs)) * statistics.stdev(logs)",
        "the interval's degrees of freedom one too many",
    ),
    Replacement(
        "distval/comparing/reference.py",
        "t95(len(logs) - 1) * statistics.stdev(logs)",
        "1.6449 * statistics.stdev(logs)",
        "the normal's quantile for Student's t",
    ),
    Replacement(
        "distval/comparing/reference.py",
        "t95(len(logs) - 1) * statistics.stdev(logs)",
        "t95(len(logs) - 1) * statistics.pstdev(logs)",
        "the population's spread for the sample's",
    ),
    Replacement(
        "distval/comparing/reference.py",
        "        regressed = low > 1 + tolerances.duration and slower_by_s > tolerances.duration_slack_s",
        "        regressed = high > 1 + tolerances.duration and slower_by_s > tolerances.duration_slack_s",
        "the duration rule on the interval's upper end",
    ),
)

# Survivors that are no behaviour change, keyed by "path:line:col mutation" (the table's first two columns),
# with why no test can kill them. Anything surviving outside this list is a gap in the tests.
EQUIVALENT: dict[str, str] = {
    "distval/session/remeasure.py:62:36 constant 1 -> 2": (
        "one attempt more than --remeasure never runs: after 1 + N runs the majority is decided, so nothing is suspect"
    ),
    # -k's parser: a match from -1 starts at 0; at the end of the text the token pattern matches nothing (blanks
    # only break the loop); one term is its own any()/all(); the kinds the branches test exclude each other;
    # both early returns of ``chooses`` return False.
    "distval/plan/selection.py:53:15 constant 0 -> -1": "re.Pattern.match treats a negative pos as 0",
    "distval/plan/selection.py:54:10 `position < len(text)` -> `position <= len(text)`": (
        "at the end of the text the token pattern finds nothing and the loop breaks"
    ),
    "distval/plan/selection.py:80:21 constant 0 -> -1": "terms[-1] is terms[0] where there is one term",
    "distval/plan/selection.py:80:41 constant 1 -> 0": "any() over one term is that term",
    "distval/plan/selection.py:88:21 constant 0 -> -1": "terms[-1] is terms[0] where there is one term",
    "distval/plan/selection.py:88:41 constant 1 -> 0": "all() over one term is that term",
    "distval/plan/selection.py:90:4 early-return ifs at lines 93 and 97 swapped": "a token has one kind",
    "distval/plan/selection.py:90:4 early-return ifs at lines 97 and 104 swapped": "a token has one kind",
    "distval/plan/selection.py:136:4 early-return ifs at lines 137 and 139 swapped": "both return False",
    "distval/results/expectations.py:110:0 early-return ifs at lines 111 and 113 swapped": (
        'ranks == "victims" and ranks == "survivors" exclude each other'
    ),
    "distval/results/expectations.py:112:15 sorted(..., reverse=True)": (
        "evaluate, the only caller, gives every rank of one expectation the same entry: the order is unused"
    ),
    "distval/results/expectations.py:115:11 sorted(..., reverse=True)": (
        "evaluate, the only caller, gives every rank of one expectation the same entry: the order is unused"
    ),
    "distval/results/expectations.py:135:12 if/elif branches in the other order": (
        'status == "passed" and status in ("failed", "error") exclude each other'
    ),
    "distval/results/expectations.py:193:15 `and` -> `or`": "after is None exactly when failure is None",
    "distval/comparing/rank_test.py:37:12 constant 0 -> -1": (
        "from -1 the first group is the sorted list's last value alone at rank 0 (nothing to the rank sum, 0 to the "
        "ties), unless every value is equal, where the variance is <= 0 either way and the answer 1.0"
    ),
    "distval/comparing/rank_test.py:52:19 constant 0 -> 1": (
        "from MIN_SAMPLES a side the variance is 0 (every value equal) or above 1 (19 ties and 1 other: 25)"
    ),
    "distval/comparing/reference.py:157:81 `and` -> `or`": (
        "a message's words only, and none differ: paired stores an alpha exactly where there is a p-value, and "
        "per_figure_alpha never makes it 0 (FAMILY_ALPHA / m)"
    ),
    "distval/comparing/reference.py:254:19 constant 0 -> -1": (
        "only the names every run of both images has are counted: iterating the last run's names counts the same ones"
    ),
    "distval/comparing/reference.py:336:8 if/elif branches in the other order": (
        "past the first two branches, candidate_bad and reference_bad exclude each other (both is the first branch)"
    ),
    "distval/config/references.py:91:8 if/elif branches in the other order": (
        "only a key accept took enters seen: a key seen before is accepted, and one refused is never in seen"
    ),
    "distval/config/references.py:146:16 `continue` dropped": (
        "a size given twice is a problem, and any problem raises ConfigError before the figures are returned"
    ),
    "distval/config/references.py:204:46 constant 80 -> 79": (
        "the prefix decides only the first character (the pattern's set is the fullmatch's, checked on the whole name)"
    ),
    "distval/results/shape.py:25:18 constant 0.75 -> 0.749999": (
        "a share in [0.749999, 0.75) needs 250,000 figures with per-rank times or more (0.75 - k/n >= 1/(4n) unless 0)"
    ),
    "distval/comparing/comparison.py:63:18 constant 0 -> -1": (
        "the ranks are only compared with each other: PASSED at -1 keeps the order passed < skipped < failed = error"
    ),
    "distval/comparing/comparison.py:142:0 early-return ifs at lines 145 and 147 swapped": (
        "compare_reports makes every row from a scenario of one report: old and new are never both None"
    ),
    "distval/comparing/comparison.py:208:11 `and` -> `or`": (
        "an assert for the type checker that holds on every call (_items returns before it where a side is None)"
    ),
    "distval/comparing/comparison.py:219:12 if/elif branches in the other order": (
        "one rank above the other and below it exclude each other"
    ),
    "distval/comparing/comparison.py:228:8 if/elif branches in the other order": (
        "a duration is never past the tolerance both ways: new > old x (1 + t) and old > new x (1 + t) with t >= 0 "
        "(the command line refuses a negative tolerance)"
    ),
    "distval/comparing/comparison.py:230:8 if/elif branches in the other order": (
        "the backward delta regresses only where durations are judged, the note only where they are not"
    ),
    "distval/comparing/comparison.py:266:11 `and` -> `or`": (
        "an assert for the type checker that holds on every call (_items returns before it where a side is None)"
    ),
    "distval/comparing/comparison.py:291:84 constant 0 -> 1": (
        "a message's words only: a figure rises only where OLD < NEW x (1 - tolerance), so the ratio is above 0, and "
        "`or 0` applies only to an infinite one (OLD's busbw 0, which the suite writes only where NEW's is 0 too)"
    ),
    "distval/comparing/comparison.py:291:84 constant 0 -> -1": (
        "a message's words only: a figure rises only where OLD < NEW x (1 - tolerance), so the ratio is above 0, and "
        "`or 0` applies only to an infinite one (OLD's busbw 0, which the suite writes only where NEW's is 0 too)"
    ),
    "distval/comparing/comparison.py:282:8 if/elif branches in the other order": (
        "a figure's key comes from one report's measured figures at least: before and after are never both None"
    ),
    "distval/comparing/comparison.py:286:8 if/elif branches in the other order": (
        "deltas pairs only the figures both reports have: where before is None there is no delta"
    ),
    "distval/comparing/comparison.py:288:8 if/elif branches in the other order": (
        "dropped past the tolerance both ways is new < old x f and old < new x f with f = 1 - tolerance <= 1 (the "
        "command line refuses a negative tolerance): never both"
    ),
    "distval/comparing/comparison.py:290:8 if/elif branches in the other order": (
        "the forward delta is within noise only where its median dropped (new < old x f), the backward one "
        "regresses only where old < new x f: never both, as above"
    ),
}

# The module-level names a function returns as a verdict; a mutant returns another of the same family.
VERDICT_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("TIMEOUT", "CONNECTION_CLOSED", "KILLED", "OOM", "OTHER"),
    ("PASSED", "FAILED", "SKIPPED"),
)

_CMP_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
}
_CMP_TEXT: dict[type[ast.cmpop], str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}
EPSILON = 1e-6


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repository root
    line: int
    col: int
    description: str
    source: str  # the whole mutated module

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line}:{self.col} {self.description}"


# A mutation applies to the node at one position of ``ast.walk`` in a fresh copy of the tree; it changes
# that node (or its parent's fields) in place and returns a description, or None when it does not apply.
Apply = Callable[[ast.AST], str | None]


def _compare_mutations(node: ast.AST) -> Iterator[Apply]:
    if not isinstance(node, ast.Compare):
        return
    for i, op in enumerate(node.ops):
        for new in _CMP_SWAPS.get(type(op), ()):

            def apply(n: ast.AST, i: int = i, new: type[ast.cmpop] = new) -> str:
                assert isinstance(n, ast.Compare)
                before = _short(n)
                n.ops[i] = new()
                return f"`{before}` -> `{_short(n)}`"

            yield apply


def _short(node: ast.AST, limit: int = 70) -> str:
    text = ast.unparse(node).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _constant_mutations(node: ast.AST) -> Iterator[Apply]:
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
        return
    value = node.value
    if isinstance(value, int):
        steps: tuple[int | float, ...] = (1, -1)
    elif isinstance(value, float):
        steps = (EPSILON, -EPSILON)
    else:
        return
    for step in steps:

        def apply(n: ast.AST, step: int | float = step) -> str:
            assert isinstance(n, ast.Constant) and isinstance(n.value, int | float)
            old = n.value
            n.value = old + step
            return f"constant {old!r} -> {n.value!r}"

        yield apply


def _boolop_mutations(node: ast.AST) -> Iterator[Apply]:
    if isinstance(node, ast.BoolOp):

        def apply(n: ast.AST) -> str:
            assert isinstance(n, ast.BoolOp)
            old, n.op = ("and", ast.Or()) if isinstance(n.op, ast.And) else ("or", ast.And())
            return f"`{old}` -> `{'or' if old == 'and' else 'and'}`"

        yield apply


def _negate(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return ast.UnaryOp(op=ast.Not(), operand=test)


def _condition_mutations(node: ast.AST) -> Iterator[Apply]:
    if isinstance(node, ast.If | ast.IfExp | ast.While):

        def apply(n: ast.AST) -> str:
            assert isinstance(n, ast.If | ast.IfExp | ast.While)
            n.test = _negate(n.test)
            return f"negated {type(n).__name__} condition"

        yield apply
    if isinstance(node, ast.comprehension):
        for i in range(len(node.ifs)):

            def apply_if(n: ast.AST, i: int = i) -> str:
                assert isinstance(n, ast.comprehension)
                n.ifs[i] = _negate(n.ifs[i])
                return "negated comprehension filter"

            yield apply_if


def _branch_order_mutations(node: ast.AST) -> Iterator[Apply]:
    # if/elif: the first two tests swap places (bodies follow their tests); only the order changes.
    if isinstance(node, ast.If) and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):

        def apply_elif(n: ast.AST) -> str:
            assert isinstance(n, ast.If) and isinstance(n.orelse[0], ast.If)
            inner = n.orelse[0]
            n.test, inner.test = inner.test, n.test
            n.body, inner.body = inner.body, n.body
            return "if/elif branches in the other order"

        yield apply_elif
    # A chain of early-return ``if``s (classify): two adjacent ones swap places.
    body = getattr(node, "body", None)
    if not isinstance(body, list):
        return
    for i in range(len(body) - 1):
        a, b = body[i], body[i + 1]
        if _returning_if(a) and _returning_if(b):

            def apply_swap(n: ast.AST, i: int = i) -> str:
                stmts = getattr(n, "body")  # noqa: B009 - the same list as above, in the copy
                stmts[i], stmts[i + 1] = stmts[i + 1], stmts[i]
                return f"early-return ifs at lines {stmts[i + 1].lineno} and {stmts[i].lineno} swapped"

            yield apply_swap


def _returning_if(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and not stmt.orelse and isinstance(stmt.body[-1], ast.Return)


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _sort_mutations(node: ast.AST) -> Iterator[Apply]:
    name = _call_name(node)
    if name in ("min", "max"):

        def apply_minmax(n: ast.AST) -> str:
            assert isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            old = n.func.id
            n.func.id = "max" if old == "min" else "min"
            return f"`{old}` -> `{n.func.id}`"

        yield apply_minmax
    if name == "sorted":

        def apply_reverse(n: ast.AST) -> str:
            assert isinstance(n, ast.Call)
            for kw in n.keywords:
                if kw.arg == "reverse":
                    kw.value = _negate(kw.value)
                    return "sorted(reverse) flipped"
            n.keywords.append(ast.keyword(arg="reverse", value=ast.Constant(True)))
            return "sorted(..., reverse=True)"

        yield apply_reverse
    if name not in ("min", "max", "sorted"):
        return
    assert isinstance(node, ast.Call)
    for kw in node.keywords:
        if kw.arg != "key" or not isinstance(kw.value, ast.Lambda) or not isinstance(kw.value.body, ast.Tuple):
            continue
        size = len(kw.value.body.elts)
        for drop in range(size):

            def apply_drop(n: ast.AST, drop: int = drop) -> str:
                elts = _key_elts(n)
                gone = ast.unparse(elts.pop(drop))
                return f"{name} key without `{gone}`"

            yield apply_drop
        for i in range(size - 1):

            def apply_order(n: ast.AST, i: int = i) -> str:
                elts = _key_elts(n)
                elts[i], elts[i + 1] = elts[i + 1], elts[i]
                return f"{name} key: `{ast.unparse(elts[i + 1])}` and `{ast.unparse(elts[i])}` in the other order"

            yield apply_order


def _key_elts(node: ast.AST) -> list[ast.expr]:
    assert isinstance(node, ast.Call)
    key = next(kw.value for kw in node.keywords if kw.arg == "key")
    assert isinstance(key, ast.Lambda) and isinstance(key.body, ast.Tuple)
    return key.body.elts


def _verdict_mutations(node: ast.AST) -> Iterator[Apply]:
    # A verdict name where a value is produced: returned, assigned, a keyword's value or an IfExp's branch.
    if not isinstance(node, ast.Return | ast.IfExp | ast.keyword | ast.Assign):
        return
    for field in ("value", "body", "orelse"):
        target = getattr(node, field, None)
        if not isinstance(target, ast.Name):
            continue
        for family in VERDICT_FAMILIES:
            if target.id not in family:
                continue
            for other in family:
                if other == target.id:
                    continue

                def apply(n: ast.AST, field: str = field, other: str = other) -> str:
                    name = getattr(n, field)
                    assert isinstance(name, ast.Name)
                    old, name.id = name.id, other
                    return f"verdict `{old}` -> `{other}`"

                yield apply


def _continue_mutations(node: ast.AST) -> Iterator[Apply]:
    body = getattr(node, "body", None)
    if not isinstance(body, list):
        return
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Continue):

            def apply(n: ast.AST, i: int = i) -> str:
                getattr(n, "body")[i] = ast.Pass()  # noqa: B009 - the copy's list
                return "`continue` dropped"

            yield apply


OPERATORS: tuple[Callable[[ast.AST], Iterator[Apply]], ...] = (
    _compare_mutations,
    _constant_mutations,
    _boolop_mutations,
    _condition_mutations,
    _branch_order_mutations,
    _sort_mutations,
    _verdict_mutations,
    _continue_mutations,
)


def _untouchable(tree: ast.Module) -> set[int]:
    """ids of the nodes no mutant touches: annotations and dataclass field declarations (a default's value
    is not a decision), return annotations."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            skip.update(id(n) for n in ast.walk(node))
        elif isinstance(node, ast.arg) and node.annotation is not None:
            skip.update(id(n) for n in ast.walk(node.annotation))
        elif isinstance(node, ast.FunctionDef) and node.returns is not None:
            skip.update(id(n) for n in ast.walk(node.returns))
    return skip


def mutants(path: str, sources: bool = True) -> list[Mutant]:
    """The module's generated mutants, in source order; ``sources=False``: their keys only (no source unparsed)."""
    source = (ROOT / path).read_text()
    tree = ast.parse(source)
    skip = _untouchable(tree)
    found: list[Mutant] = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        for operator in OPERATORS:
            for apply in operator(node):
                mutated = ast.parse(source)  # a fresh tree, walked in the same order: far cheaper than a deep copy
                target = list(ast.walk(mutated))[index]
                description = apply(target)
                if description is None:
                    continue
                ast.fix_missing_locations(mutated)
                found.append(Mutant(path, *_position(node), description, ast.unparse(mutated) if sources else ""))
    return sorted(found, key=lambda m: (m.line, m.col))


def named_mutants(path: str) -> list[Mutant]:
    """``NAMED``'s mutants of the module; one whose text the module lacks, or has more than once, raises ValueError."""
    source = (ROOT / path).read_text()
    found = []
    for r in (r for r in NAMED if r.path == path):
        if source.count(r.old) != 1:
            raise ValueError(f"{path} has {source.count(r.old)} copies of the text of the mutant {r.description!r}, not 1")
        at = source.index(r.old)
        line = source.count("\n", 0, at) + 1
        found.append(Mutant(path, line, 0, f"named: {r.description}", source.replace(r.old, r.new)))
    return found


def _position(node: ast.AST) -> tuple[int, int]:
    # A comprehension has no position of its own: its first filter's (the one a mutant negates) stands in.
    for n in ast.walk(node):
        if isinstance(n, ast.expr | ast.stmt):
            return n.lineno, n.col_offset
    return 0, 0


def stale_equivalents(paths: Sequence[str], made: set[str]) -> list[str]:
    """The EQUIVALENT entries of the modules ``paths`` that name none of the mutants ``made`` (their keys): an entry
    is keyed by line and column, so an edit above it moves the mutant it excused, and a stale entry excuses nothing,
    or another mutant that lands on its place."""
    return sorted(key for key in EQUIVALENT if key.split(":", 1)[0] in paths and key not in made)


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    result: str  # killed, survived, equivalent, timeout (counts as killed)
    seconds: float


def _copy_tree(into: Path) -> Path:
    copy_root = into / "repo"
    shutil.copytree(ROOT, copy_root, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache"))
    return copy_root


def _run_tests(copy_root: Path, tests: Sequence[str], timeout_s: float) -> str:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(copy_root)}
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not docker and not host", *tests]
    try:
        done = subprocess.run(command, cwd=copy_root, env=env, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return "timeout"
    # 1: a test failed. Anything else (collection error, usage error) also means the mutant did not pass.
    return "survived" if done.returncode == 0 else "killed"


def run_pass(paths: Sequence[str], todo: Sequence[Mutant], jobs: int, timeout_s: float) -> list[Outcome]:
    """Each mutant of ``todo`` (of the modules ``paths``) against its module's tests."""
    with tempfile.TemporaryDirectory(prefix="mutation-pass-") as tmp:
        copies = [_copy_tree(Path(tmp) / str(j)) for j in range(jobs)]
        for path in paths:  # the unmutated (but unparsed) module must pass, or every mutant reads as killed
            original = ast.unparse(ast.parse((ROOT / path).read_text()))
            (copies[0] / path).write_text(original)
            if _run_tests(copies[0], TESTS[path], timeout_s) != "survived":
                raise SystemExit(f"mutation_pass: the tests fail on the unmutated {path}; fix them first")
            (copies[0] / path).write_text((ROOT / path).read_text())
        free = list(copies)

        def one(mutant: Mutant) -> Outcome:
            root = free.pop()
            target = root / mutant.path
            original = target.read_text()
            started = time.monotonic()
            try:
                target.write_text(mutant.source)
                result = _run_tests(root, TESTS[mutant.path], timeout_s)
            finally:
                target.write_text(original)
                free.append(root)
            if result == "survived" and mutant.key in EQUIVALENT:
                result = "equivalent"
            print(f"{result:10} {mutant.key}", file=sys.stderr, flush=True)
            return Outcome(mutant, result, time.monotonic() - started)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(one, todo))


def table(outcomes: Sequence[Outcome]) -> str:
    rows = ["| location | mutation | result |", "|---|---|---|"]
    for o in outcomes:
        note = f" ({EQUIVALENT[o.mutant.key]})" if o.result == "equivalent" else ""
        rows.append(f"| {o.mutant.path}:{o.mutant.line}:{o.mutant.col} | {o.mutant.description} | {o.result}{note} |")
    counts = {r: sum(1 for o in outcomes if o.result == r) for r in ("killed", "timeout", "survived", "equivalent")}
    rows.append("")
    rows.append(
        f"generated {len(outcomes)}, killed {counts['killed'] + counts['timeout']} (of them by timeout {counts['timeout']}), "
        f"survived {counts['survived']}, equivalent {counts['equivalent']}"
    )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("modules", nargs="+", help=f"module paths relative to the repository root: {', '.join(TESTS)}")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once (each in its own copy)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one test run may take (default 120)")
    parser.add_argument(
        "--only",
        action="append",
        help="only the mutants whose 'path:line:col mutation' contains this text (repeat it for several: the survivors "
        "of a pass, re-run after new tests)",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants without running the tests")
    parser.add_argument("--named", action="store_true", help="the hand-written mutants of NAMED instead of the generated ones")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in TESTS]
    if unknown or args.jobs < 1:
        print(f"mutation_pass: unknown module {unknown[0]}; known: {', '.join(TESTS)}" if unknown else "--jobs must be >= 1")
        return 2
    make = named_mutants if args.named else mutants
    try:
        listed = [m for path in args.modules for m in make(path)]
    except ValueError as exc:
        print(f"mutation_pass: {exc}; write the mutant again for the module as it is now")
        return 2
    todo = [m for m in listed if args.only is None or any(text in m.key for text in args.only)]
    if args.list:
        for mutant in todo:
            print(mutant.key)
        return 0
    outcomes = run_pass(args.modules, todo, args.jobs, args.timeout)
    print(table(outcomes))
    # After the table, so that its survivors show where the moved entries went.
    stale = [] if args.named else stale_equivalents(args.modules, {m.key for m in listed})
    if stale:
        print(
            f"mutation_pass: EQUIVALENT names {', '.join(map(repr, stale))}: no mutant the module makes now (it "
            "changed); write the entries again from the survivors above, or remove them"
        )
        return 2
    return 1 if any(o.result == "survived" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
