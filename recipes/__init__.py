"""Recipes: how things this repository ships were made, outside the installed package.

Each recipe imports ``slca_grpo``; the package never imports a recipe. Run them from the
repository's root (``python -m recipes.reader.pretrain``).
"""
