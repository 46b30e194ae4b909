"""Modern parallelism: ``fsdp2`` (fully_shard), ``dtensor`` (DeviceMesh, placements, redistribute) and ``dcp``
(torch.distributed.checkpoint: a sharded save, loaded resharded).

Each check is gated on the torch version that made its API public and usable on the CPU (catalog
``torch_minimum``, the same numbers as ``require_torch`` here): below it the check is skipped with the version,
at or above it the API must work, and any exception is the check's error. torch's own modules for these APIs are
imported inside the checks, after the gate, because torch 1.13 has none of them (``torch.distributed.tensor``,
``device_mesh`` and ``checkpoint`` do not exist there, and ``torch.distributed.fsdp`` fails to import on
Python 3.11), and this module must import on every torch the suite supports.

Every answer is known by construction: integer-valued float tensors whose elements are all different (a chunk
taken at the wrong offset, one rank's shard or a wrong placement gives other values or another shape), and for
FSDP2 a reference training computed in this same process from every rank's batch. Where ranks combine what they
hold (fsdp2's shards, dcp's files) they do it through the rendezvous store (ctx.exchange), never through another
collective, so that a broken all_gather fails the collectives check and not these.
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import nn

from distval_suite.core import CheckFailed, CheckOutcome, Context, check, require_torch, require_world

# -- shared --------------------------------------------------------------------------------------------


def known_tensor(rows: int, cols: int, dtype: torch.dtype = torch.float32, start: int = 1) -> torch.Tensor:
    """``rows`` x ``cols`` with every element different: start, start+1, ... in row-major order (integers, exact in
    float32 below 2**24)."""
    return torch.arange(start, start + rows * cols, dtype=torch.float64).reshape(rows, cols).to(dtype)


def chunk_of(full: torch.Tensor, dim: int, index: int, parts: int) -> torch.Tensor:
    """Rank ``index``'s piece of ``full`` split in ``parts`` along ``dim`` as DTensor's Shard does (torch.chunk:
    pieces of ceil(n / parts), the last ones smaller or empty)."""
    pieces = torch.chunk(full, parts, dim=dim)
    if index < len(pieces):
        return pieces[index]
    return full.narrow(dim, 0, 0)


def describe_difference(what: str, expected: torch.Tensor, got: torch.Tensor) -> Optional[str]:
    """None when ``got`` is exactly ``expected`` (shape, dtype and values), else one line saying how it differs."""
    if tuple(got.shape) != tuple(expected.shape):
        return "%s: expected shape %s, got %s" % (what, list(expected.shape), list(got.shape))
    if got.dtype != expected.dtype:
        return "%s: expected %s, got %s" % (what, expected.dtype, got.dtype)
    if torch.equal(got, expected):
        return None
    wrong = (got != expected).nonzero()
    first = tuple(int(i) for i in wrong[0])
    return "%s: %d of %d elements differ, first at %s: expected %s, got %s" % (
        what,
        int(wrong.shape[0]),
        expected.numel(),
        list(first),
        _number(expected[first]),
        _number(got[first]),
    )


def _number(value: torch.Tensor) -> str:
    number = float(value)
    return "%d" % number if number == int(number) else "%.6g" % number


# -- fsdp2 ---------------------------------------------------------------------------------------------

# FSDP2 on the CPU needs torch 2.7. fully_shard is torch.distributed._composable.fsdp.fully_shard in 2.4 and 2.5,
# CUDA only there ("FSDP requires CUDA for streams"), and public as torch.distributed.fsdp.fully_shard from 2.6
# (pytorch PR #141868); 2.6 runs it on the CPU as far as its first all-gather, which calls record_event() on a CPU
# stream that has none (measured on Debian's 2.6: AttributeError); the CPU stream's no-op record_event/wait_event
# came in 2.7 (pytorch PR #145935).
FSDP_STEPS = 3
FSDP_LR, FSDP_MOMENTUM = 0.1, 0.9
# float64: the reduce-scatter sums the ranks' gradients in another order (and divides before or after it) than the
# reference's mean, which differs by rounding only (about 1e-16 relative); summing instead of averaging is off by a
# factor of the world size, a wrong shard by whole parameters.
FSDP_RTOL, FSDP_ATOL = 1e-9, 1e-12


def _fsdp_model() -> nn.Module:
    """7 output rows: no world size from 2 to 6 divides them, so FSDP2 pads its shards (the uneven path)."""
    torch.manual_seed(2026)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).double()


def _fsdp_batch(rank: int, step: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s batch at ``step``: 4 rows, different on every rank and at every step."""
    rows = torch.arange(1, 5, dtype=torch.float64).unsqueeze(1)
    cols = torch.arange(1, 6, dtype=torch.float64).unsqueeze(0)
    x = torch.sin(rows * cols * (rank + 1) / 7.0 + step)
    y = torch.cos(rows * (rank + 2) / 5.0 - step).expand(4, 3) * torch.tensor([1.0, -0.5, 0.25], dtype=torch.float64)
    return x, y


def _fsdp_reference(model: nn.Module, world: int, divisor: int) -> Tuple[List[List[float]], List[torch.Tensor]]:
    """The per-rank losses at every step and the parameters after FSDP_STEPS SGD steps on the sum of every rank's
    gradient divided by ``divisor``, on one process: the world size is FSDP's documented semantics (the average),
    1 the sum that a reduce-scatter without its division gives (named in the failure message)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=FSDP_LR, momentum=FSDP_MOMENTUM)
    losses: List[List[float]] = []
    for step in range(FSDP_STEPS):
        optimizer.zero_grad()
        per_rank = []
        for r in range(world):
            x, y = _fsdp_batch(r, step)
            per_rank.append(nn.functional.mse_loss(model(x), y))
        losses.append([float(loss) for loss in per_rank])
        (torch.stack(per_rank).sum() / divisor).backward()
        optimizer.step()
    return losses, [p.detach().clone() for p in model.parameters()]


@check("fsdp2")
def check_fsdp2(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """fully_shard over a 1-D mesh of every rank: each rank trains on its own batch; the losses at every step and the
    parameters after FSDP_STEPS steps (assembled from every rank's shard) equal a one-process reference trained on
    the gradient averaged over all ranks' batches."""
    require_torch(2, 7, "fsdp2")
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    require_world(2, world, "fsdp2")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = ctx.device
    model = _fsdp_model()
    names = [name for name, _ in model.named_parameters()]
    ref_losses, references = _fsdp_reference(copy.deepcopy(model), world, world)
    _, summed = _fsdp_reference(copy.deepcopy(model), world, 1)
    # zip(strict=) is Python 3.10; the lists come from one model.
    ref_params = dict(zip(names, references))  # noqa: B905
    summed_params = dict(zip(names, summed))  # noqa: B905
    mesh = init_device_mesh(device.type, (world,))
    # Each Linear is its own parameter group, the root a third (the way training code wraps blocks).
    fully_shard(model[0], mesh=mesh)
    fully_shard(model[2], mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=FSDP_LR, momentum=FSDP_MOMENTUM)
    losses: List[float] = []
    for step in range(FSDP_STEPS):
        optimizer.zero_grad()
        x, y = _fsdp_batch(rank, step)
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    shards = [p.to_local().detach().cpu() for p in model.parameters()]
    everyone = ctx.exchange("fsdp2.shards", [shard.flatten().tolist() for shard in shards])
    everyone_losses = ctx.exchange("fsdp2.losses", losses)
    problems: List[str] = []
    worst = 0.0
    shard_rows: Dict[str, List[int]] = {}
    for index, name in enumerate(names):
        reference = ref_params[name]
        rest = tuple(reference.shape[1:])
        pieces = [torch.tensor(everyone[r][index], dtype=torch.float64).reshape((-1,) + rest) for r in range(world)]
        shard_rows[name] = [int(piece.shape[0]) for piece in pieces]
        expected_rows = [int(chunk_of(reference, 0, r, world).shape[0]) for r in range(world)]
        if shard_rows[name] != expected_rows:
            problems.append(
                "%s: expected every rank to hold its dim-0 shard of %s rows, got %s" % (name, expected_rows, shard_rows[name])
            )
            continue
        assembled = torch.cat(pieces, dim=0)
        difference = (assembled - reference).abs()
        worst = max(worst, float(difference.max()))
        if not torch.allclose(assembled, reference, rtol=FSDP_RTOL, atol=FSDP_ATOL):
            at = int(difference.flatten().argmax())
            problems.append(
                "%s after %d steps, element %d: expected %.12g (one process, gradient averaged over %d ranks' "
                "batches), got %.12g (summing the gradients instead would give %.12g)"
                % (
                    name,
                    FSDP_STEPS,
                    at,
                    float(reference.flatten()[at]),
                    world,
                    float(assembled.flatten()[at]),
                    float(summed_params[name].flatten()[at]),
                )
            )
    # The losses after the parameters: a wrong gradient shows in both, the parameters say more.
    for step in range(FSDP_STEPS):
        for r in range(world):
            want, got = ref_losses[step][r], float(everyone_losses[r][step])
            if abs(got - want) > FSDP_RTOL * abs(want) + FSDP_ATOL:
                problems.append(
                    "step %d, rank %d's loss: expected %.12g (the reference's forward), got %.12g" % (step + 1, r, want, got)
                )
    details = {"world_size": world, "steps": FSDP_STEPS, "shard_rows": shard_rows, "max_difference": worst}
    if problems:
        raise CheckFailed("; ".join(problems[:8]), details)
    return (
        "after %d SGD steps the %d parameters, assembled from %d ranks' shards, and every step's losses equal the "
        "one-process reference (gradient averaged over every rank's batch; max difference %.3g)"
        % (FSDP_STEPS, sum(p.numel() for p in references), world, worst),
        details,
    )


# -- dtensor -------------------------------------------------------------------------------------------

# torch.distributed.tensor is public from 2.5 (pytorch PR #133881; before it, torch.distributed._tensor).


def _dtensor_shape(world: int) -> Tuple[int, int]:
    """Rows and columns that no world size divides evenly: Shard's chunks differ in size, the last may be empty."""
    return 2 * world + 1, 3 * world + 1


@check("dtensor")
def check_dtensor(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """A known tensor distributed over a 1-D DeviceMesh of every rank, moved between placements; every rank's local
    tensor after each move is the known piece of it (a row or column chunk, the whole, the sum of the ranks'
    partial values)."""
    require_torch(2, 5, "dtensor")
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    require_world(2, world, "dtensor")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    device = ctx.device
    mesh = init_device_mesh(device.type, (world,))
    rows, cols = _dtensor_shape(world)
    full = known_tensor(rows, cols)
    total = world * (world + 1) // 2
    problems: List[str] = []

    def expect(what: str, tensor: Any, expected: torch.Tensor) -> None:
        found = describe_difference(what, expected, tensor.to_local().detach().cpu())
        if found is not None:
            problems.append(found)

    by_rows = distribute_tensor(full.to(device), mesh, [Shard(0)])
    expect("distribute_tensor(Shard(0))", by_rows, chunk_of(full, 0, rank, world))
    expect("Shard(0) -> Replicate", by_rows.redistribute(mesh, [Replicate()]), full)
    by_cols = by_rows.redistribute(mesh, [Shard(1)])
    expect("Shard(0) -> Shard(1)", by_cols, chunk_of(full, 1, rank, world))
    expect("Shard(1) -> Replicate", by_cols.redistribute(mesh, [Replicate()]), full)
    expect("Shard(1) -> Shard(0)", by_cols.redistribute(mesh, [Shard(0)]), chunk_of(full, 0, rank, world))
    replicated = distribute_tensor(full.to(device), mesh, [Replicate()])
    expect("Replicate -> Shard(1)", replicated.redistribute(mesh, [Shard(1)]), chunk_of(full, 1, rank, world))
    # Partial: every rank holds (rank + 1) x the tensor; the placement's value is their sum, which no rank holds.
    partial = DTensor.from_local((full * (rank + 1)).to(device), mesh, [Partial()], run_check=False)
    expect("Partial -> Replicate (the sum over ranks)", partial.redistribute(mesh, [Replicate()]), full * total)
    expect(
        "Partial -> Shard(0) (the sum over ranks)", partial.redistribute(mesh, [Shard(0)]), chunk_of(full * total, 0, rank, world)
    )
    gathered = by_cols.full_tensor().detach().cpu()
    found = describe_difference("Shard(1).full_tensor()", full, gathered)
    if found is not None:
        problems.append(found)
    # Each rank judges its own local tensors (the report puts every rank's message side by side); no collective
    # follows, so a rank that fails here leaves no other waiting.
    details = {"world_size": world, "shape": [rows, cols]}
    if problems:
        raise CheckFailed("; ".join(problems[:8]), details)
    return (
        "a %dx%d tensor on a mesh of %d ranks: Shard(0), Shard(1), Replicate and Partial and the moves between them "
        "gave every rank its known local tensor" % (rows, cols, world),
        details,
    )


# -- dcp -----------------------------------------------------------------------------------------------

# dcp.save/load with DTensor state (the public torch.distributed.tensor) and format_utils.dcp_to_torch_save: 2.5.
DCP_STEP = 7
# What one rank's checkpoint files may add up to before they travel through the store (they are a few KiB).
DCP_MAX_BYTES = 4 << 20


def _dcp_state(world: int) -> Dict[str, torch.Tensor]:
    """The full tensors of the saved state: ``rows`` saved Shard(0), ``cols`` saved Shard(1), ``step`` a plain
    (replicated) tensor; all values different, across tensors too."""
    rows, cols = _dtensor_shape(world)
    return {
        "rows": known_tensor(rows, cols),
        "cols": known_tensor(cols, rows + 2, torch.float64, start=10000),
        "step": torch.tensor(DCP_STEP, dtype=torch.int64),
    }


def _read_tree(root: str) -> Dict[str, bytes]:
    """Every file under ``root`` by its relative path."""
    found: Dict[str, bytes] = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, root)] = handle.read()
    return found


def _write_tree(root: str, files: Dict[str, bytes]) -> None:
    for name, data in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)


def _merge(everyone: Sequence[Dict[str, str]]) -> Tuple[Dict[str, bytes], List[str]]:
    """One checkpoint directory from every rank's files; two ranks that wrote one name with different contents are
    a problem (on a shared filesystem one would overwrite the other)."""
    merged: Dict[str, bytes] = {}
    writer: Dict[str, int] = {}
    problems: List[str] = []
    for r, files in enumerate(everyone):
        for name, encoded in sorted(files.items()):
            data = base64.b64decode(encoded)
            if name in merged and merged[name] != data:
                problems.append("ranks %d and %d both wrote %s, with different contents" % (writer[name], r, name))
                continue
            merged[name] = data
            writer[name] = r
    return merged, problems


@check("dcp")
def check_dcp(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """torch.distributed.checkpoint: every rank saves its shards of known DTensors (one Shard(0), one Shard(1)) and a
    replicated tensor; the checkpoint is loaded back resharded, exactly.

    Within one run the world size is fixed, so resharding is checked two ways: on the same mesh with every tensor's
    sharding swapped (each rank reads pieces of every rank's chunks, at offsets inside them), and on a world of one
    (format_utils.dcp_to_torch_save on each rank alone: no process group, every chunk read whole into full tensors).
    Each rank writes to a directory of its own and the files travel to every rank through the rendezvous store, so
    the check reads a complete checkpoint whether the ranks share a filesystem (one container) or not (one per rank).
    """
    require_torch(2, 5, "dcp")
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    require_world(2, world, "dcp")
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    device = ctx.device
    mesh = init_device_mesh(device.type, (world,))
    full = _dcp_state(world)
    root = tempfile.mkdtemp(prefix="distval-dcp-")
    try:
        written, assembled = os.path.join(root, "written"), os.path.join(root, "assembled")
        saved = {
            "rows": distribute_tensor(full["rows"].to(device), mesh, [Shard(0)]),
            "cols": distribute_tensor(full["cols"].to(device), mesh, [Shard(1)]),
            "step": full["step"].clone().to(device),
        }
        dcp.save(saved, storage_writer=dcp.FileSystemWriter(written))
        files = _read_tree(written)
        size = sum(len(data) for data in files.values())
        if size > DCP_MAX_BYTES:
            raise CheckFailed(
                "rank %d's checkpoint files add up to %d bytes; expected a few KiB for %s" % (rank, size, list(full))
            )
        everyone = ctx.exchange("dcp.files", {name: base64.b64encode(data).decode("ascii") for name, data in files.items()})
        merged, problems = _merge(everyone)
        _write_tree(assembled, merged)
        # 1. The same mesh, every sharding swapped.
        loaded = {
            "rows": distribute_tensor(torch.zeros_like(full["rows"]).to(device), mesh, [Shard(1)]),
            "cols": distribute_tensor(torch.zeros_like(full["cols"]).to(device), mesh, [Shard(0)]),
            "step": torch.zeros_like(full["step"]).to(device),
        }
        dcp.load(loaded, storage_reader=dcp.FileSystemReader(assembled))
        swapped = (
            ("rows (saved Shard(0)) loaded as Shard(1)", 1, "rows"),
            ("cols (saved Shard(1)) loaded as Shard(0)", 0, "cols"),
        )
        for what, dim, key in swapped:
            found = describe_difference(what, chunk_of(full[key], dim, rank, world), loaded[key].to_local().cpu())
            if found is not None:
                problems.append(found)
        found = describe_difference("step loaded on %d ranks" % world, full["step"], loaded["step"].cpu())
        if found is not None:
            problems.append(found)
        # 2. A world of one: this rank alone turns the checkpoint into full tensors.
        single = os.path.join(root, "single.pt")
        dcp_to_torch_save(assembled, single)
        alone = torch.load(single)
        for key, expected in full.items():
            got = alone.get(key) if isinstance(alone, dict) else None
            if not isinstance(got, torch.Tensor):
                problems.append("%s loaded on one rank alone: expected a tensor, got %s" % (key, type(got).__name__))
                continue
            found = describe_difference("%s loaded on one rank alone" % key, expected, got)
            if found is not None:
                problems.append(found)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # Each rank judges what it loaded, as in dtensor.
    details = {"world_size": world, "files": sorted(merged), "bytes_this_rank": size}
    if problems:
        raise CheckFailed("; ".join(problems[:8]), details)
    return (
        "saved on %d ranks (Shard(0), Shard(1), replicated), loaded exactly with the shardings swapped and on one "
        "rank alone (%d files)" % (world, len(merged)),
        details,
    )
