"""``python -m recipes.sim_fidelity``: measure SGLS against τ²-Bench's real tools (README.md beside this file).

Only light imports at module level: ``--help`` and a bad argument must not import τ² (litellm takes seconds).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slca_grpo.cli import common
from slca_grpo.cli.common import fail
from slca_grpo.cli.tau2 import TAU2_DOMAINS as FIDELITY_DOMAINS  # without importing τ² itself

COMMAND = "python -m recipes.sim_fidelity"
SIMULATOR_HELP = "'schema' (offline, default) or an OpenAI-compatible endpoint 'openai:BASE_URL#MODEL'"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description=(
            "Replay τ² tasks' gold tool-call sequences, and perturbed ones, through τ²'s real environment and "
            "through SGLS with the same schemas; compare answers, errors, session state and HierR rewards."
        ),
    )
    parser.add_argument(
        "--domain",
        action="append",
        default=None,
        metavar="DOMAIN",
        help=f"τ² domain(s): {', '.join(FIDELITY_DOMAINS)}; repeatable or a comma list (default airline)",
    )
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N tasks of each domain")
    parser.add_argument("--split", default="base", help="τ² task split (default base)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the perturbations and of SGLS (default 0)")
    parser.add_argument("--simulator", default="schema", help=SIMULATOR_HELP)
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=None,
        help="an endpoint simulator's time for one whole reply, in seconds (default 60)",
    )
    parser.add_argument(
        "--retries", type=int, default=None, help="an endpoint simulator's retries of a failed request (default 3)"
    )
    parser.add_argument(
        "--perturbations",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also replay perturbed sequences (wrong ids, out of order, repeated writes, ...); on by default",
    )
    parser.add_argument(
        "--returns",
        action="store_true",
        help="give SGLS τ²'s return schemas too (by default it sees the tools as an agent does: no returns)",
    )
    parser.add_argument("--judge", default="rule", help="summary judge: 'rule' (default) or 'openai:BASE_URL#MODEL'")
    parser.add_argument("--out", default=None, help="output directory (default runs/fidelity/<domain>-<time>)")
    parser.add_argument(
        "--force", action="store_true", help="replace the report that --out already holds (refused without it)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an error too (also SLCA_DEBUG=1); without it, an expected error is one line",
    )
    return parser


def parse_domains(values: list[str] | None) -> tuple[str, ...]:
    """``--domain a --domain b,c`` → (a, b, c), without repeats; ValueError names an unknown one."""
    names = [part.strip() for value in (values or ["airline"]) for part in value.split(",") if part.strip()]
    unknown = [n for n in names if n not in FIDELITY_DOMAINS]
    if unknown:
        raise ValueError(f"unknown τ² domain {unknown[0]!r}: choose from {', '.join(FIDELITY_DOMAINS)}")
    if not names:
        raise ValueError(f"--domain names no domain: choose from {', '.join(FIDELITY_DOMAINS)}")
    return tuple(dict.fromkeys(names))


def simulator_config(spec: str, seed: int, timeout_s: float | None = None, retries: int | None = None) -> Any:
    """The SimulatorConfig of ``--simulator``: the schema backend, or the openai backend on an endpoint
    (the one spec grammar of ``slca_grpo.endpoints``; the key as for the simulator everywhere,
    ``slca_grpo.keys``)."""
    from slca_grpo.endpoints import parse_endpoint_spec
    from slca_grpo.simulator.config import OpenAIConfig, SimulatorConfig

    endpoint = parse_endpoint_spec(spec, offline="schema")
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"--timeout-s must be a number of seconds > 0, got {timeout_s}")
    if retries is not None and retries < 0:
        raise ValueError(f"--retries must be >= 0, got {retries}")
    if endpoint is None:
        if timeout_s is not None or retries is not None:
            raise ValueError("--timeout-s and --retries apply to an endpoint simulator (--simulator openai:…) only")
        return SimulatorConfig(backend="schema", seed=seed, max_observation_tokens=None)
    given = {"timeout_s": timeout_s, "max_retries": retries}
    openai = OpenAIConfig(
        base_url=endpoint.base_url, model=endpoint.model, **{k: v for k, v in given.items() if v is not None}
    )
    return SimulatorConfig(backend="openai", seed=seed, max_observation_tokens=None, openai=openai)


def _default_out(domains: tuple[str, ...]) -> Path:
    return Path("runs") / "fidelity" / f"{'+'.join(domains)}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_fidelity_command(args: argparse.Namespace) -> int:
    try:
        domains = parse_domains(args.domain)
        if args.limit is not None and args.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {args.limit}")
        config = simulator_config(args.simulator, args.seed, args.timeout_s, args.retries)
    except ValueError as exc:
        return fail(str(exc))
    from slca_grpo.data.tau2.package import Tau2Unavailable

    try:
        from recipes.sim_fidelity.report import summary_table
        from recipes.sim_fidelity.runner import FidelitySettings, run_fidelity
        from recipes.sim_fidelity.sequences import PERTURBATIONS
        from slca_grpo.data.tau2.tasks import TaskSelectionError
        from slca_grpo.trainer.run_folder import RunFolderBusy, check_out_folder, hold_run_folder

        settings = FidelitySettings(
            domains=domains,
            limit=args.limit,
            split=args.split,
            seed=args.seed,
            perturbations=PERTURBATIONS if args.perturbations else (),
            with_returns=args.returns,
            judge=args.judge,
            simulator=config,
        )
        out = Path(args.out) if args.out else _default_out(domains)
        # Before the replay: a file, a checkpoint or another run's folder is refused, not found after it.
        check_out_folder(out, flag="--out", resume=False, force=args.force, can_resume=False)
        started = time.perf_counter()
        with hold_run_folder(out, COMMAND, next_step="use another --out"):
            results = run_fidelity(settings, out, progress=not args.no_progress)
    except (Tau2Unavailable, TaskSelectionError, RunFolderBusy) as exc:
        return fail(str(exc))
    except ValueError as exc:  # a bad judge spec or setting: the message names it
        return fail(str(exc))
    print(summary_table(results), flush=True)
    if results and all(r.compared_sequences == 0 and r.void_sequences for r in results.values()):
        first = next(r for r in results.values() if r.fault_example)
        return fail(
            f"nothing was compared: SGLS itself failed in every sequence ({first.fault_example[:160]!r}); "
            f"check --simulator (report: {out / 'report.md'})"
        )
    calls = sum(r.calls for r in results.values())
    print(
        f"{calls} calls replayed in {time.perf_counter() - started:.1f} s; report: {out / 'report.md'}", file=sys.stderr
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement; an expected error is one line on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    common.DEBUG = args.debug or os.environ.get("SLCA_DEBUG", "").strip() not in ("", "0")
    try:
        status = run_fidelity_command(args)
        sys.stdout.flush()  # inside the try: a reader that went away is a BrokenPipeError here
        return status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``... | head``): stop quietly, as cat does
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        return fail(str(exc) or type(exc).__name__)
