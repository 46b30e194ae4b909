"""ddp_training: DistributedDataParallel as training uses it, one result per part.

``ddp_sync`` steps a model of 15 parameters once: one gradient bucket, so an image whose DDP breaks past the
first bucket passes it. Here every part trains a model of several buckets for several steps and compares the
parameters every rank ends with against a reference computed in the same process:

* ``buckets``: the default reducer with ``bucket_cap_mb`` tiny (at least MIN_BUCKETS buckets, counted);
* ``no_sync``: gradient accumulation, micro-batches inside ``no_sync()`` (their gradients must stay local);
* ``find_unused``: ``find_unused_parameters=True``, one branch unused on every rank in one step and on all but
  rank 0 in another;
* ``static_graph``: ``static_graph=True`` (it rebuilds its buckets after the second step), a branch never used;
* ``comm_hook``: ``fp16_compress_hook`` (gradients all-reduced in float16);
* ``join``: ``Join`` with uneven inputs: rank r has r more batches than rank 0.

The known answers. The model is linear in its parameters and the loss is linear in its output
(``sum(weight_row * COLUMN . y_row)``), so every gradient is an integer that does not depend on the parameters:
each rank computes its own exactly in float32. Every rank feeds the same rows but weighs them by its rank's
weight (RANK_WEIGHT: world + 1 on rank 0, 1 elsewhere), so rank r's gradient is w_r * G and DDP's average is
exactly 2 G. The other answers a defect gives are far from it and from each other at every world size >= 2:
summing instead of averaging gives 2 * world * G; a gradient not all-reduced gives this rank's own w_r * G (or
w_r * G / world where DDP divided before the missing all-reduce); so the message can say, parameter by
parameter, which of them each one got (a bucket skipped: some averaged, the others this rank's own).

The reference is one float64 model that takes every rank's rows as one batch, its loss divided by the world
size (DDP's average), stepped with the same SGD. Its numbers are exact (integers and small binary fractions) at a
power-of-two world size, and within float64's rounding (1e-16 relative) at any other. Each of this rank's steps
is judged (the update it made against the reference's), then its final parameters (after Join's end).
DDP's float32 differs from the reference only by rounding: dividing w_r * G by the world size before the
all-reduce (not exact unless the world size is a power of two), the all-reduce's additions in any order, and the
SGD update; a step's gradient carries at most (world + 2) roundings of its terms, the parameter one per step.
COMM_UNIT is the unit roundoff the gradient's arithmetic runs in: float32's 2**-24, or float16's 2**-11 under the
fp16 hook (which rounds each rank's gradient to float16, divides and sums it there). Tolerance per element, with S
the sum of |w_r * G| / world over ranks (and steps, for the final parameters):
``2 * 2**-24 * (|p| + lr * S) + (world + 2) * COMM_UNIT * lr * S`` per step, ``(steps + 1) * 2**-24 * (|p0| +
lr * S) + (world + 2) * COMM_UNIT * lr * S`` at the end. The smallest gap between the answers above is lr * S / 4
(the average 2 G against rank 0's own gradient divided by the world size, (world + 1) / world * G, at 2 ranks): the
tolerance is 0.8% of it under the fp16 hook at 2 ranks (below it up to 500 ranks), 1e-6 of it in float32.

DistributedDataParallel's constructor imports torch._dynamo on torch 2.x (1.7 s on the 2.15 fixture, quiet): a
module import, paid once per rank process (by ddp_sync already when it ran first), not once per part.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel

from distval_suite.core import CheckOutcome, Context, check, require_world
from distval_suite.records import ERROR, FAILED, PASSED

PARTS = ("buckets", "no_sync", "find_unused", "static_graph", "comm_hook", "join")
DEFAULT_STEPS = 4
# Rows of the embedding table: more than torch 1.13's first bucket (1 MiB, whatever bucket_cap_mb says) holds,
# 66000 x 4 float32 = 1.01 MiB, so that even there the table is a bucket of its own and the small layers the
# others (measured with the cap below: 4 buckets on 1.13, 5 on 2.6 and 2.15; one bucket on 1.13 with a table under 1 MiB).
VOCAB, DIM, FEATURES = 66000, 4, 8
BUCKET_CAP_MB = 2.0**-14  # 64 bytes: every layer past the first bucket is a bucket of its own
MIN_BUCKETS = 3
ROWS = 4
LR = 2.0**-6
COLUMN = (1.0, 2.0, 3.0, 4.0)
MICRO_BATCHES = 3  # no_sync: two inside no_sync(), the third synchronised
FLOAT32_UNIT = 2.0**-24
FLOAT16_UNIT = 2.0**-11
# The answers a defect gives instead of the average (see the docstring), as the message names them.
AVERAGED = "the gradient averaged over the ranks"
SUMMED = "the gradient summed over the ranks, not averaged"
OWN = "this rank's own gradient, not all-reduced"
OWN_DIVIDED = "this rank's own gradient divided by the world size, not all-reduced"


class _Net(nn.Module):  # type: ignore[misc, unused-ignore]  # Any without torch
    """An embedding table and four linear branches on the same features, summed: linear in every parameter.
    The table is registered first: torch 1.13 fills its first bucket (1 MiB) in parameter order."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(VOCAB, DIM)
        self.first = nn.Linear(FEATURES, DIM)
        self.second = nn.Linear(FEATURES, DIM)
        self.third = nn.Linear(FEATURES, DIM)
        self.aux = nn.Linear(FEATURES, DIM)  # unused on some steps (find_unused), never (static_graph)
        with torch.no_grad():
            for offset, parameter in enumerate(self.parameters()):
                # Small binary fractions, the same on every rank, different per element: exact in float32.
                index = torch.arange(parameter.numel(), dtype=torch.float64)
                parameter.copy_((((index * 5 + offset * 3) % 17) - 8).div(16).reshape(parameter.shape))

    def forward(self, rows: torch.Tensor, features: torch.Tensor, scale: torch.Tensor, aux: Optional[torch.Tensor]) -> Any:
        # The table's lookup last, so that its gradient is ready first in the backward pass: DDP rebuilds its
        # buckets in that order, and torch 1.13 caps the first rebuilt bucket at 1 MiB, which the table alone
        # fills (measured: with the lookup first, the small layers joined it in one bucket of everything).
        out = self.first(features) + self.second(features) + self.third(features) + self.table(rows)
        if aux is not None:  # a mask of the rows that use the branch (all of them on a rank)
            out = out + self.aux(features) * aux.unsqueeze(1)
        column = torch.tensor(COLUMN, dtype=out.dtype, device=out.device)
        return (out * scale.unsqueeze(1) * column).sum()


def rank_weight(rank: int, world: int) -> float:
    """Rank 0 weighs its rows world + 1, the others 1: the average is 2, the sum 2 * world, and no rank's own
    weight (world + 1 or 1) nor that divided by the world size equals either at any world size >= 2."""
    return float(world + 1) if rank == 0 else 1.0


def _batch(step: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The rows every rank feeds at ``step``: table rows spread over the table, features 1..4."""
    rows = torch.tensor([(step * 7919 + i * 104729) % VOCAB for i in range(ROWS)], dtype=torch.int64)
    grid = torch.arange(ROWS).unsqueeze(1) * 2 + torch.arange(FEATURES).unsqueeze(0) * 3 + step
    return rows, (grid % 4 + 1).to(torch.float32)


class Plan:
    """What one part feeds: how many steps each rank takes, and which ranks use the aux branch per step."""

    def __init__(self, steps: Sequence[int], aux: Callable[[int, int], bool]) -> None:
        self.steps = list(steps)  # per rank
        self.aux = aux  # (step, rank) -> whether that rank's rows go through the aux branch

    def active(self, step: int) -> List[int]:
        return [r for r, count in enumerate(self.steps) if step < count]


def _flat(module: nn.Module) -> Dict[str, torch.Tensor]:
    return {name: p.detach().to("cpu", torch.float64).clone() for name, p in module.named_parameters()}


class UnitGradients:
    """One rank's gradient of a batch at weight 1 (rank r's is RANK_WEIGHT times it), in float64: the model is
    linear in its parameters, so it does not depend on them and is computed once per batch, aux or not."""

    def __init__(self) -> None:
        self.model = _Net().double()
        self.cache: Dict[Tuple[int, bool], Dict[str, torch.Tensor]] = {}

    def __call__(self, index: int, aux: bool) -> Dict[str, torch.Tensor]:
        if (index, aux) not in self.cache:
            self.model.zero_grad()
            rows, features = _batch(index)
            ones = torch.ones(ROWS, dtype=torch.float64)
            self.model(rows, features.double(), ones, ones if aux else None).backward()
            self.cache[(index, aux)] = {
                name: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                for name, p in self.model.named_parameters()
            }
        return self.cache[(index, aux)]


def _judge(
    plan: Plan,
    part: "Part",
    micro: int,
    comm_unit: float,
    snapshots: List[Dict[str, torch.Tensor]],
    final: Dict[str, torch.Tensor],
    layout: Dict[str, int],
) -> Optional[str]:
    """None when this rank's final parameters are the reference's within their tolerance and so was every step's
    update; otherwise the first wrong step, each wrong parameter named with the answer it got instead (or the
    final parameters, where every step was right but the end is not: Join's final synchronisation).

    The reference is one float64 model that takes every rank's rows as one batch, its loss divided by the
    world size, stepped with the same SGD; the answers of a defect come from each rank's gradient alone
    (UnitGradients times its weight). ``snapshots`` are this rank's parameters before its first step and after
    each of its steps; ``final`` after the part (after Join's end)."""
    rank, world, unit = part.rank, part.world, part.unit
    model = _Net().double()
    start = _flat(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    total_all = {name: torch.zeros_like(p) for name, p in start.items()}
    first_wrong: Optional[str] = None
    for step in range(max(plan.steps)):
        ranks = plan.active(step)
        before = _flat(model)
        optimizer.zero_grad()
        total = {name: torch.zeros_like(p) for name, p in start.items()}  # sum over ranks (and micro-batches) of w_r G
        own = {name: torch.zeros_like(p) for name, p in start.items()}  # this rank's w_r G
        for m in range(micro):
            index = step * micro + m
            rows, features = _batch(index)
            every_rows = rows.repeat(len(ranks))
            every_features = features.double().repeat(len(ranks), 1)
            scale = torch.tensor([rank_weight(r, world) / world for r in ranks for _ in range(ROWS)], dtype=torch.float64)
            mask = torch.tensor([1.0 if plan.aux(step, r) else 0.0 for r in ranks for _ in range(ROWS)], dtype=torch.float64)
            model(every_rows, every_features, scale, mask if bool(mask.any()) else None).backward()
            for r in ranks:
                for name, grad in unit(index, plan.aux(step, r)).items():
                    total[name].add_(grad, alpha=rank_weight(r, world))
                    if r == rank:
                        own[name].add_(grad, alpha=rank_weight(r, world))
        optimizer.step()
        after = _flat(model)
        for name in start:
            total_all[name] += total[name]
            # The float64 model and the closed form agree (exactly at a power-of-two world size, else to float64's
            # rounding, 1e-16 relative): a reference that does not is this check's bug, an error.
            if not torch.allclose(after[name], before[name] - LR * total[name] / world, rtol=1e-12, atol=1e-12):
                raise RuntimeError("the reference for %s is not the closed form of its gradients" % name)
        if first_wrong is None and step + 1 < len(snapshots):
            answers = {
                AVERAGED: {name: -LR * total[name] / world for name in start},
                SUMMED: {name: -LR * total[name] for name in start},
                OWN: {name: -LR * own[name] for name in start},
                OWN_DIVIDED: {name: -LR * own[name] / world for name in start},
            }
            # One SGD update: the gradient's rounding (module docstring) and two of the parameter's (the update
            # is the difference of two float32 parameters; the reference's parameter is within 1e-6 of this rank's).
            tolerance = {
                name: 2 * FLOAT32_UNIT * (before[name].abs() + LR * total[name] / world)
                + (world + 2) * comm_unit * LR * total[name] / world
                for name in start
            }
            updates = {name: snapshots[step + 1][name] - snapshots[step][name] for name in start}
            first_wrong = _classify(updates, answers, tolerance, layout, "step %d of %d" % (step + 1, len(snapshots) - 1))
    if first_wrong is not None:
        return first_wrong
    steps = max(plan.steps) * micro
    # Every gradient here is >= 0 (positive features, weights and column), so |sum| is the sum of |terms|.
    tolerance = {
        name: (steps + 1) * FLOAT32_UNIT * (start[name].abs() + LR * total_all[name] / world)
        + (world + 2) * comm_unit * LR * total_all[name] / world
        for name in start
    }
    expected = _flat(model)
    wrong = [name for name in start if not bool(((final[name] - expected[name]).abs() <= tolerance[name]).all())]
    if not wrong:
        return None
    name = wrong[0]
    index = int((final[name] - expected[name]).abs().flatten().argmax())
    return (
        "every step's update was the gradient averaged over the ranks, but the final parameters are not the "
        "reference's: %s; %s[%d]: expected %.8g, got %.8g"
        % (", ".join(wrong), name, index, float(expected[name].flatten()[index]), float(final[name].flatten()[index]))
    )


def _classify(
    updates: Dict[str, torch.Tensor],
    answers: Dict[str, Dict[str, torch.Tensor]],
    tolerance: Dict[str, torch.Tensor],
    layout: Dict[str, int],
    when: str,
) -> Optional[str]:
    """None when every parameter's update is the averaged answer; otherwise which answer each wrong one got."""
    wrong: Dict[str, List[str]] = {}
    right: List[str] = []
    worst = ""
    for name, value in updates.items():
        where = "%s (bucket %d)" % (name, layout[name]) if name in layout else name
        matched = [label for label, answer in answers.items() if bool(((value - answer[name]).abs() <= tolerance[name]).all())]
        if AVERAGED in matched:
            right.append(where)
            continue
        wrong.setdefault(matched[0] if matched else "none of the known answers", []).append(where)
        if not worst:
            index = int((value - answers[AVERAGED][name]).abs().flatten().argmax())
            worst = "; %s[%d] moved by %.8g, expected %.8g" % (
                name,
                index,
                float(value.flatten()[index]),
                float(answers[AVERAGED][name].flatten()[index]),
            )
    if not wrong:
        return None
    return "expected every step to move the parameters by SGD on the gradient averaged over the ranks; %s: %s%s%s" % (
        when,
        "; ".join("%s got %s" % (", ".join(names), label) for label, names in wrong.items()),
        "; averaged correctly: %s" % ", ".join(right) if right else "",
        worst,
    )


def _bucket_layout(model: DistributedDataParallel) -> Optional[Dict[str, int]]:
    """Parameter name -> the bucket the reducer put it in for the last step, or None where this torch does not
    expose its buckets (``Reducer._get_zeros_like_grad_buckets``, present on 1.13 to 2.15: measured)."""
    reducer = getattr(model, "reducer", None)
    if reducer is None or not hasattr(reducer, "_get_zeros_like_grad_buckets"):
        return None
    names = {id(p): name.replace("module.", "", 1) for name, p in model.named_parameters()}
    layout: Dict[str, int] = {}
    for bucket in reducer._get_zeros_like_grad_buckets():
        if not hasattr(bucket, "parameters"):
            return None
        for p in bucket.parameters():
            if id(p) in names:
                layout[names[id(p)]] = int(bucket.index())
    return layout


class Part:
    def __init__(self, ctx: Context, steps: int) -> None:
        self.ctx = ctx
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.steps = steps
        self.unit = UnitGradients()

    def model(self, **kwargs: Any) -> DistributedDataParallel:
        return DistributedDataParallel(
            _Net().to(self.ctx.device), device_ids=self.ctx.device_ids(), bucket_cap_mb=BUCKET_CAP_MB, **kwargs
        )

    def feed(self, model: nn.Module, step: int, aux: bool) -> None:
        rows, features = _batch(step)
        device = self.ctx.device
        scale = torch.full((ROWS,), rank_weight(self.rank, self.world), device=device)
        mask = torch.ones(ROWS, device=device) if aux else None
        model(rows.to(device), features.to(device), scale, mask).backward()

    def train(
        self, model: DistributedDataParallel, plan: Plan, micro_step: Optional[Callable[[int], None]] = None
    ) -> List[Dict[str, torch.Tensor]]:
        """This rank's steps of ``plan``; the parameters before the first and after each (on the CPU, float64).
        ``micro_step(step)`` replaces the one batch of a step (no_sync's accumulation)."""
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        snapshots = [_flat(model.module)]
        for step in range(plan.steps[self.rank]):
            optimizer.zero_grad()
            if micro_step is None:
                self.feed(model, step, plan.aux(step, self.rank))
            else:
                micro_step(step)
            optimizer.step()
            snapshots.append(_flat(model.module))
        return snapshots

    def verdict(
        self,
        model: DistributedDataParallel,
        plan: Plan,
        snapshots: List[Dict[str, torch.Tensor]],
        micro: int = 1,
        comm_unit: float = FLOAT32_UNIT,
        need_buckets: bool = False,
    ) -> Tuple[Optional[str], Dict[str, Any]]:
        layout = _bucket_layout(model)
        count = len(set(layout.values())) if layout is not None else None
        details: Dict[str, Any] = {"steps": plan.steps, "buckets": count if count is not None else "not exposed by this torch"}
        problem = _judge(plan, self, micro, comm_unit, snapshots, _flat(model.module), layout or {})
        if need_buckets and count is not None and count < MIN_BUCKETS:
            # After the parameters' verdict, which names the defect where there is one (a DDP that never
            # synchronises never rebuilds its buckets either).
            few = (
                "expected at least %d gradient buckets with bucket_cap_mb=%g once DDP rebuilt them; the reducer has %d, "
                "so a defect past the first bucket would not show" % (MIN_BUCKETS, BUCKET_CAP_MB, count)
            )
            problem = "%s; %s" % (problem, few) if problem else few
        return problem, details


def _even(steps: int, world: int) -> List[int]:
    return [steps] * world


def _part_buckets(part: Part) -> Tuple[Optional[str], Dict[str, Any]]:
    plan = Plan(_even(part.steps, part.world), lambda step, rank: True)
    model = part.model()
    return part.verdict(model, plan, part.train(model, plan), need_buckets=True)


def _part_no_sync(part: Part) -> Tuple[Optional[str], Dict[str, Any]]:
    plan = Plan(_even(part.steps, part.world), lambda step, rank: True)
    model = part.model()
    local_problem: List[str] = []
    weight = rank_weight(part.rank, part.world)

    def accumulate(step: int) -> None:
        with model.no_sync():
            for m in range(MICRO_BATCHES - 1):
                part.feed(model, step * MICRO_BATCHES + m, True)
        problem = _local_gradients(model, step, weight, part.unit)
        if problem is not None and not local_problem:
            local_problem.append(problem)
        part.feed(model, step * MICRO_BATCHES + MICRO_BATCHES - 1, True)

    snapshots = part.train(model, plan, accumulate)
    problem, details = part.verdict(model, plan, snapshots, micro=MICRO_BATCHES)
    return (local_problem[0] if local_problem else problem), details


def _local_gradients(model: DistributedDataParallel, step: int, weight: float, unit: UnitGradients) -> Optional[str]:
    """Inside no_sync() each rank's gradients stay its own: w_r * G of its micro-batches, exactly (integers)."""
    for name, p in model.module.named_parameters():
        want = sum(unit(step * MICRO_BATCHES + m, True)[name] for m in range(MICRO_BATCHES - 1)) * weight
        got = p.grad.detach().to("cpu", torch.float64) if p.grad is not None else torch.zeros_like(want)
        if not torch.equal(got, want):
            index = int((got - want).abs().flatten().argmax())
            expected, seen = float(want.flatten()[index]), float(got.flatten()[index])
            averaged = expected * 2.0 / weight  # the average over the ranks is 2 G (see rank_weight)
            return (
                "expected the gradients after %d micro-batches inside no_sync() to be this rank's own (accumulated "
                "locally, not all-reduced); %s[%d] at step %d: expected %.8g, got %.8g%s"
                % (
                    MICRO_BATCHES - 1,
                    name,
                    index,
                    step,
                    expected,
                    seen,
                    " (the average over the ranks: no_sync() did not stop the all-reduce)" if seen == averaged else "",
                )
            )
    return None


def _part_find_unused(part: Part) -> Tuple[Optional[str], Dict[str, Any]]:
    # Step 1: no rank uses the aux branch (unused everywhere: it must not move). Step 2: only rank 0 uses it
    # (unused on the others, which contribute zeros to its average). Every other step: all ranks use it.
    plan = Plan(_even(part.steps, part.world), lambda step, rank: step not in (1, 2) or (step == 2 and rank == 0))
    model = part.model(find_unused_parameters=True)
    return part.verdict(model, plan, part.train(model, plan))


def _part_static_graph(part: Part) -> Tuple[Optional[str], Dict[str, Any]]:
    # static_graph: the same parameters used in every step; the aux branch never is (a static graph may
    # leave parameters unused without find_unused_parameters). Its buckets are rebuilt after the second step.
    plan = Plan(_even(part.steps, part.world), lambda step, rank: False)
    model = part.model(static_graph=True)
    return part.verdict(model, plan, part.train(model, plan), need_buckets=True)


def _part_comm_hook(part: Part) -> Tuple[Optional[str], Dict[str, Any]]:
    plan = Plan(_even(part.steps, part.world), lambda step, rank: True)
    model = part.model()
    model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    return part.verdict(model, plan, part.train(model, plan), comm_unit=FLOAT16_UNIT)


def _part_join(part: Part) -> Tuple[Optional[str], Dict[str, Any]]:
    # Uneven inputs: rank r takes steps + r steps. Under Join a rank out of data shadows the others' all-reduces
    # with zeros (the average still divided by the initial world size), and at the end every rank gets the
    # parameters of the last rank to finish.
    plan = Plan([part.steps + r for r in range(part.world)], lambda step, rank: True)
    model = part.model()
    with Join([model]):
        snapshots = part.train(model, plan)
    return part.verdict(model, plan, snapshots)


PART_FUNCTIONS: Dict[str, Callable[[Part], Tuple[Optional[str], Dict[str, Any]]]] = {
    "buckets": _part_buckets,
    "no_sync": _part_no_sync,
    "find_unused": _part_find_unused,
    "static_graph": _part_static_graph,
    "comm_hook": _part_comm_hook,
    "join": _part_join,
}


@check("ddp_training")
def check_ddp_training(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    world = dist.get_world_size()
    require_world(2, world, "ddp_training")
    steps = int(args.get("steps", DEFAULT_STEPS))
    chosen = list(args.get("parts") or PARTS)
    part = Part(ctx, steps)
    broken: Optional[str] = None  # a part that raised: the ranks' collectives may be out of step after it
    for name in PARTS:
        if name not in chosen:
            continue
        started = time.monotonic()
        if broken is not None:
            ctx.report(name, ERROR, "not run: %s raised before it, and may have left the ranks' collectives out of step" % broken)
            continue
        ctx.step(name)
        outcome: Tuple[str, str]
        details: Dict[str, Any] = {}
        try:
            problem, details = PART_FUNCTIONS[name](part)
            outcome = (FAILED, problem) if problem else (PASSED, "")
        except Exception as exc:  # noqa: BLE001 - a part's crash is its result (every rank learns it below)
            outcome = (ERROR, "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:300]))
        # Every rank judges its own parameters and reports its own verdict (the harness names the ranks that
        # failed); the ranks learn whether any of them raised, to stop after that part together.
        everyone = ctx.exchange("ddp_training/%s" % name, outcome[0])
        raised = [r for r, status in enumerate(everyone) if status == ERROR]
        if raised:
            broken = "ddp_training.%s (on rank(s) %s)" % (name, ", ".join(map(str, raised)))
        status, message = outcome
        if status == PASSED:
            taken = sorted(set(details.get("steps", [])))
            message = (
                "the parameters after %s steps (%s buckets) are the reference's: SGD on the gradient averaged over %d ranks"
                % (
                    taken[0] if len(taken) == 1 else "%d-%d" % (taken[0], taken[-1]),
                    details.get("buckets"),
                    world,
                )
            )
        ctx.report(name, status, message, time.monotonic() - started, details)
    return None
