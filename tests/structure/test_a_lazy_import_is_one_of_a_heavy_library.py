"""Imports at the top, where a reader sees what a module needs, except the heavy libraries (pyproject.toml's
``banned-module-level-imports``: torch, vLLM, transformers, Ray, …) and our modules that load one as they are
imported: those load inside the function that needs them, so the platform, the client and the CLIs start
without them.

ruff checks it in platform/ and leanrl/ (PLC0415 with TID253); in trainer/ and deploy/, where most modules
lazily import torch-loading modules of ours, ruff cannot tell those apart from light ones, so this test does.
"""

import ast
import tomllib

from tests.structure.source_tree import ROOT, _ours, source_files

CHECKED_FOLDERS = ("trainer", "deploy")


def heavy_libraries() -> set[str]:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(settings["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-module-level-imports"])


def top_level_imports(tree: ast.Module) -> list[str]:
    """The names a module imports as it loads (``if TYPE_CHECKING:`` blocks never run)."""
    names = []
    for node in tree.body:
        for statement in (node.body if isinstance(node, ast.Try) else [node]):
            if isinstance(statement, ast.Import):
                names += [alias.name for alias in statement.names]
            elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
                names += [f"{statement.module}.{alias.name}" for alias in statement.names]
    return names


def test_a_function_imports_only_heavy_libraries_and_modules_of_ours_that_load_one():
    modules = source_files()
    trees = {module: ast.parse(path.read_text(encoding="utf-8")) for module, path in modules.items()}
    heavy = heavy_libraries()
    loads_heavy: dict[str, bool] = {}

    def is_heavy(module: str, on_the_way: frozenset = frozenset()) -> bool:
        if module not in loads_heavy:
            loads_heavy[module] = any(
                name.split(".")[0] in heavy
                or ((target := _ours(name, modules)) not in (None, module) and target not in on_the_way
                    and is_heavy(target, on_the_way | {module}))
                for name in top_level_imports(trees[module]))
        return loads_heavy[module]

    light_and_lazy = []
    for module, tree in trees.items():
        if not module.startswith(CHECKED_FOLDERS):
            continue
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for name in names:
                    target = _ours(name, modules)
                    if target is not None and target != module and not is_heavy(target):
                        light_and_lazy.append(f"{modules[module].relative_to(ROOT)}:{node.lineno} imports {target} "
                                              "inside a function, yet it loads no heavy library: import it at the top")
    assert not light_and_lazy, "\n".join(light_and_lazy)
