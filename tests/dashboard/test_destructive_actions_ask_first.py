"""Every form that destroys or stops something asks first (frontend/src/confirm.js reads data-confirm);
the browser test of Cancel (tests/browser/test_run_pages_tell_the_truth.py) checks the dialog itself."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESTRUCTIVE = ("runs:cancel", "accounts:revoke")


def test_every_destructive_form_carries_a_confirmation_question():
    unconfirmed = []
    for path in [*ROOT.glob("frontend/templates/**/*.html"), *ROOT.glob("platform/*/templates/**/*.html")]:
        for form in re.findall(r"<form\b[^>]*>", path.read_text()):
            if any(name in form for name in DESTRUCTIVE) and "data-confirm=" not in form:
                unconfirmed.append(f"{path.relative_to(ROOT)}: {form}")
    assert unconfirmed == [], "destructive forms without data-confirm:\n" + "\n".join(unconfirmed)


def test_the_confirmation_script_is_on_every_page():
    assert "confirm.js" in (ROOT / "frontend/templates/base.html").read_text()
