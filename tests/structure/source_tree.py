"""The project's own Python files and what each imports, read from their syntax trees (nothing is
imported, so the tests of the structure need neither Django nor torch).

Every ``import`` counts, the ones inside functions too: a lazy import still makes a circle, it
only hides it until the function runs. ``platform/`` is a source root (``runs.models`` is
platform/runs/models.py); the others are packages at the repository's root.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = ("platform", "trainer", "deploy", "leanrl")


@dataclass(frozen=True)
class ImportLine:
    target: str  # the module imported (the longest of ours that the name reaches)
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "platform":
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    """Module name → file, migrations left out (Django writes them; they import only Django)."""
    files = {}
    for folder in SOURCE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" not in path.parts:
                files[module_name(path)] = path
    return files


def _ours(name: str, modules: dict[str, Path]) -> str | None:
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imported_names(path: Path, module: str) -> list[tuple[str, int]]:
    """Every dotted name a file imports (``from a.b import c`` gives ``a.b.c``), with its line."""
    is_package = path.name == "__init__.py"
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names += [(f"{source}.{alias.name}", node.lineno) for alias in node.names]
    return names


def import_graph() -> dict[str, list[ImportLine]]:
    """Module → the modules of ours it imports (each once, at its first line)."""
    modules = source_files()
    graph = {}
    for module, path in modules.items():
        seen: dict[str, int] = {}
        for name, line in imported_names(path, module):
            target = _ours(name, modules)
            if target and target != module and target not in seen:
                seen[target] = line
        graph[module] = [ImportLine(target, line) for target, line in seen.items()]
    return graph


def circles(graph: dict[str, list[ImportLine]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for edge in edges:
                target = edge.target
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def describe_circle(group: list[str], graph: dict[str, list[ImportLine]]) -> str:
    members = set(group)
    lines = [f"  {module} imports {edge.target} (line {edge.line})"
             for module in group for edge in graph[module] if edge.target in members]
    return "a circle of " + ", ".join(group) + ":\n" + "\n".join(lines)
