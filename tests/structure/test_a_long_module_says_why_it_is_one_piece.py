"""A module over 500 lines says, at its top, why it is one piece ("Why one piece: …" in its docstring):
a long file is either split along its seams or its length is a choice someone explained."""

import ast

from tests.structure.source_tree import ROOT, source_files

LONGEST_WITHOUT_A_REASON = 500
MARKER = "Why one piece:"


def test_every_module_over_500_lines_says_why_it_is_one_piece():
    unexplained = []
    for name, path in source_files().items():
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n") + 1
        if lines > LONGEST_WITHOUT_A_REASON and MARKER not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not unexplained, (f"modules over {LONGEST_WITHOUT_A_REASON} lines without '{MARKER} …' in their "
                             "docstring; split them along their seams or say why they are one piece:\n"
                             + "\n".join(unexplained))
