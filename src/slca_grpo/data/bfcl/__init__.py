"""BFCL's data, read from the installed ``bfcl-eval`` package.

``package`` (importing bfcl-eval without side effects), ``entries`` (categories and entries),
``convert`` (its docs and calls as our tools and calls), ``calls`` (safe call strings) and ``gold``
(the gold answers as our calls). The harness that scores agents on them is ``slca_grpo.eval.bfcl``.
"""
