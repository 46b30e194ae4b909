"""The ``subgroup`` part of ``collectives``: process groups of some of the ranks.

At every world size: ``new_group`` of ranks 1..W-1 reduces among its members, leaves rank 0's buffer alone, and
the world group still works after it. From 3 ranks on, where a group can leave out a rank between two of its
members, also:

- ``new_group`` of the even ranks (``[0, 2]`` at 3 and 4 ranks), a non-contiguous set: every rank's view of it
  (its group rank and size; -1 outside) is compared through the store before any collective runs in it (a rank
  that wrongly believes itself a member would otherwise wait in the group's collective until the timeout), then
  an all_reduce among its members and a broadcast from its last member, named by its *global* rank (group rank
  1 is another rank: an implementation that mixes the two broadcasts the wrong buffer);
- ``new_subgroups_by_enumeration`` into the even and the odd ranks (interleaved, as a data-parallel group beside
  a model-parallel one is), and, where the world size is even, ``new_subgroups(2)``: consecutive pairs (the
  ranks that share a container in a 2 x 2 layout). Both exist in every supported torch (>= 1.13), but before
  torch 2.1 they refuse to run without CUDA ("Subgroups can only be created when CUDA is available", lifted by
  pytorch#99706): there, on the CPU, the same partitions are made with ``new_group`` per subgroup, every rank
  creating every one in the same order (what ``new_subgroups*`` do inside), and the messages say so.

The known answer: rank r contributes 2**r times (1 + element % 3), so a SUM over any set of ranks is that set's
bit mask (times the element's factor): no other set of ranks, and no single rank's buffer, gives it, and a
wrong answer names the ranks it summed. Exact in float32 up to 24 ranks.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Sequence

import torch
import torch.distributed as dist

from distval_suite import answers
from distval_suite.core import torch_version

NUMEL = 7
# Up to here 2**rank times 3 is exact in float32 (24 bits of mantissa).
MAX_EXACT_WORLD = 22
Exchange = Callable[[str, Any], List[Any]]


def _plain(rank: int, world: int, device: torch.device) -> torch.Tensor:
    """The buffer of the part at every world size (distval_suite/answers.py's plain input)."""
    return answers.plain_input(rank, world, torch.arange(NUMEL, device=device)).to(torch.float32)


def _bit(rank: int, device: torch.device) -> torch.Tensor:
    return (2**rank) * (1 + torch.arange(NUMEL, device=device) % 3).to(torch.float32)


def _mask_text(value: float) -> str:
    """The ranks a SUM of _bit over a set of ranks came from, read from element 0 (factor 1)."""
    if value != int(value) or value < 1:
        return "no set of ranks (%s)" % value
    mask = int(value)
    return "the sum of ranks %s" % [r for r in range(mask.bit_length()) if mask >> r & 1]


def _compare(label: str, tensor: torch.Tensor, expected: torch.Tensor) -> Optional[str]:
    if torch.equal(tensor, expected):
        return None
    wrong = (tensor != expected).nonzero().flatten()
    first = int(wrong[0])
    return "%s: element %d: expected %s, got %s (%d of %d elements wrong)" % (
        label,
        first,
        expected[first].item(),
        tensor[first].item(),
        int(wrong.numel()),
        tensor.numel(),
    )


def _first(*problems: Optional[str]) -> Optional[str]:
    return next((p for p in problems if p), None)


def subgroup_problem(rank: int, world: int, device: torch.device, exchange: Exchange) -> Optional[str]:
    """None when every group below behaved; else the first problem this rank saw. Every rank makes the same
    calls in the same order whatever it found (a rank that left early would leave the others waiting in
    new_group or in a collective); a wrong view of a group is found on every rank alike (each sees every
    rank's view) and stops the part before any rank waits in a group it was wrongly told it is in."""
    problems = [_first_ranks_group(rank, world, device)]
    if world < 3:
        return _first(*problems)
    if world > MAX_EXACT_WORLD:
        return "the subgroup part's known answers are exact up to %d ranks; the scenario has %d" % (MAX_EXACT_WORLD, world)
    evens, odds = list(range(0, world, 2)), list(range(1, world, 2))
    # Every group is created on every rank, in the same order (new_group's rule), members or not.
    noncontiguous = dist.new_group(ranks=evens)
    enumeration = [evens, odds]
    parity = [evens if r in evens else odds for r in range(world)]
    pairs = [[r - r % 2, r - r % 2 + 1] for r in range(world)]
    groups = [("new_group(%s)" % evens, noncontiguous, [evens if r in evens else [] for r in range(world)])]
    if _subgroups_run_here(device):
        enumerated, _ = dist.new_subgroups_by_enumeration(ranks_per_subgroup_list=enumeration)
        groups.append(("new_subgroups_by_enumeration(%s)" % enumeration, enumerated, parity))
        if world % 2 == 0:
            paired, _ = dist.new_subgroups(group_size=2)
            groups.append(("new_subgroups(group_size=2)", paired, pairs))
    else:
        why = " (new_group per subgroup: new_subgroups* need CUDA before torch 2.1)"
        groups.append(("subgroups %s%s" % (enumeration, why), _own_group(rank, enumeration), parity))
        if world % 2 == 0:
            consecutive = [[r, r + 1] for r in range(0, world, 2)]
            groups.append(("subgroups %s%s" % (consecutive, why), _own_group(rank, consecutive), pairs))
    wrong_view = _first(*[_views(exchange, label, group, members) for label, group, members in groups])
    if wrong_view:
        return wrong_view
    label = groups[0][0]
    if rank in evens:
        problems += [
            _sum_in(label, rank, evens, noncontiguous, device),
            _broadcast_from_last(label, rank, world, evens, noncontiguous, device),
        ]
    problems += [_sum_in(label, rank, members[rank], group, device) for label, group, members in groups[1:]]
    return _first(*problems)


def _subgroups_run_here(device: torch.device) -> bool:
    """Whether new_subgroups* run here: with CUDA, or from torch 2.1 on (pytorch#99706), where gloo's CPU groups
    are allowed too. A version gate, never an error's words."""
    return torch_version() >= (2, 1) or (device.type == "cuda" and torch.cuda.is_available())


def _own_group(rank: int, partition: List[List[int]]) -> Any:
    """``partition``'s subgroups made with new_group, each on every rank in the same order; this rank's."""
    own = None
    for members in partition:
        group = dist.new_group(ranks=members)
        if rank in members:
            own = group
    return own


def _first_ranks_group(rank: int, world: int, device: torch.device) -> Optional[str]:
    """A collective inside new_group(ranks 1..world-1) must leave rank 0 alone, and the world group working."""
    members = list(range(1, world))
    group = dist.new_group(ranks=members)
    tensor = _plain(rank, world, device)
    if rank in members:
        dist.all_reduce(tensor, group=group)
        expected = functools.reduce(torch.add, [_plain(r, world, device) for r in members])
        problem = _compare("all_reduce inside new_group(%s)" % members, tensor, expected)
    else:
        problem = _compare(
            "rank %d outside new_group(%s) after the group's all_reduce" % (rank, members), tensor, _plain(rank, world, device)
        )
    world_tensor = torch.ones(NUMEL, device=device)
    dist.all_reduce(world_tensor)
    return problem or _compare(
        "world all_reduce after the subgroup's", world_tensor, torch.full((NUMEL,), float(world), device=device)
    )


def _views(exchange: Exchange, label: str, group: Any, members: Sequence[List[int]]) -> Optional[str]:
    """Every rank's (group rank, group size) of ``group`` against ``members[r]``, the members of the group
    rank r should be in (empty: none; torch answers -1 and -1 outside a group)."""
    seen = [tuple(view) for view in exchange("subgroup/%s" % label, [dist.get_rank(group), dist.get_world_size(group)])]
    expected = [(m.index(r), len(m)) if m else (-1, -1) for r, m in enumerate(members)]
    wrong = [r for r in range(len(members)) if seen[r] != expected[r]]
    if not wrong:
        return None
    return "%s: expected (group rank, group size) %s; got %s" % (
        label,
        ", ".join("%s on rank %d" % (expected[r], r) for r in wrong),
        ", ".join("%s on rank %d" % (seen[r], r) for r in wrong),
    )


def _sum_in(label: str, rank: int, members: List[int], group: Any, device: torch.device) -> Optional[str]:
    tensor = _bit(rank, device)
    dist.all_reduce(tensor, group=group)
    expected = functools.reduce(torch.add, [_bit(r, device) for r in members])
    problem = _compare("all_reduce(SUM) inside %s on rank %d" % (label, rank), tensor, expected)
    return problem and "%s: %s, not of %s" % (problem, _mask_text(tensor[0].item()), members)


def _broadcast_from_last(
    label: str, rank: int, world: int, members: List[int], group: Any, device: torch.device
) -> Optional[str]:
    """A broadcast from the group's last member, named by its global rank (its group rank names another rank)."""
    source = members[-1]
    tensor = _plain(rank, world, device)
    dist.broadcast(tensor, src=source, group=group)
    return _compare(
        "broadcast inside %s from global rank %d (group rank %d), on rank %d" % (label, source, len(members) - 1, rank),
        tensor,
        _plain(source, world, device),
    )
