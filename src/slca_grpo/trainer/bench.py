"""``slca bench``: measure this machine, run a few RL and SFT steps of a config, and put each
phase's time beside its floor (``trainer/floors.py``) and the ratio.

Ratios, not seconds, are what travel between machines: a phase at 1.2× its floor is near what the
hardware allows wherever it runs; one at 6× has room to gain.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from slca_grpo.data.output import atomic_text
from slca_grpo.engine import native_kernels_available
from slca_grpo.models.device import bf16_autocast, native_bf16, resolve_bf16
from slca_grpo.provenance import cpu_model
from slca_grpo.trainer.build import build_rl_trainer, make_formatter, make_simulator, rl_models, start_process
from slca_grpo.trainer.floors import Group, ModelShape, PhaseFloor, Rates, rollout_floor, sft_floor, train_floor
from slca_grpo.trainer.optim import build_optimizer, clip_gradients
from slca_grpo.trainer.run_data import load_data, task_sampler
from slca_grpo.trainer.sft import build_example, length_bucketed_batches, sft_backward

BENCH_ROWS = 256  # rows of the timed matrix products: a micro-batch's worth of tokens


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _seconds(run: Callable[[], Any], device: torch.device, *, min_seconds: float = 0.2, max_calls: int = 20) -> float:
    """Median seconds of ``run`` after one warm-up call, repeated until ``min_seconds`` pass."""
    run()
    _sync(device)
    times: list[float] = []
    while len(times) < max_calls and (len(times) < 3 or sum(times) < min_seconds):
        started = time.perf_counter()
        run()
        _sync(device)
        times.append(time.perf_counter() - started)
        if times[0] > 2 * min_seconds:  # a slow shape (emulated bf16): one timed call is enough
            break
    return sorted(times)[len(times) // 2]


def linear_shapes(model: torch.nn.Module) -> dict[tuple[int, int], int]:
    """(in, out) of every matrix product in the model (the output head included) and how many."""
    counts: dict[tuple[int, int], int] = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            key = (module.in_features, module.out_features)
            counts[key] = counts.get(key, 0) + 1
    head = model.get_output_embeddings()
    if head is not None and not isinstance(head, torch.nn.Linear):
        key = (head.weight.shape[1], head.weight.shape[0])
        counts[key] = counts.get(key, 0) + 1
    return counts


def matmul_rate(shapes: dict[tuple[int, int], int], device: torch.device, bf16: bool, rows: int = BENCH_ROWS) -> float:
    """FLOP/s of the model's matrix products at ``rows`` tokens, float32 weights and inputs, under
    bf16 autocast when ``bf16`` (what training does): total FLOPs over total time, each shape
    weighted by how often the model has it."""
    flops = seconds = 0.0
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for (fan_in, fan_out), count in shapes.items():
            x = torch.randn(rows, fan_in, generator=generator).to(device)
            weight = torch.randn(fan_out, fan_in, generator=generator).to(device)

            def product(x=x, weight=weight):
                with bf16_autocast(device, bf16):
                    return torch.nn.functional.linear(x, weight)

            seconds += count * _seconds(product, device)
            flops += count * 2.0 * rows * fan_in * fan_out
    return flops / seconds


def memory_bandwidth(device: torch.device, megabytes: int = 256) -> float:
    """Bytes/s of reading a large float32 tensor once (a sum touches every byte)."""
    data = torch.ones(megabytes * 2**20 // 4, device=device)
    return data.numel() * 4 / _seconds(lambda: data.sum(), device, min_seconds=0.3)


@dataclass
class Machine:
    name: str
    device: str
    threads: int
    native_bf16: bool
    memory_bytes: float
    matmul_flops: dict[str, float]  # "fp32" / "bf16" -> FLOP/s at the model's shapes

    def rates(self, bf16: bool) -> Rates:
        precision = "bf16" if bf16 else "fp32"
        return Rates(self.matmul_flops[precision], self.memory_bytes, activation_bytes=2 if bf16 else 4)


MEASURE_ROUNDS = 3


def measure_machine(model: torch.nn.Module, device: torch.device, *, rounds: int = MEASURE_ROUNDS) -> Machine:
    """The machine's rates, each the best of ``rounds`` interleaved rounds (memory read, which varies
    most, three times a round): background load only ever slows a measurement down, and a floor
    wants what the hardware can do. On a shared 2-core EPYC one measurement of the memory read
    ranged 25–43 GB/s and of the bf16 matrix rate 237–319 GFLOP/s."""
    shapes = linear_shapes(model)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()
    memory, fp32, bf16 = 0.0, 0.0, 0.0
    for _ in range(max(1, rounds)):
        memory = max(memory, *(memory_bandwidth(device) for _ in range(3)))
        fp32 = max(fp32, matmul_rate(shapes, device, False))
        bf16 = max(bf16, matmul_rate(shapes, device, True))
    return Machine(
        name=name,
        device=str(device),
        threads=torch.get_num_threads(),
        native_bf16=native_bf16(device),
        memory_bytes=memory,
        matmul_flops={"fp32": fp32, "bf16": bf16},
    )


@dataclass
class Phase:
    name: str
    seconds: float  # measured, mean per step
    floor: PhaseFloor | None

    @property
    def ratio(self) -> float | None:
        return self.seconds / self.floor.seconds if self.floor and self.floor.seconds > 0 else None


@dataclass
class BenchResult:
    machine: Machine
    shape: ModelShape
    model: str
    rl_precision: str
    sft_precision: str
    rl: list[Phase] = field(default_factory=list)
    sft: list[Phase] = field(default_factory=list)
    rl_steps: int = 0
    sft_steps: int = 0
    # The warm-up RL step's phases (seconds): a process's first step, beside the steady ones.
    rl_first: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def phase(p: Phase) -> dict[str, Any]:
            floor = p.floor
            return {
                "name": p.name,
                "seconds": p.seconds,
                "floor_seconds": floor.seconds if floor else None,
                "ratio": p.ratio,
                "floor_flops": floor.flops if floor else None,
                "floor_bytes": floor.bytes if floor else None,
                "tokens": floor.tokens if floor else None,
                "detail": floor.detail if floor else "",
            }

        return {
            "machine": vars(self.machine),
            "model": self.model,
            "shape": vars(self.shape),
            "rl_precision": self.rl_precision,
            "sft_precision": self.sft_precision,
            "rl_steps": self.rl_steps,
            "sft_steps": self.sft_steps,
            "rl": [phase(p) for p in self.rl],
            "rl_first_step": self.rl_first,
            "sft": [phase(p) for p in self.sft],
            "notes": self.notes,
        }


def groups_of(trajectories: Sequence[Any], group_size: int) -> list[Group]:
    return [
        Group(
            len(trajectories[start].prompt_ids),
            tuple(tuple(t.response_mask) for t in trajectories[start : start + group_size]),
        )
        for start in range(0, len(trajectories), group_size)
    ]


def _mean_floor(floors: Sequence[PhaseFloor]) -> PhaseFloor:
    n = len(floors)
    return PhaseFloor(
        sum(f.seconds for f in floors) / n,
        sum(f.flops for f in floors) / n,
        sum(f.bytes for f in floors) / n,
        tokens=round(sum(f.tokens for f in floors) / n),
        detail=floors[-1].detail + (f" (last of {n} steps)" if n > 1 else ""),
    )


def bench_rl(
    config, model, tokenizer, ref_model, train_tasks, machine: Machine, steps: int, echo
) -> tuple[list[Phase], dict[str, float]]:
    """``steps`` RL steps after one warm-up step: rollouts, rewards + advantages, update; and the
    warm-up step's own phases (what a run's first step costs)."""
    rl = copy.deepcopy(config.rl)
    rl.diagnostics_every = 0  # a diagnostic pass is not part of a step's work
    trainer = build_rl_trainer(config, model, ref_model, tokenizer, rl=rl)
    tasks_for_step = task_sampler(train_tasks, config.train.seed, rl.prompts_per_step)
    rates = machine.rates(trainer.bf16)
    shape = ModelShape.of(base_model(model))
    group_size = config.rollout.group_size
    frozen = int(not trainer.needs_no_old_logprobs(rl.prompts_per_step)) + int(trainer.has_reference_pass())
    totals = {"rollouts": 0.0, "rewards": 0.0, "update": 0.0}
    floors: dict[str, list[PhaseFloor]] = {"prefill": [], "decode": [], "update": []}
    for step in range(steps + 1):
        started = time.perf_counter()
        metrics, trajectories = trainer.step(tasks_for_step(step), step)
        total = time.perf_counter() - started
        if echo:
            label = "warm-up" if step == 0 else f"{step}/{steps}"
            print(f"[bench] RL step {label}: {total:.1f} s", flush=True)
        if step == 0:
            first = {
                "rollouts": metrics["time/rollout_s"],
                "update": metrics["time/train_s"],
                "rewards": total - metrics["time/rollout_s"] - metrics["time/train_s"],
            }
            continue
        totals["rollouts"] += metrics["time/rollout_s"]
        totals["update"] += metrics["time/train_s"]
        totals["rewards"] += total - metrics["time/rollout_s"] - metrics["time/train_s"]
        groups = groups_of(trajectories, group_size)
        rollout = rollout_floor(shape, rates, groups)
        floors["prefill"].append(rollout["prefill"])
        floors["decode"].append(rollout["decode"])
        floors["update"].append(train_floor(shape, rates, groups, trained_passes=rl.ppo_epochs, frozen_passes=frozen))
    prefill, decode = _mean_floor(floors["prefill"]), _mean_floor(floors["decode"])
    rollouts = PhaseFloor(
        prefill.seconds + decode.seconds,
        prefill.flops + decode.flops,
        decode.bytes,
        tokens=prefill.tokens + decode.tokens,
        detail=f"prefill {prefill.detail} ({prefill.seconds:.2f} s) + decode {decode.detail} ({decode.seconds:.2f} s)",
    )
    return [
        Phase("rollouts", totals["rollouts"] / steps, rollouts),
        Phase("update", totals["update"] / steps, _mean_floor(floors["update"])),
        Phase("rewards", totals["rewards"] / steps, None),
    ], first


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformer itself (under peft's adapters, the wrapped model)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def bench_sft(config, model, tokenizer, train_tasks, machine: Machine, steps: int, echo) -> list[Phase]:
    """``steps`` SFT steps (length-bucketed batches, as SFT draws them) after one warm-up step on the
    longest of them: a process's first step at a new peak of memory pays for touching that memory
    (once per process; ~5 s a GB in a VM measured here), which a step of a running job does not."""
    formatter = make_formatter(config, tokenizer)
    simulator = make_simulator(config)
    sft = config.sft
    examples = []
    for task in train_tasks[: 8 * sft.batch_size * (steps + 1)]:
        example = build_example(task, formatter, lambda call, t: simulator.simulate(call, t.tools, f"sft-{t.id}").text)
        if example is not None and len(example.input_ids) <= sft.max_length:
            examples.append(example)
    batches = length_bucketed_batches(
        [len(e.input_ids) for e in examples], sft.batch_size, sft.bucket_batches, random.Random(0)
    )
    if len(batches) < steps + 1:
        return []
    device = next(model.parameters()).device
    bf16 = resolve_bf16(sft.bf16, device, "sft.bf16")
    rates = machine.rates(bf16)
    shape = ModelShape.of(base_model(model))
    optimizer = build_optimizer(model, lr=sft.lr, weight_decay=sft.weight_decay)
    model.train()
    seconds, floors = 0.0, []
    drawn = batches[: steps + 1]
    longest = max(drawn, key=lambda chosen: len(chosen) * max(len(examples[i].input_ids) for i in chosen))
    drawn.remove(longest)
    for step, chosen in enumerate([longest, *drawn]):
        batch = [examples[i] for i in chosen]
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        sft_backward(model, batch, formatter.pad_id, micro_batch_size=sft.micro_batch_size, bf16=bf16)
        clip_gradients(model, sft.grad_clip)
        optimizer.step()
        _sync(device)
        spent = time.perf_counter() - started
        if echo:
            print(f"[bench] SFT step {'warm-up' if step == 0 else f'{step}/{steps}'}: {spent:.2f} s", flush=True)
        if step:
            seconds += spent
            floors.append(sft_floor(shape, rates, [(len(e.input_ids), sum(e.loss_mask)) for e in batch]))
    return [Phase("step", seconds / steps, _mean_floor(floors))]


def run_bench(config, *, rl_steps: int = 2, sft_steps: int = 2, echo: bool = True) -> BenchResult:
    """Measure the machine at ``config``'s model shapes, then time ``rl_steps`` RL steps and
    ``sft_steps`` SFT steps (each after a warm-up step) against their floors."""
    device = start_process(config)
    train_tasks = load_data(config.data).train
    model, tokenizer, ref_model = rl_models(config, config.model.name, None, train_tasks, device)
    if echo:
        print(f"[bench] measuring this machine at {config.model.name}'s matrix shapes ...", flush=True)
    machine = measure_machine(base_model(model), device)
    rl_bf16 = resolve_bf16(config.rl.bf16, device, "rl.bf16")
    sft_bf16 = resolve_bf16(config.sft.bf16, device, "sft.bf16")
    result = BenchResult(
        machine=machine,
        shape=ModelShape.of(base_model(model)),
        model=config.model.name,
        rl_precision="bf16" if rl_bf16 else "fp32",
        sft_precision="bf16" if sft_bf16 else "fp32",
        rl_steps=rl_steps,
        sft_steps=sft_steps,
    )
    if rl_steps and device.type == "cpu":
        if rl_bf16 and native_kernels_available():
            result.notes.append("rollouts on oneDNN's bf16 products (the C ones are float32 only) and the C attention")
        elif not native_kernels_available():
            result.notes.append(
                "rollouts on PyTorch's attention and oneDNN's products: the C kernels are off or could not be built"
            )
    if rl_steps:
        result.rl, result.rl_first = bench_rl(config, model, tokenizer, ref_model, train_tasks, machine, rl_steps, echo)
    if sft_steps:
        if config.model.lora.enabled:
            result.notes.append("SFT not timed: with LoRA (model.lora.r > 0) SFT trains the full model first")
        else:
            result.sft = bench_sft(config, model, tokenizer, train_tasks, machine, sft_steps, echo)
            if not result.sft:
                result.notes.append("SFT not timed: too few training tasks with a reference answer")
    return result


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def format_bench(result: BenchResult) -> str:
    machine = result.machine
    gflops = {k: v / 1e9 for k, v in machine.matmul_flops.items()}
    lines = [
        f"machine: {machine.name} ({machine.device}, {machine.threads} threads; native bf16: "
        f"{'yes' if machine.native_bf16 else 'no'})",
        f"  matrix products at the model's shapes: fp32 {gflops['fp32']:.1f} GFLOP/s, bf16 autocast "
        f"{gflops['bf16']:.1f} GFLOP/s ({gflops['bf16'] / gflops['fp32']:.2f}x); memory read "
        f"{machine.memory_bytes / 1e9:.1f} GB/s",
        f"model: {result.model}: {result.shape.layers} layers, {result.shape.body_params / 1e6:.2f} M weights in "
        f"the layers' matrix products, head {result.shape.head_params / 1e6:.2f} M",
    ]

    def table(title: str, phases: Sequence[Phase]) -> None:
        lines.append("")
        lines.append(title)
        lines.append(f"  {'phase':<10} {'measured':>10} {'floor':>10} {'ratio':>7}  floor from")
        for p in phases:
            floor = f"{p.floor.seconds:.3f} s" if p.floor else "-"
            ratio = f"{p.ratio:.1f}x" if p.ratio is not None else "-"
            detail = p.floor.detail if p.floor else "judge, checker and advantages (no floor)"
            lines.append(f"  {p.name:<10} {p.seconds:>8.3f} s {floor:>10} {ratio:>7}  {detail}")

    if result.rl:
        total = sum(p.seconds for p in result.rl)
        floor = sum(p.floor.seconds for p in result.rl if p.floor)
        table(
            f"RL step ({result.rl_precision}; mean of {_steps(result.rl_steps)} after a warm-up): "
            f"{total:.2f} s against a floor of {floor:.3f} s ({total / floor:.1f}x)",
            result.rl,
        )
        if result.rl_first:
            first = sum(result.rl_first.values())
            parts = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in result.rl_first.items())
            lines.append(f"  first step (the warm-up): {first:.2f} s ({parts}), {first / total:.2f}x the steady step")
    if result.sft:
        table(f"SFT step ({result.sft_precision}; mean of {_steps(result.sft_steps)} after a warm-up)", result.sft)
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def write_bench_json(result: BenchResult, path: str | Path) -> None:
    with atomic_text(path) as handle:
        handle.write(json.dumps(result.to_dict(), indent=1) + "\n")
