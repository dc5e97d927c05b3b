"""slca-grpo: Segment-Locked Credit Assignment for tool-calling RL."""

import os

# A run must be a function of its inputs, not of the machine's load: MKL may otherwise choose fewer
# threads when the cores are busy, which splits its sums differently and moves a run's digits (the
# same run beside another job differed from it alone). Read when MKL first runs, so set before any
# of it does; a value the user set is kept. OpenMP's teams are kept at their size the same way.
os.environ.setdefault("MKL_DYNAMIC", "FALSE")
os.environ.setdefault("OMP_DYNAMIC", "FALSE")

__version__ = "0.1.0"
