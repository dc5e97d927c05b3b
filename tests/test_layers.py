"""The import contract: imports point down the pipeline, never round in a cycle, and sit at module top.

Each module of the package belongs to a layer, named by its first component under `slca_grpo`. A module may
import from its own layer or a lower one. The order is the README's (the paragraph after its library layout),
mirrored in LAYERS and checked against it. Imports under `if TYPE_CHECKING:` count too: an annotation that names a
higher layer's type is a dependency on it all the same.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"
PACKAGE = "slca_grpo"

# Low to high; a layer lists the first components (subpackages or single modules) under slca_grpo it holds.
LAYERS: list[tuple[str, ...]] = [
    (
        "datatypes",
        "config",
        "aio",
        "http_client",
        "keys",
        "endpoints",
        "provenance",
        "registry",
        "plugins",
        "presets",
        "plotting",
        "value_match",
    ),
    ("chat",),
    ("data",),
    ("models",),
    ("engine",),
    ("simulator",),
    ("rollout",),
    ("rewards",),
    ("algos",),
    ("eval",),
    ("trainer",),
    ("report", "study", "demo"),
    ("integrations",),
    ("cli",),
]
LAYER_OF = {component: rank for rank, components in enumerate(LAYERS) for component in components}


class Edge:
    """One import of a package module by another: where it is written and whether it runs inside a function."""

    def __init__(self, source: str, target: str, path: Path, line: int, in_function: bool):
        self.source, self.target, self.path, self.line, self.in_function = source, target, path, line, in_function

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} {self.source} -> {self.target}"


def module_files() -> dict[str, Path]:
    files = {}
    for path in sorted((SOURCE / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SOURCE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def imports_in(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """Every import of a package module written in `path`, relative imports resolved."""
    is_package = path.name == "__init__.py"
    edges: list[Edge] = []
    seen: set[tuple[str, int]] = set()

    def add(target: str, node: ast.stmt, in_function: bool) -> None:
        # An imported name that is no module (a function, a class) is an import of the module that holds it.
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in modules and target != module and (target, node.lineno) not in seen:
            seen.add((target, node.lineno))
            edges.append(Edge(module, target, path, node.lineno, in_function))

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    add(alias.name, node, in_function)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != PACKAGE and not base.startswith(PACKAGE + "."):
                return
            for alias in node.names:
                # `from pkg import name` imports the submodule pkg.name when there is one, else pkg itself.
                add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base, node, in_function)
            return
        nested = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, nested)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False)
    return edges


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return 0  # the package's own __init__ holds only its version
    return LAYER_OF[parts[1]]


def all_edges() -> list[Edge]:
    modules = module_files()
    return [edge for module, path in modules.items() for edge in imports_in(module, path, modules)]


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = lowlink[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    lowlink[work[-1][0]] = min(lowlink[work[-1][0]], lowlink[node])
                if lowlink[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif child not in index:
                index[child] = lowlink[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                lowlink[node] = min(lowlink[node], index[child])
    return sorted(components)


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return all_edges()


def test_every_module_has_a_layer():
    unknown = sorted(module for module in module_files() if "." in module and module.split(".")[1] not in LAYER_OF)
    assert not unknown, f"modules in no layer (add them to LAYERS and the README): {unknown}"


def test_imports_point_down(edges):
    upward = [str(edge) for edge in edges if layer(edge.target) > layer(edge.source)]
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_no_import_cycles(edges):
    found = cycles(edges)
    inside = [
        str(edge) for component in found for edge in edges if edge.source in component and edge.target in component
    ]
    assert not found, f"import cycles {found}; their edges:\n" + "\n".join(inside)


def test_imports_sit_at_module_top(edges):
    # Only cli/ imports inside functions: each command pulls in its own stack when it runs, so `slca --help` is quick.
    lazy = [str(edge) for edge in edges if edge.in_function and layer(edge.source) != LAYER_OF["cli"]]
    assert not lazy, "package imports inside functions (move them to module top):\n" + "\n".join(lazy)


def test_the_package_never_imports_a_recipe():
    # recipes/ (how the shipped reader was made) imports the package; an installed package has no recipes/.
    found = []
    for path in module_files().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for name in names if name.split(".")[0] == "recipes"]
    assert not found, f"the package imports recipes: {found}"


def test_readme_states_the_same_layers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = next(block for block in readme.split("\n\n") if "tests/test_layers.py" in block)
    start = paragraph.index("foundations")
    sentence = paragraph[start : paragraph.index(";", paragraph.index("`cli/`", start))]
    stated = [tuple(name.strip("/") for name in re.findall(r"`([\w/]+)`", group)) for group in sentence.split("→")]
    assert stated == LAYERS, f"the README's layer order {stated} differs from the test's {LAYERS}"


def test_the_engine_is_entered_by_its_door(edges):
    # Its modules are internals: the rest of the package imports `slca_grpo.engine` itself.
    inside = [
        str(edge)
        for edge in edges
        if edge.target.startswith(f"{PACKAGE}.engine.") and not edge.source.startswith(f"{PACKAGE}.engine")
    ]
    assert not inside, "imports of the engine's modules from outside it (use slca_grpo.engine):\n" + "\n".join(inside)


def test_readme_layout_names_every_package():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = next(block for block in readme.split("\n\n") if block.startswith("Library layout"))
    named = set(re.findall(r"`(\w+)/", paragraph))
    packages = {path.parent.name for path in (SOURCE / PACKAGE).glob("*/__init__.py")}
    assert packages <= named, f"packages the README's layout does not name: {sorted(packages - named)}"
