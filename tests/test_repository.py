"""The repository stands alone: code, docs and tests cite docs/, never files outside the tree."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"SPEC §|\bSPEC\.md\b|\bDESIGN\.md\b|\bECOSYSTEM\.md\b|\.\./shared|seed-abstract")


def repository_texts():
    for folder in ("src", "docs", "tests", "benchmarks", "examples", "configs", "recipes"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in {".py", ".md", ".yaml", ".toml", ".txt", ".sh"}:
                yield path
    yield from (ROOT / name for name in ("README.md", "pyproject.toml") if (ROOT / name).is_file())


def test_nothing_points_outside_the_repository():
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in repository_texts()
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not offenders, f"references to files outside the repository: {offenders}"


def github_anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_doc_links_and_anchors_resolve():
    broken = []
    for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        for target, anchor in re.findall(r"\]\(([^)#\s]+\.md)(?:#([^)]*))?\)", page.read_text(encoding="utf-8")):
            path = page.parent / target
            if not path.is_file():
                broken.append(f"{page.name} -> {target}")
            elif anchor:
                headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), flags=re.M)
                if anchor not in {github_anchor(h) for h in headings}:
                    broken.append(f"{page.name} -> {target}#{anchor}")
    assert not broken, broken


def test_the_tree_passes_the_linter_and_the_formatter():
    import subprocess
    import sys

    folders = ["src", "tests", "benchmarks", "examples", "recipes"]
    for command in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *folders], cwd=ROOT, capture_output=True, text=True
        )
        assert result.returncode == 0, f"ruff {' '.join(command)}:\n{result.stdout}{result.stderr}"
