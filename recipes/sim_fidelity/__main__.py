"""``python -m recipes.sim_fidelity``: the command line of :mod:`recipes.sim_fidelity.cli`."""

import sys

from recipes.sim_fidelity.cli import main

sys.exit(main())
