"""trainer/ is grouped by what it does (issue 36), and its folders import one way: each subpackage is one floor,
each module at trainer/'s top its own, and no floor imports one that imports it back, even through others.

Each subpackage's ``__init__`` says in its first lines what it owns and, on a line ``Imports from the trainer: …``,
which floors it may import; the check holds the code to that line. No folder holds more than about 15 modules,
so that a newcomer sees from the tree where a change belongs.
"""

from __future__ import annotations

import ast

from tests.structure.source_tree import ROOT, ImportLine, circles, import_graph

TRAINER = ROOT / "trainer"
MOST_MODULES_IN_A_FOLDER = 15


def floor(module: str) -> str:
    """``trainer.recipe.reward`` → ``recipe``; a module at trainer/'s top is its own floor (``config``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "trainer"


def floor_graph(graph: dict[str, list[ImportLine]]) -> dict[str, list[ImportLine]]:
    """Floor → the other floors it imports (each once)."""
    floors: dict[str, dict[str, ImportLine]] = {}
    for module, edges in graph.items():
        if module.split(".")[0] != "trainer":
            continue
        imported = floors.setdefault(floor(module), {})
        for edge in edges:
            if edge.target.split(".")[0] == "trainer" and floor(edge.target) != floor(module):
                imported.setdefault(floor(edge.target), ImportLine(floor(edge.target), edge.line))
    return {name: list(imported.values()) for name, imported in floors.items()}


def describe_floor_circle(group: list[str], graph: dict[str, list[ImportLine]]) -> str:
    members = set(group)
    lines = [f"  {module} imports {edge.target} (line {edge.line})"
             for module, edges in graph.items() if module.split(".")[0] == "trainer" and floor(module) in members
             for edge in edges if edge.target.split(".")[0] == "trainer" and floor(edge.target) in members
             and floor(edge.target) != floor(module)]
    return "a circle of " + ", ".join(group) + ":\n" + "\n".join(lines)


def declared_imports(package: str) -> set[str] | None:
    """The floors a subpackage's docstring says it may import; None for ``anything``."""
    docstring = ast.get_docstring(ast.parse((TRAINER / package / "__init__.py").read_text())) or ""
    paragraph = docstring.split("\n\n")[0]
    marker = "Imports from the trainer:"
    assert marker in paragraph, (f"trainer/{package}/__init__.py: its docstring's first lines say what it owns and, "
                                 f"after {marker!r}, which floors it may import")
    named = paragraph.split(marker, 1)[1].replace("\n", " ").split(";")[0].strip().rstrip(".")
    if named.startswith("anything"):
        return None
    if named.startswith("nothing"):
        return set()
    return {name.strip() for name in named.split(",")}


def subpackages() -> list[str]:
    return sorted(path.parent.name for path in TRAINER.glob("*/__init__.py"))


def test_no_folder_of_the_trainer_imports_one_that_imports_it_back():
    graph = import_graph()
    floors = floor_graph(graph)
    found = circles(floors)
    assert not found, ("trainer/'s folders import one way; move the shared part to the lower one:\n"
                       + "\n".join(describe_floor_circle(group, graph) for group in found))


def test_each_subpackage_imports_only_the_floors_its_docstring_names():
    graph = import_graph()
    known = set(floor_graph(graph))
    beyond = []
    for package in subpackages():
        allowed = declared_imports(package)
        if allowed is None:
            continue
        assert allowed <= known, f"trainer/{package}/__init__.py names floors that do not exist: {allowed - known}"
        beyond += [f"  {module} imports {edge.target} (line {edge.line})" for module, edges in graph.items()
                   if module.startswith(f"trainer.{package}.") for edge in edges
                   if edge.target.split(".")[0] == "trainer" and floor(edge.target) not in allowed | {package}]
    assert not beyond, ("a subpackage imports only the floors its __init__ docstring names; name the new one there "
                        "(if it makes no circle) or move the code:\n" + "\n".join(beyond))


def test_no_folder_of_the_trainer_holds_more_than_about_fifteen_modules():
    crowded = {str(folder.relative_to(ROOT)): count for folder in [TRAINER, *(TRAINER / p for p in subpackages())]
               if (count := len([f for f in folder.glob("*.py") if f.name != "__init__.py"])) > MOST_MODULES_IN_A_FOLDER}
    assert not crowded, f"split these folders along their seams: {crowded}"


def test_the_floor_check_finds_a_circle_between_folders_and_names_its_imports():
    """The check itself can fail: two folders importing each other, through different modules, make a circle."""
    graph = {"trainer.a.x": [ImportLine("trainer.b.y", 3)], "trainer.b.y": [], "trainer.b.z": [ImportLine("trainer.a.w", 7)],
             "trainer.a.w": [], "trainer.c.v": [ImportLine("trainer.a.x", 1)]}
    floors = floor_graph(graph)
    assert circles(floors) == [["a", "b"]]
    assert describe_floor_circle(["a", "b"], graph) == (
        "a circle of a, b:\n  trainer.a.x imports trainer.b.y (line 3)\n  trainer.b.z imports trainer.a.w (line 7)")
