"""The configuration page's tables are written from trainer/config.py when the site is built: every field
of every section, each preset's value and the field's own description, so the page cannot drift."""

import html
import json
import re
import subprocess
import sys
from pathlib import Path

from trainer.config import PRESETS, RunConfig


def test_every_field_appears_with_its_description_and_each_presets_value(built_site):
    rows = (built_site / "reference" / "configuration.html").read_text().split("<tr>")
    resolved = {name: RunConfig.from_preset(name).to_json_dict() for name in PRESETS}
    for section, info in RunConfig.model_fields.items():
        if not hasattr(info.annotation, "model_fields"):
            continue
        for field, field_info in info.annotation.model_fields.items():
            row = next((line for line in rows if f"<code>{section}.{field}</code>" in line), None)
            assert row is not None, f"{section}.{field} is missing from the configuration page"
            if field_info.description:
                words = " ".join(html.unescape(re.sub(r"<[^>]+>", "", row)).replace("`", "").split())  # as a person reads it
                assert " ".join(field_info.description.replace("`", "").split()) in words, (section, field)
            for name in PRESETS:
                value = resolved[name][section][field]
                shown = "null" if value is None else json.dumps(value, ensure_ascii=False)
                assert f"<code>{shown}</code>" in html.unescape(row), (section, field, name, shown)


def test_the_page_is_built_without_importing_django():
    hook = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "configuration.py"
    script = ("import runpy, sys; tables = runpy.run_path(sys.argv[1])['configuration_tables']();"
              "print(len(tables), sorted(name for name in sys.modules if name.split('.')[0] == 'django'))")
    result = subprocess.run([sys.executable, "-c", script, str(hook)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    count, modules = result.stdout.split(" ", 1)
    assert int(count) > 1000 and modules.strip() == "[]"
