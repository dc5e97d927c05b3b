"""Prometheus text exposition (format 0.0.4) of the service's counters, written by hand."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServiceMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, int]] = Counter()
        self.disconnects: Counter[str] = Counter()  # requests whose client left before its body arrived
        self.observations = 0
        self.observation_errors: Counter[str] = Counter()
        self._buckets = [0] * len(LATENCY_BUCKETS_S)
        self._latency_sum = 0.0
        self._latency_count = 0

    def observe_request(self, endpoint: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(endpoint, status)] += 1
            self._latency_sum += seconds
            self._latency_count += 1
            for i, bound in enumerate(LATENCY_BUCKETS_S):
                if seconds <= bound:
                    self._buckets[i] += 1
                    break

    def observe_disconnect(self, endpoint: str) -> None:
        with self._lock:
            self.disconnects[endpoint] += 1

    def observe_observation(self, error_kind: str | None) -> None:
        with self._lock:
            self.observations += 1
            if error_kind is not None:
                self.observation_errors[error_kind] += 1

    def render(self, simulator_stats: dict[str, Any], sessions: int) -> str:
        with self._lock:
            lines = [
                "# HELP slca_sim_requests_total HTTP requests handled, by endpoint and status code.",
                "# TYPE slca_sim_requests_total counter",
            ]
            for (endpoint, status), n in sorted(self.requests.items()):
                lines.append(f'slca_sim_requests_total{{endpoint="{_escape(endpoint)}",status="{status}"}} {n}')
            lines += [
                "# HELP slca_sim_client_disconnects_total Requests whose client left before sending the whole body.",
                "# TYPE slca_sim_client_disconnects_total counter",
            ]
            for endpoint, n in sorted(self.disconnects.items()):
                lines.append(f'slca_sim_client_disconnects_total{{endpoint="{_escape(endpoint)}"}} {n}')
            lines += [
                "# HELP slca_sim_observations_total Observations returned (one per simulated call).",
                "# TYPE slca_sim_observations_total counter",
                f"slca_sim_observations_total {self.observations}",
                "# HELP slca_sim_observation_errors_total Error observations returned, by error kind.",
                "# TYPE slca_sim_observation_errors_total counter",
            ]
            for kind, n in sorted(self.observation_errors.items()):
                lines.append(f'slca_sim_observation_errors_total{{kind="{_escape(kind)}"}} {n}')
            lines += [
                "# HELP slca_sim_cache_hits_total Simulated calls answered from the cache.",
                "# TYPE slca_sim_cache_hits_total counter",
                f"slca_sim_cache_hits_total {simulator_stats.get('cache_hits', 0)}",
                "# HELP slca_sim_cache_misses_total Calls the backend had to answer (cache enabled).",
                "# TYPE slca_sim_cache_misses_total counter",
                f"slca_sim_cache_misses_total {simulator_stats.get('cache_misses', 0)}",
                "# HELP slca_sim_backend_calls_total Calls that reached the backend.",
                "# TYPE slca_sim_backend_calls_total counter",
                f"slca_sim_backend_calls_total {simulator_stats.get('backend_calls', 0)}",
                "# HELP slca_sim_sessions Live sessions.",
                "# TYPE slca_sim_sessions gauge",
                f"slca_sim_sessions {sessions}",
                "# HELP slca_sim_request_duration_seconds Time to handle an HTTP request.",
                "# TYPE slca_sim_request_duration_seconds histogram",
            ]
            cumulative = 0
            for bound, n in zip(LATENCY_BUCKETS_S, self._buckets, strict=True):
                cumulative += n
                lines.append(f'slca_sim_request_duration_seconds_bucket{{le="{bound:g}"}} {cumulative}')
            lines.append(f'slca_sim_request_duration_seconds_bucket{{le="+Inf"}} {self._latency_count}')
            lines.append(f"slca_sim_request_duration_seconds_sum {self._latency_sum:.6f}")
            lines.append(f"slca_sim_request_duration_seconds_count {self._latency_count}")
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
