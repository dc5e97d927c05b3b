"""The docs run as written: every ``slca`` command in README.md and docs/ parses, every Python
snippet compiles and imports what it names, self-contained snippets run, and the cheap commands run
for real (shrunk only by flags the docs document), with the files the docs themselves give."""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
STDLIB = set(sys.stdlib_module_names)


def blocks(language: str | None = None):
    """(page:line, language, text) of every fenced block."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if language is None or match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                yield f"{page.relative_to(ROOT)}:{line}", match.group(1), match.group(2)


def shell_commands(text: str):
    """The simple commands of a shell block, as word lists: continuations joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", text)
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line)  # a comment starts a word; '#' inside one is a URL's
        if not line.strip():
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            continue  # a multi-line quoted argument (curl -d '...'): not a slca command
        command: list[str] = []
        redirect = False
        for word in [*words, ";"]:
            if word in ("&&", "||", "|", ";"):
                if command:
                    yield command
                command = []
            elif redirect:
                redirect = False  # the file a redirection names
            elif re.fullmatch(r"\d?(<|>>?)(&\d)?", word):
                redirect = not word.endswith(("&1", "&2"))
            elif re.match(r"\d?(<|>)", word):
                continue  # a redirection with its file attached (>out.txt, 2>&1)
            elif command or "=" not in word:  # leading VAR=value assignments are the environment
                command.append(word)


def slca_commands():
    for where, language, text in blocks():
        if language in ("bash", "sh", ""):
            for words in shell_commands(text):
                if words[0] == "slca":
                    yield pytest.param(words[1:], id=f"{where} slca {' '.join(words[1:])[:60]}")


@pytest.mark.parametrize("argv", list(slca_commands()))
def test_every_documented_slca_command_parses(argv):
    from slca_grpo.cli import build_parser
    from slca_grpo.plugins import split_plugin_args

    plugins, rest = split_plugin_args(argv)
    # A plugin named by the docs and shipped in examples/ adds its commands; others are the user's.
    shipped = [ROOT / "examples" / "plugins" / Path(p).name for p in plugins]
    code = (
        "import sys; from slca_grpo.plugins import load_plugins; from slca_grpo.cli import build_parser; "
        f"load_plugins({[str(p) for p in shipped if p.is_file()]!r}); build_parser().parse_args(sys.argv[1:])"
    )
    if any(p.is_file() for p in shipped):
        result = subprocess.run([sys.executable, "-c", code, *rest], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.suppress(SystemExit):
        build_parser().parse_args(rest)
        return
    pytest.fail(f"slca {' '.join(argv)}: {errors.getvalue().strip().splitlines()[-1]}")


def free_names(tree: ast.Module) -> set[str]:
    """Names a snippet reads that it never binds (nor are builtins)."""
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store | ast.Del) else read).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
            if not isinstance(node, ast.ClassDef):
                arguments = node.args
                for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                    bound.add(arg.arg)
                bound.update(a.arg for a in (arguments.vararg, arguments.kwarg) if a)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound - set(dir(builtins))


# Whole snippets too slow to run in the suite, whose calls other tests cover (tests/test_models.py,
# tests/test_trl_integration.py).
IMPORTS_ONLY = ('load_model("smollm2")', "SLCATrainer(model, args=args")


def python_snippets():
    for where, _, text in blocks("python"):
        yield pytest.param(where, text, id=where)


@pytest.mark.parametrize(("where", "text"), list(python_snippets()))
def test_every_python_snippet_compiles_imports_what_it_names_and_runs_when_whole(where, text, tmp_path):
    tree = ast.parse(text, filename=where)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), (
                    f"{where}: {node.module} has no {alias.name}"
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
    missing = free_names(tree)
    unimported = sorted(missing & STDLIB)
    assert not unimported, f"{where}: uses {unimported} without importing it"
    if missing or any(marker in text for marker in IMPORTS_ONLY):
        return  # a fragment: its variables (a batch, an agent, ...) come from the reader's own code
    user_data(tmp_path / "data")
    result = subprocess.run(
        [sys.executable, "-c", text], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=_environment()
    )
    assert result.returncode == 0, f"{where} does not run as written:\n{result.stderr[-2000:]}"


def user_data(folder: Path) -> None:
    """The dataset files the snippets name as the reader's own (``data/toolace.json``, ...)."""
    import shutil

    from slca_grpo.data.synthetic import generate_tasks
    from slca_grpo.integrations.verl.rows import write_tasks_parquet

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "tests" / "fixtures" / "datasets" / "toolace.json", folder / "toolace.json")
    write_tasks_parquet(generate_tasks(0, 3, "train"), folder / "big.parquet")  # the release's row layout


def _environment() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
    }


def doc_block(page: str, language: str, marker: str) -> str:
    """The one block of ``language`` on ``page`` that holds ``marker``."""
    found = [text for where, _, text in blocks(language) if where.startswith(page + ":") and marker in text]
    assert len(found) == 1, f"{page}: expected one {language} block holding {marker!r}, found {len(found)}"
    return found[0]


def documented(page: str, command: str) -> list[str]:
    """``command`` as a word list, after checking the page shows it exactly."""
    words = shlex.split(command)
    shown = [
        commands
        for where, language, text in blocks()
        if where.startswith(page + ":") and language in ("bash", "sh", "")
        for commands in shell_commands(text)
    ]
    assert words in shown, f"{page} no longer shows {command}"
    return words


# Files the docs give, written where their commands expect them: (page, language, marker, name).
DOC_FILES = {
    "docs/extending.md": [
        ("python", "class EchoBackend", "echo_backend.py"),
        ("json", '"get_weather"', "tools.json"),
        ("python", '@register_estimator("tool_only_grpo"', "my_estimators.py"),
    ],
    "docs/simulator.md": [("json", '"search_hotels"', "tools.json")],
}
# Documented commands cheap enough to run here; the extra words are documented flags that shrink them.
CHEAP = [
    ("docs/extending.md", "slca --plugin my_estimators.py estimators", [], "tool_only_grpo"),
    (
        "docs/extending.md",
        """slca --plugin echo_backend.py simulate --backend echo --tools tools.json --call '{"name": "get_weather"}'""",
        [],
        '\\"tool\\": \\"get_weather\\"',
    ),
    (
        "docs/simulator.md",
        "slca simulate --tools tools.json --call "
        """'{"name": "search_hotels", "arguments": {"city": "Rome", "max_price": 120}}'""",
        [],
        '"error": null',
    ),
    (
        "docs/evaluation.md",
        "slca eval bfcl --policy oracle --categories simple java --limit 20 --out runs/bfcl/smoke",
        [],
        "",
    ),
    (
        "docs/verl.md",
        "slca verl data demo-quick --out data/verl-small --set data.n_train=64",
        [],
        "train.parquet: 48 rows",
    ),
    (
        "docs/training.md",
        "slca train demo-quick --set rl.estimator=grpo --set rollout.group_size=4 --set train.out_dir=runs/g4",
        "--set data.n_train=8 --set sft.steps=1 --set rl.steps=1 --set rl.prompts_per_step=1 "
        "--set rollout.max_response_tokens=48 --set train.eval_tasks=0".split(),
        "",
    ),
    ("docs/training.md", "slca train runs/g4/config.yaml --resume", [], ""),
]


@pytest.fixture(scope="module")
def doc_folders(tmp_path_factory):
    """One working folder per page, holding the files that page gives."""
    root = tmp_path_factory.mktemp("docs")
    for page, files in DOC_FILES.items():
        folder = root / Path(page).stem
        folder.mkdir()
        for language, marker, name in files:
            (folder / name).write_text(doc_block(page, language, marker), encoding="utf-8")
    return root


@pytest.mark.parametrize(("page", "command", "shrink", "expected"), CHEAP, ids=[c[1][:70] for c in CHEAP])
def test_the_cheap_documented_commands_run_as_written(doc_folders, page, command, shrink, expected):
    words = documented(page, command)
    folder = doc_folders / Path(page).stem
    folder.mkdir(exist_ok=True)
    code = "import sys; from slca_grpo.cli import main; sys.exit(main())"
    result = subprocess.run(
        [sys.executable, "-c", code, *words[1:], *shrink],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env=_environment(),
    )
    assert result.returncode == 0, f"{page}: {command} failed:\n{result.stderr[-2000:]}"
    assert expected in result.stdout + result.stderr, f"{page}: {command} printed {result.stdout[-500:]}"
