"""Every import of one of our modules names a module that exists, and every name it takes from one is
defined there, in the scripts and tests too: a module
that moved (promptsets/actions.py became versions.py and uploads.py) leaves no import behind that would
fail only when its function runs. Function-level imports are read as well; nothing is imported."""

import ast

from tests.structure.source_tree import ROOT, source_files

OUR_PACKAGES = {"accounts", "config", "promptsets", "proofs", "runs", "trainer", "deploy", "leanrl", "tests",
                "benchmarks"}
READ_FOLDERS = ("platform", "trainer", "deploy", "leanrl", "tests", "benchmarks", "scripts")


def known_modules() -> set[str]:
    modules = set(source_files())
    for folder in ("tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_every_import_of_ours_names_an_existing_module():
    modules = known_modules()
    missing = []
    for folder in READ_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                    # ``from runs import actions`` may name a module or a name in runs/__init__.py
                    candidates = [f"{node.module}.{alias.name}" for alias in node.names]
                elif isinstance(node, ast.Import):
                    names, candidates = [alias.name for alias in node.names], []
                else:
                    continue
                for name in names:
                    if name.split(".")[0] in OUR_PACKAGES and name not in modules:
                        missing.append(f"  {path.relative_to(ROOT)}:{node.lineno} imports {name}, which does not exist")
                if isinstance(node, ast.ImportFrom) and node.module in modules:
                    package_folder = _folder_of(node.module)
                    module_file = _file_of(node.module) if package_folder is None else None
                    if module_file is not None:
                        # ``from trainer.rollout.base import build_engine`` after build_engine moved away.
                        missing.extend(
                            f"  {path.relative_to(ROOT)}:{node.lineno} imports {alias.name} from {node.module}, "
                            "which does not define it"
                            for alias in node.names if alias.name != "*" and not _defines(module_file, alias.name))
                    for candidate, alias in zip(candidates, node.names):
                        if package_folder is not None and (package_folder / f"{alias.name}.py").exists():
                            continue  # a module of the package
                        if package_folder is not None and candidate not in modules and not _defines(
                                package_folder / "__init__.py", alias.name):
                            missing.append(f"  {path.relative_to(ROOT)}:{node.lineno} imports {alias.name} from "
                                           f"{node.module}, which has no such module or name")
    assert not missing, "imports of modules that moved or never were:\n" + "\n".join(missing)


def _folder_of(module: str):
    """The folder of a package of ours; None for a plain module."""
    for base in (ROOT / "platform", ROOT):
        folder = base.joinpath(*module.split("."))
        if (folder / "__init__.py").exists():
            return folder
    return None


def _file_of(module: str):
    """The file of a plain module of ours; None for a package."""
    for base in (ROOT / "platform", ROOT):
        path = base.joinpath(*module.split(".")).with_suffix(".py")
        if path.exists():
            return path
    return None


def _defines(init_file, name: str) -> bool:
    tree = ast.parse(init_file.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name).split(".")[0] == name
                                                                   for a in node.names):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(n, ast.Name) and n.id == name
                                                for target in node.targets for n in ast.walk(target)):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return True
    return False
