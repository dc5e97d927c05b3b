"""``slca simulate`` (try one call by hand) and ``slca serve-sim`` (the HTTP service)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from slca_grpo.cli.common import fail
from slca_grpo.keys import OPENAI_KEY_ENV, SIMULATOR_KEY_ENV, SecretError, resolve_secret
from slca_grpo.keys import SIMULATOR_TOKEN_ENV as TOKEN_ENV


def register(subparsers: Any) -> None:
    simulate = subparsers.add_parser(
        "simulate",
        help="simulate one tool call and print the observation as JSON",
        description="Simulate one tool call against a tool schema file and print the observation as JSON.",
    )
    simulate.add_argument(
        "--tools",
        required=True,
        metavar="FILE",
        help='JSON file: a list of tool schemas, one schema, or {"tools": [...]}',
    )
    simulate.add_argument(
        "--call",
        required=True,
        metavar="JSON",
        help='the call, e.g. \'{"name": "get_weather", "arguments": {"city": "Paris"}}\'; @FILE reads it',
    )
    simulate.add_argument("--session-id", default=None, help="session id (state carries over only within one process)")
    _add_simulator_arguments(simulate)
    simulate.set_defaults(func=run_simulate)

    serve = subparsers.add_parser(
        "serve-sim",
        help="serve the tool simulator over HTTP",
        description="Serve the tool simulator over HTTP for many rollout workers.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    serve.add_argument("--port", type=int, default=8765, help="TCP port, 1 to 65535 (default 8765)")
    serve.add_argument(
        "--token-file", metavar="FILE", help=f"file holding the bearer token clients must send (default: ${TOKEN_ENV})"
    )
    serve.add_argument(
        "--token", default=None, help="deprecated: shows the token in ps; use --token-file or $" + TOKEN_ENV
    )
    serve.add_argument(
        "--allow-no-token",
        action="store_true",
        help="allow serving on a non-loopback address without a token",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=4 * 1024 * 1024,
        metavar="N",
        help="largest request body accepted; a larger one gets 413 (default 4 MiB)",
    )
    serve.add_argument(
        "--request-budget",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds the service may spend on one request; past it, error observations of kind "
        "over_budget. A request body must also arrive within it, else 408 (default 30)",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds a client has to send a request's headers, from connecting (or from the first byte of a "
        "later request on a kept-alive connection); a slower connection is closed (default 10)",
    )
    serve.add_argument(
        "--keep-alive",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="an idle kept-alive connection is closed after this many seconds (default 5)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="connections open at once; past it the one waiting longest without a request is closed, or the "
        "new one when all have a request in progress (default 1024, fewer where ulimit -n is lower)",
    )
    serve.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"))
    _add_simulator_arguments(serve)
    serve.set_defaults(func=run_serve)


def _add_simulator_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("simulator")
    g.add_argument("--config", metavar="FILE", help="YAML/JSON simulator config (flags override it)")
    g.add_argument("--backend", help="schema (default), openai, or a backend a --plugin registers")
    g.add_argument("--seed", type=int)
    g.add_argument("--cache", metavar="PATH", help="SQLite cache file")
    g.add_argument("--session-ttl", type=float, metavar="SECONDS")
    g.add_argument("--max-sessions", type=int)
    g.add_argument("--max-observation-tokens", type=int, help="truncate longer observations (0 = never)")
    for name in ("timeout", "server-error", "rate-limit", "empty-result"):
        g.add_argument(f"--{name}-rate", type=float, metavar="P", help=f"injected {name.replace('-', ' ')} rate")
    o = parser.add_argument_group("openai backend")
    o.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    o.add_argument("--model")
    o.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="file holding the endpoint's API key (default: $SLCA_SIM_API_KEY or $OPENAI_API_KEY)",
    )
    o.add_argument("--api-key", help="deprecated: shows the key in ps; use --api-key-file or $SLCA_SIM_API_KEY")
    o.add_argument("--temperature", type=float)
    o.add_argument("--request-timeout", type=float, metavar="SECONDS")
    o.add_argument("--max-retries", type=int)
    o.add_argument("--concurrency", type=int)
    o.add_argument(
        "--no-schema", action="store_true", default=None, help='ablation "w/o SGLS": no schema in the prompt'
    )


def _positive_seconds(flag: str, value: float) -> None:
    # `not x > 0` and isfinite: a NaN passes every `x <= 0` test, and an infinite time is no bound.
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{flag} must be a finite number of seconds > 0, got {value}")


def _check_serve_options(args: argparse.Namespace) -> None:
    """ValueError naming the first bad serve-sim option (before anything starts)."""
    if not 1 <= args.port <= 65535:
        raise ValueError(f"--port must be an integer from 1 to 65535, got {args.port}")
    if args.max_body_bytes < 1:
        raise ValueError(f"--max-body-bytes must be >= 1, got {args.max_body_bytes}")
    _positive_seconds("--request-budget", args.request_budget)
    _positive_seconds("--header-timeout", args.header_timeout)
    _positive_seconds("--keep-alive", args.keep_alive)
    if args.max_connections is not None and args.max_connections < 1:
        raise ValueError(f"--max-connections must be >= 1, got {args.max_connections}")


def _check_simulator_flags(args: argparse.Namespace) -> None:
    """ValueError naming the first bad simulator flag; the config checks the values again by field name."""
    if args.session_ttl is not None and not args.session_ttl > 0:  # NaN too: it breaks session expiry
        raise ValueError(f"--session-ttl must be > 0 seconds, got {args.session_ttl}")
    if args.max_sessions is not None and args.max_sessions < 1:
        raise ValueError(f"--max-sessions must be >= 1, got {args.max_sessions}")
    if args.request_timeout is not None:
        _positive_seconds("--request-timeout", args.request_timeout)
    if args.temperature is not None and not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise ValueError(f"--temperature must be a finite number >= 0, got {args.temperature}")
    for name in ("timeout", "server-error", "rate-limit", "empty-result"):
        rate = getattr(args, f"{name.replace('-', '_')}_rate")
        if rate is not None and not 0.0 <= rate <= 1.0:
            raise ValueError(f"--{name}-rate must be in [0, 1], got {rate}")


def build_config(args: argparse.Namespace) -> Any:
    """The SimulatorConfig from --config plus flags; ValueError names what is wrong."""
    from slca_grpo.config import from_dict
    from slca_grpo.simulator.config import SimulatorConfig

    _check_simulator_flags(args)
    data: dict[str, Any] = {}
    if args.config:
        data = _load_structured(Path(args.config), "--config")
        if isinstance(data, dict) and isinstance(data.get("simulator"), dict):
            data = data["simulator"]
    config = from_dict(SimulatorConfig, data, prefix="simulator.") if data else SimulatorConfig()
    top = {
        "backend": args.backend,
        "seed": args.seed,
        "cache_path": args.cache,
        "session_ttl_s": args.session_ttl,
        "max_sessions": args.max_sessions,
    }
    for key, value in top.items():
        if value is not None:
            setattr(config, key, value)
    if args.max_observation_tokens is not None:
        config.max_observation_tokens = args.max_observation_tokens or None
    for flag, field in (
        ("timeout_rate", "timeout_rate"),
        ("server_error_rate", "server_error_rate"),
        ("rate_limit_rate", "rate_limit_rate"),
        ("empty_result_rate", "empty_result_rate"),
    ):
        value = getattr(args, flag)
        if value is not None:
            setattr(config.errors, field, value)
    openai = {
        "base_url": args.base_url,
        "model": args.model,
        "api_key": resolve_secret(
            file=getattr(args, "api_key_file", None),
            file_flag="--api-key-file",
            env=(SIMULATOR_KEY_ENV, OPENAI_KEY_ENV),
            flag_value=args.api_key,
            flag="--api-key",
            read_env=False,
        ),  # OpenAIConfig.resolved_api_key reads the variables when it needs the key
        "temperature": args.temperature,
        "timeout_s": args.request_timeout,
        "max_retries": args.max_retries,
        "concurrency": args.concurrency,
        "no_schema": args.no_schema,
    }
    for key, value in openai.items():
        if value is not None:
            setattr(config.openai, key, value)
    config.validate()
    return config


def _start_simulator(args: argparse.Namespace) -> Any:
    """The simulator the flags describe; ``ValueError`` with a one-line reason otherwise."""
    config = build_config(args)
    from slca_grpo.simulator.core import build_simulator

    try:
        return build_simulator(config)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot start the simulator: {exc}") from None


def run_simulate(args: argparse.Namespace) -> int:
    try:
        tools = _load_tools(Path(args.tools))
        call = _load_call(args.call)
        simulator = _start_simulator(args)
    except ValueError as exc:
        return fail(str(exc))
    with simulator:
        obs = simulator.simulate(call, tools, args.session_id)
    print(
        json.dumps(
            {
                "observation": obs.text,
                "error": obs.error.to_dict() if obs.error else None,
                "cached": obs.cached,
                "latency_ms": round(obs.latency_ms, 3),
            },
            ensure_ascii=False,
        )
    )
    return 0


def run_serve(args: argparse.Namespace) -> int:
    try:
        _check_serve_options(args)
        _check_simulator_flags(args)
    except ValueError as exc:
        return fail(str(exc))
    try:
        token = resolve_secret(
            file=args.token_file, file_flag="--token-file", env=(TOKEN_ENV,), flag_value=args.token, flag="--token"
        )
    except SecretError as exc:
        return fail(str(exc))
    from slca_grpo.simulator.server import connection_budget
    from slca_grpo.simulator.service import is_loopback

    if not token and not is_loopback(args.host) and not args.allow_no_token:
        return fail(
            f"refusing to serve on non-loopback host {args.host!r} without a token "
            f"(set ${TOKEN_ENV} or --token-file, or pass --allow-no-token)"
        )
    try:  # what fits the limit on open files (ulimit -n), which this raises where it may
        max_connections, _ = connection_budget(args.max_connections)
    except ValueError as exc:
        return fail(f"--max-connections: {exc}")
    try:
        simulator = _start_simulator(args)
    except ValueError as exc:
        return fail(str(exc))
    from slca_grpo.simulator.server import serve

    print(
        f"slca serve-sim: backend={simulator.config.backend} on http://{args.host}:{args.port} "
        f"(token {'required' if token else 'not required'})",
        file=sys.stderr,
        flush=True,
    )
    with simulator:
        serve(
            simulator,
            host=args.host,
            port=args.port,
            token=token,
            allow_no_token=args.allow_no_token,
            max_body_bytes=args.max_body_bytes,
            request_timeout_s=args.request_budget,
            header_timeout_s=args.header_timeout,
            keep_alive_s=args.keep_alive,
            max_connections=max_connections,
            log_level=args.log_level,
        )
    return 0


def _load_structured(path: Path, flag: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {flag} {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{flag} {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{flag} {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


def _load_tools(path: Path) -> list[dict[str, Any]]:
    data = _load_structured(path, "--tools")
    if isinstance(data, dict):
        data = data["tools"] if isinstance(data.get("tools"), list) else [data]
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise ValueError(f"--tools {path} must hold a list of tool schemas (JSON objects)")
    return data


def _load_call(text: str) -> dict[str, Any]:
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read --call file {text[1:]}: {exc.strerror}") from None
    try:
        call = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--call is not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ValueError('--call must be a JSON object with a string "name" (and an "arguments" object)')
    return call
