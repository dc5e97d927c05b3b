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


def _anchors(page: Path) -> set[str]:
    return {github_anchor(h) for h in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)}


def test_doc_links_and_anchors_resolve():
    # The reference pages, the records in docs/experiments/, the READMEs (the package's and the recipes').
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", *sorted((ROOT / "recipes").rglob("*.md"))]
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]+\.md)(?:#([^)]*))?\)", page.read_text(encoding="utf-8")):
            path = page.parent / target
            if not path.is_file():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
            elif anchor and anchor not in _anchors(path):
                broken.append(f"{page.relative_to(ROOT)} -> {target}#{anchor}")
    assert not broken, broken


def test_docs_the_code_names_exist_with_their_anchors():
    # "docs/training.md#limits-and-safety" in an error message or a comment must still lead somewhere.
    broken = []
    for path in repository_texts():
        if path.suffix == ".md" or path == Path(__file__).resolve():
            continue
        for target, anchor in re.findall(r"\b(docs/[\w/.-]+\.md)(?:#([\w-]+))?", path.read_text(encoding="utf-8")):
            page = ROOT / target
            if not page.is_file() or (anchor and anchor not in _anchors(page)):
                broken.append(f"{path.relative_to(ROOT)} -> {target}{'#' + anchor if anchor else ''}")
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
