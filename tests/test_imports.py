"""The project's imports, read from the source (ast): installed names only, and no import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# repository folder -> its import name (pyproject.toml's package-dir)
PACKAGES = {"cdgt_keras": "cdgt_keras", "pipeline": "cdgt.pipeline", "components": "cdgt.components",
            "serving": "cdgt.serving", "kubeflow": "cdgt.kubeflow", "bench": "cdgt.bench"}
# names that would resolve only with the repository on sys.path (and shadow PyPI / Kubeflow SDK packages)
UNINSTALLED = {folder for folder, name in PACKAGES.items() if name != folder}
STUB_SDK = "kubeflow.training"  # test_packaging.py's stand-in for a Kubeflow SDK installed beside cdgt


def _modules() -> dict[str, Path]:
    modules = {}
    for folder, name in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            modules[".".join((name, *parts))] = path
    return modules


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names) of every absolute import, at module level or in a function; `if TYPE_CHECKING:`
    blocks are left out (never run)."""
    found = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, tuple(alias.name for alias in node.names)))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, module) of the imports in the string literals of `path` that are Python code (`python -c CODE`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value:
            try:
                tree = ast.parse(node.value)
            except SyntaxError:
                continue
            found += [(node.lineno, alias.name) for n in ast.walk(tree) if isinstance(n, ast.Import)
                      for alias in n.names]
            found += [(node.lineno, n.module) for n in ast.walk(tree)
                      if isinstance(n, ast.ImportFrom) and n.module and n.level == 0]
    return found


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for _, module, names in _imports(path):
            targets = [f"{module}.{n}" if f"{module}.{n}" in modules else module for n in names] or [module]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                cycles.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return cycles


def test_code_and_tests_import_the_installed_names_only():
    files = [*_modules().values(), *(REPO / "tests").rglob("*.py")]
    imports = [(path, line, module) for path in files
               for line, module in [*((line, module) for line, module, _ in _imports(path)), *_code_strings(path)]]
    bad = [f"{path.relative_to(REPO)}:{line}: {module}" for path, line, module in imports
           if module.split(".")[0] in UNINSTALLED and module != STUB_SDK]
    assert not bad, "import cdgt.<folder>, not the bare folder:\n" + "\n".join(bad)


def test_no_import_cycle_among_the_projects_modules():
    """Imports inside functions count too (a lazy import hides a cycle, it does not remove it)."""
    assert _cycles(_graph(_modules())) == []


def _code_lists() -> dict[str, tuple[str, ...]]:
    """TRANSFORM_CODE and TRAINER_CODE of pipeline/pipeline.py, read from the source (importing it loads TFX)."""
    tree = ast.parse((REPO / "pipeline" / "pipeline.py").read_text())
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in ("TRANSFORM_CODE", "TRAINER_CODE")}


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    return seen


def test_the_code_fingerprints_cover_every_module_the_steps_run():
    """A change to any module the Transform or the Trainer runs must change the step's fingerprint (a rerun
    retrains), so each list in pipeline/pipeline.py holds every project module its module file imports by name,
    directly or through others (parent packages' __init__ modules are not followed)."""
    modules, lists = _modules(), _code_lists()
    graph = _graph(modules)
    for step, start in (("TRANSFORM_CODE", "cdgt.pipeline.transform_module"),
                        ("TRAINER_CODE", "cdgt.pipeline.trainer_module")):
        covered = [REPO / rel for rel in lists[step]]
        missing = sorted(str(modules[name].relative_to(REPO)) for name in _reached(graph, start)
                         if not any(path == modules[name] or path in modules[name].parents for path in covered))
        assert not missing, f"{step} misses {missing}"
