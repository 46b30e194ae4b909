"""DistributedDataParallel and DistributedSampler checks: ddp_sync and ddp_sampler.

With ``device: cuda`` the model and data live on the rank's device and DDP gets ``device_ids=[it]``;
parameters are compared on the CPU after the step (through the store, not a collective).
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from distval_suite.core import CheckFailed, CheckOutcome, Context, check, require_world


def _gather_flat(ctx: Context, label: str, tensor: torch.Tensor) -> List[torch.Tensor]:
    """Every rank's tensor, through the store (not a collective: a broken all_gather is not DDP's fault)."""
    return [torch.tensor(values, dtype=tensor.dtype) for values in ctx.exchange(label, tensor.tolist())]


@check("ddp_sync")
def check_ddp_sync(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """Different data on every rank; after one step every rank holds the same parameters, and they are
    the reference step computed locally from every rank's batch (the gradients averaged, not summed)."""
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    require_world(2, world, "ddp_sync")
    torch.manual_seed(1234 + rank)  # different initial weights too: DDP must broadcast rank 0's
    device = ctx.device
    model = DistributedDataParallel(nn.Linear(4, 3).to(device), device_ids=ctx.device_ids())
    initial = torch.cat([p.detach().flatten().clone() for p in model.parameters()]).cpu()
    # Every rank decides on every rank's parameters, not just its own: a rank that alone found a
    # difference would leave the check while the others enter the step's all_reduce and wait for it.
    initial_everyone = _gather_flat(ctx, "ddp_sync.initial", initial)
    unsynced = [r for r in range(world) if not torch.equal(initial_everyone[r], initial_everyone[0])]
    if unsynced:
        raise CheckFailed(
            "expected DDP to start every rank from rank 0's parameters (its initial broadcast); rank(s) %s "
            "differ from rank 0 by up to %.3g"
            % (unsynced, max(float((initial_everyone[r] - initial_everyone[0]).abs().max()) for r in unsynced))
        )
    # The reference, known by construction: every rank's batch is a formula of its rank, so each rank
    # computes locally what one step must give: rank 0's parameters minus lr times the gradient averaged
    # over all ranks' batches (DDP's documented semantics), on a plain copy of the model on the CPU.
    reference = copy.deepcopy(model.module).cpu()
    optimizer = torch.optim.SGD(model.parameters(), lr=SYNC_LR)
    loss = model(_sync_batch(rank).to(device)).pow(2).mean()
    loss.backward()
    optimizer.step()
    after = torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
    everyone = _gather_flat(ctx, "ddp_sync.after", after)
    differing = [r for r in range(world) if not torch.equal(everyone[r], everyone[0])]
    if differing:
        spread = max(float((everyone[r] - everyone[0]).abs().max()) for r in differing)
        raise CheckFailed(
            "expected identical parameters on every rank after one DDP step (gradients all-reduced); "
            "rank(s) %s differ from rank 0 by up to %.4g" % (differing, spread)
        )
    if torch.equal(after, initial):
        raise CheckFailed("expected the optimizer step to change the parameters; they are unchanged")
    expected = _sync_reference(reference, world)
    details = {"world_size": world, "max_difference": float((after - expected).abs().max())}
    if not torch.allclose(after, expected, rtol=SYNC_RTOL, atol=SYNC_ATOL):
        worst = int((after - expected).abs().argmax())
        summed = initial + world * (expected - initial)
        raise CheckFailed(
            "expected the parameters of one SGD step on the gradient averaged over all %d ranks' batches "
            "(computed on each rank from every rank's batch); parameter %d: expected %.6g, got %.6g "
            "(summing the gradients instead of averaging would give %.6g)"
            % (world, worst, float(expected[worst]), float(after[worst]), float(summed[worst])),
            details,
        )
    return (
        "after one step the %d parameters are identical on all %d ranks and match the reference step "
        "(gradient averaged over every rank's batch)" % (after.numel(), world),
        details,
    )


SYNC_LR = 0.5
# Float32 sums in another order (DDP's bucketed all_reduce) differ from the local reference by rounding
# only; summing instead of averaging is off by a factor of the world size.
SYNC_RTOL, SYNC_ATOL = 1e-4, 1e-5


def _sync_batch(rank: int) -> torch.Tensor:
    """Rank ``rank``'s batch in ddp_sync: 8 rows of (rank + 1) * (row + 1), different on every rank."""
    return torch.full((8, 4), float(rank + 1)) * torch.arange(1, 9, dtype=torch.float32).unsqueeze(1)


def _sync_reference(module: nn.Module, world: int) -> torch.Tensor:
    """The flat parameters after one SGD step on the mean over ranks of each rank's gradient."""
    grads: List[torch.Tensor] = []
    for r in range(world):
        module.zero_grad()
        module(_sync_batch(r)).pow(2).mean().backward()
        grads.append(torch.cat([p.grad.detach().flatten().clone() for p in module.parameters()]))
    start = torch.cat([p.detach().flatten() for p in module.parameters()])
    return start - SYNC_LR * torch.stack(grads).mean(dim=0)


class _Pairs(Dataset):  # type: ignore[misc, type-arg, unused-ignore]  # generic with torch's stubs, Any without torch
    """Sample i is x=(i, i), y=2i."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Any:
        return torch.tensor([float(index), float(index)]), torch.tensor([2.0 * index]), index


# The published reference for 2 ranks: 4 samples, nn.Linear(2, 1) after torch.manual_seed(17),
# SGD lr 0.1, batch size 2, shuffle off, MSE loss.
REFERENCE = {0: ([0, 2], 6.6602), 1: ([1, 3], 17.2775)}
REFERENCE_WEIGHT = 1.1972


# The ranks' gradients averaged in another order than the local reference's: rounding only.
SAMPLER_RTOL = 1e-4


def _sampler_reference(rank: int, world: int) -> Tuple[List[int], float, float]:
    """Rank ``rank``'s samples and first loss, and weight[0,0] after the step, of the reference run at ``world``
    ranks: no shuffle, so rank r gets samples r and r + world of 2 * world; one SGD step (lr 0.1) on the
    gradient averaged over every rank's batch, from nn.Linear(2, 1) after torch.manual_seed(17)."""
    torch.manual_seed(17)
    module = nn.Linear(2, 1)
    dataset = _Pairs(2 * world)
    grads: List[torch.Tensor] = []
    loss_here = 0.0
    for r in range(world):
        batch = [dataset[i] for i in (r, r + world)]
        x, y = torch.stack([b[0] for b in batch]), torch.stack([b[1] for b in batch])
        module.zero_grad()
        loss = nn.functional.mse_loss(module(x), y)
        loss.backward()
        grads.append(module.weight.grad.detach().clone())
        if r == rank:
            loss_here = float(loss)
    weight = module.weight.detach() - 0.1 * torch.stack(grads).mean(dim=0)
    return [rank, rank + world], loss_here, float(weight[0, 0])


def _gather_ints(ctx: Context, label: str, values: List[int]) -> List[List[int]]:
    return [[int(v) for v in entry] for entry in ctx.exchange(label, values)]


@check("ddp_sampler")
def check_ddp_sampler(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    require_world(2, world, "ddp_sampler")
    problems: List[str] = []
    details: Dict[str, Any] = {}

    # 1. The reference run: disjoint shards covering the data, identical post-step weights.
    torch.manual_seed(17)  # on the CPU, then moved: the same initial weights on either device
    device = ctx.device
    model = DistributedDataParallel(nn.Linear(2, 1).to(device), device_ids=ctx.device_ids())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # Two samples per rank: a length the world size divides, so the sampler pads nothing and the shards must
    # be disjoint at any world size (at 2 ranks: the published reference's 4 samples).
    samples = 2 * world
    dataset = _Pairs(samples)
    loader = DataLoader(dataset, batch_size=2, sampler=DistributedSampler(dataset, shuffle=False))
    seen: List[int] = []
    losses: List[float] = []
    for x, y, index in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        seen += [int(i) for i in index]
        losses.append(float(loss))
    shards = _gather_ints(ctx, "sampler.reference", seen)
    details.update({"shards": shards, "loss": losses})
    flat = [i for shard in shards for i in shard]
    overlap = sorted({i for i in flat if flat.count(i) > 1})
    if overlap or sorted(set(flat)) != list(range(samples)):
        problems.append(
            "expected disjoint shards covering samples 0..%d; got %s (overlapping: %s, missing: %s)"
            % (samples - 1, shards, overlap or "none", sorted(set(range(samples)) - set(flat)) or "none")
        )
    weights = torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
    everyone = _gather_flat(ctx, "ddp_sampler.weights", weights)
    if any(not torch.equal(w, everyone[0]) for w in everyone):
        problems.append(
            "expected identical weights on every rank after the step; got %s"
            % [[round(v, 4) for v in w.tolist()] for w in everyone]
        )
    # The reference step at any world size, computed on each rank from every rank's batch (DDP averages the
    # gradients); at 2 ranks it must also be the published one.
    want_samples, want_loss, want_weight = _sampler_reference(rank, world)
    if world == 2 and (want_samples, round(want_loss, 4), round(want_weight, 4)) != (*REFERENCE[rank], REFERENCE_WEIGHT):
        problems.append(
            "the local reference step disagrees with the published one at 2 ranks (rank %d: samples %s, loss %.4f, "
            "weight[0,0] %.4f; published %s, %.4f, %.4f)"
            % (rank, want_samples, want_loss, want_weight, REFERENCE[rank][0], REFERENCE[rank][1], REFERENCE_WEIGHT)
        )
    weight = float(model.module.weight[0, 0])
    details.update({"weight00": round(weight, 4), "reference_weight00": round(want_weight, 4)})
    if (
        seen != want_samples
        or abs(losses[0] - want_loss) > SAMPLER_RTOL * abs(want_loss)
        or abs(weight - want_weight) > SAMPLER_RTOL * abs(want_weight)
    ):
        problems.append(
            "expected the reference step (rank %d of %d: samples %s, loss %.4f, weight[0,0] %.4f); "
            "got samples %s, loss %.4f, weight[0,0] %.4f"
            % (rank, world, want_samples, want_loss, want_weight, seen, losses[0], weight)
        )

    # 2. Shuffle with set_epoch: a different permutation per epoch, still disjoint and covering.
    data = _Pairs(4 * world)  # a length the world size divides: no padding, so the shards must be disjoint
    sampler = DistributedSampler(data, shuffle=True, seed=5)
    epochs: List[List[List[int]]] = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        epochs.append(_gather_ints(ctx, "sampler.epoch%d" % epoch, list(iter(sampler))))
    for epoch, epoch_shards in enumerate(epochs):
        flat = [i for shard in epoch_shards for i in shard]
        if sorted(flat) != list(range(data.size)):
            problems.append(
                "shuffled epoch %d: expected disjoint shards covering 0..%d; got %s" % (epoch, data.size - 1, epoch_shards)
            )
    if epochs[0] == epochs[1]:
        problems.append("expected set_epoch(1) to give a different permutation from set_epoch(0); both gave %s" % epochs[0])

    # 3. A dataset that does not divide by the world size: padding, drop_last, equal batch counts.
    odd = _Pairs(2 * world + 1)
    padded = _gather_ints(ctx, "sampler.padded", list(iter(DistributedSampler(odd, shuffle=False))))
    dropped = _gather_ints(ctx, "sampler.dropped", list(iter(DistributedSampler(odd, shuffle=False, drop_last=True))))
    per_rank_padded, per_rank_dropped = -(-odd.size // world), odd.size // world
    if {len(s) for s in padded} != {per_rank_padded} or sorted({i for s in padded for i in s}) != list(range(odd.size)):
        problems.append(
            "%d samples on %d ranks without drop_last: expected %d per rank (padded by repeating) covering all; got %s"
            % (odd.size, world, per_rank_padded, padded)
        )
    if {len(s) for s in dropped} != {per_rank_dropped} or len({i for s in dropped for i in s}) != per_rank_dropped * world:
        problems.append(
            "%d samples on %d ranks with drop_last: expected %d distinct per rank; got %s"
            % (odd.size, world, per_rank_dropped, dropped)
        )
    batches = _gather_ints(
        ctx, "sampler.batches", [len(DataLoader(odd, batch_size=2, sampler=DistributedSampler(odd, shuffle=False)))]
    )
    if len({b[0] for b in batches}) != 1:
        problems.append("expected the same number of batches on every rank; got %s" % [b[0] for b in batches])
    if problems:
        raise CheckFailed("; ".join(problems), details)
    return (
        "disjoint covering shards %s, the reference step's losses and weights (%d ranks) match, "
        "shuffle/padding/drop_last as documented" % (shards, world),
        details,
    )
