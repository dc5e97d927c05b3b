"""slca-grpo: Segment-Locked Credit Assignment for tool-calling RL."""

import os

# A run must be a function of its inputs, not of the machine's load or of where its buffers land:
# MKL may otherwise choose fewer threads when the cores are busy, and pick code paths by memory
# alignment, either of which splits its sums differently and moves a run's digits (the same run
# beside another job differed from it alone; two runs of the quick demo once parted by 6e-8 in a
# gradient norm). These are read when MKL first runs, so they are set before any of it does; a
# value the user set is kept. OpenMP's teams are kept at their size the same way.
os.environ.setdefault("MKL_DYNAMIC", "FALSE")
os.environ.setdefault("MKL_CBWR", "AUTO")
os.environ.setdefault("OMP_DYNAMIC", "FALSE")

__version__ = "0.1.0"
