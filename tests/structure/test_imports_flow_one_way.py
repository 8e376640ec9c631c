"""Imports flow one way (DESIGN.md, "Boundaries that keep the system honest"): no file imports a file
that imports it back, even lazily; the platform's apps form a chain, promptsets ← runs ← proofs;
the server never imports its client (``leanrl/``), and the client imports nothing of the server's or the
trainer's: it installs alone (leanrl/pyproject.toml) and speaks HTTP only."""

import re
import sys
import tomllib

from tests.structure.source_tree import ROOT, circles, describe_circle, import_graph, imported_names, source_files

# Each app may import the apps below it, never one above. ``config`` is the project (settings, URLs,
# the API's root) and may import every app; ``accounts`` sits below them all.
APP_FLOORS = {"accounts": 0, "promptsets": 1, "runs": 2, "proofs": 3}


def test_no_file_imports_a_file_that_imports_it_back():
    graph = import_graph()
    found = circles(graph)
    assert not found, "imports must flow one way; move the shared part below both:\n" + "\n".join(
        describe_circle(group, graph) for group in found)


def test_the_platform_apps_import_only_the_apps_below_them():
    graph = import_graph()
    upward = []
    for module, edges in graph.items():
        app = module.split(".")[0]
        for edge in edges:
            target_app = edge.target.split(".")[0]
            if app in APP_FLOORS and target_app in APP_FLOORS and APP_FLOORS[target_app] > APP_FLOORS[app]:
                upward.append(f"  {module} imports {edge.target} (line {edge.line})")
    assert not upward, ("the apps are a chain, promptsets ← runs ← proofs: a lower app tells a higher one by "
                        "a signal, never an import:\n" + "\n".join(upward))


def test_the_platform_never_imports_its_client():
    graph = import_graph()
    platform_modules = [m for m in graph if m.split(".")[0] not in ("trainer", "deploy", "leanrl")]
    offending = [f"  {module} imports {edge.target} (line {edge.line})" for module in platform_modules
                 for edge in graph[module] if edge.target.split(".")[0] == "leanrl"]
    assert not offending, ("the server never imports its client (leanrl/); share through trainer/:\n"
                           + "\n".join(offending))


def test_the_trainer_never_imports_the_platform_or_its_client():
    graph = import_graph()
    offending = [f"  {module} imports {edge.target} (line {edge.line})" for module in graph
                 if module.split(".")[0] == "trainer" for edge in graph[module]
                 if edge.target.split(".")[0] not in ("trainer",)]
    assert not offending, "trainer/ is the lowest floor: it imports nothing of ours outside it:\n" + "\n".join(offending)


def test_the_client_imports_only_itself_the_standard_library_and_the_dependencies_it_declares():
    """Not trainer/, not the platform's apps, not Django: ``pip install ./leanrl`` brings none of them, so an
    import of one works in this checkout and fails on a laptop."""
    declared = tomllib.loads((ROOT / "leanrl/pyproject.toml").read_text())["project"]["dependencies"]
    allowed = {"leanrl", *sys.stdlib_module_names,
               *(re.match(r"[A-Za-z0-9_.-]+", requirement).group().lower().replace("-", "_") for requirement in declared)}
    offending = [f"  {module} imports {name} (line {line})" for module, path in source_files().items()
                 if module.split(".")[0] == "leanrl" for name, line in imported_names(path, module)
                 if name.split(".")[0] not in allowed]
    assert not offending, ("leanrl/ imports only itself, the standard library and leanrl/pyproject.toml's "
                           f"dependencies ({', '.join(declared)}); it reaches the platform through its HTTP API:\n"
                           + "\n".join(offending))


def test_the_circle_finder_finds_a_lazy_circle():
    """The check itself can fail: a function-level import back makes a circle it reports."""
    from tests.structure.source_tree import ImportLine

    graph = {"a": [ImportLine("b", 1)], "b": [ImportLine("c", 3)], "c": [ImportLine("a", 9)], "d": [ImportLine("a", 2)]}
    assert circles(graph) == [["a", "b", "c"]]
