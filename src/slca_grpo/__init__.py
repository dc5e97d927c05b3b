"""slca-grpo: Segment-Locked Credit Assignment for tool-calling RL."""

import os

# A run must be a function of its inputs, not of the machine's load: these are MKL's and OpenMP's
# documented conditions for reproducible sums (a thread count that stays fixed while the cores are
# busy, code paths that do not depend on where buffers land). They are read when MKL first runs, so
# they are set before any of it does; a value the user set is kept. (The differences once seen
# beside another job came from the log-probs' row picking, engine/logprobs.rows_at.)
os.environ.setdefault("MKL_DYNAMIC", "FALSE")
os.environ.setdefault("MKL_CBWR", "AUTO")
os.environ.setdefault("OMP_DYNAMIC", "FALSE")

__version__ = "0.1.0"
