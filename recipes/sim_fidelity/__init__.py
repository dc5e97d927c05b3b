"""The sim-to-real fidelity recipe: replay τ² tool-call sequences through τ²'s real tools and through
the simulator (SGLS), and measure how far apart they are (``python -m recipes.sim_fidelity``;
README.md says what it measures).

Modules: ``sequences`` (gold and perturbed call sequences), ``replay`` (real environment and SGLS
sessions), ``metrics`` (pure comparisons and tallies), ``reward_fidelity`` (HierR of the same
rollout on both sides), ``report`` (report.md / report.json), ``runner`` (``run_fidelity``) and
``cli`` (the command line). Importing this package does not import τ² (litellm takes seconds);
``runner`` does, so a run imports ``recipes.sim_fidelity.runner`` itself.
"""
