import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.production_checks import assert_production_ready, production_problems

REPO_DIR = Path(__file__).resolve().parents[2]

STRONG_KEY = "q8v#2m!x0-p7s^r4t9w1z6y3b5n8c2e0g4j7k1l9h3f6d8a2u5i0o4"
DEV_DEFAULT = "django-insecure-development-only-never-use-in-production"


def fit(**changes):
    values = {"secret_key": STRONG_KEY, "debug": False, "allowed_hosts": ["lean.example.org"],
              "insecure_default_secret_key": DEV_DEFAULT}
    values.update(changes)
    return values


def test_it_accepts_a_strong_key_debug_off_and_named_hosts():
    assert production_problems(**fit()) == []
    assert_production_ready(**fit())


def test_it_refuses_the_development_default_key_and_names_the_variable():
    [problem] = production_problems(**fit(secret_key=DEV_DEFAULT))
    assert "development default" in problem and "DJANGO_SECRET_KEY" in problem


def test_it_refuses_an_empty_key():
    [problem] = production_problems(**fit(secret_key=""))
    assert "empty" in problem and "DJANGO_SECRET_KEY" in problem


def test_it_refuses_any_key_django_marks_as_insecure():
    [problem] = production_problems(**fit(secret_key="django-insecure-" + STRONG_KEY))
    assert "django-insecure-" in problem


def test_it_refuses_a_short_key_and_says_how_short_without_echoing_it():
    [problem] = production_problems(**fit(secret_key="hunter2-hunter2"))
    assert "15 characters" in problem and "50" in problem
    assert "hunter2" not in problem


def test_it_refuses_debug_on_whether_a_boolean_or_an_environment_string():
    for debug in (True, "1", "true"):
        [problem] = production_problems(**fit(debug=debug))
        assert "DEBUG is on" in problem and "DJANGO_DEBUG=0" in problem


def test_it_refuses_empty_allowed_hosts():
    for hosts in ([], [""], None):
        [problem] = production_problems(**fit(allowed_hosts=hosts))
        assert "ALLOWED_HOSTS is empty" in problem and "DJANGO_ALLOWED_HOSTS" in problem


def test_it_refuses_a_wildcard_host():
    [problem] = production_problems(**fit(allowed_hosts=["*"]))
    assert "'*'" in problem


def test_it_lists_every_problem_in_one_error():
    with pytest.raises(ImproperlyConfigured) as refusal:
        assert_production_ready(**fit(secret_key=DEV_DEFAULT, debug=True, allowed_hosts=[]))
    message = str(refusal.value)
    assert "3 problems" in message
    for variable in ("DJANGO_SECRET_KEY", "DJANGO_DEBUG", "DJANGO_ALLOWED_HOSTS"):
        assert variable in message


def test_the_platform_settings_refuse_to_load_in_production_with_their_defaults():
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
    environment.update(DJANGO_ENV="production", DJANGO_SETTINGS_MODULE="config.settings",
                       PYTHONPATH=str(REPO_DIR / "platform"))
    loaded = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO_DIR,
                            env=environment, capture_output=True, text=True, timeout=60)
    assert loaded.returncode != 0
    assert "ImproperlyConfigured" in loaded.stderr
    assert "DJANGO_SECRET_KEY" in loaded.stderr and "DJANGO_ALLOWED_HOSTS" in loaded.stderr
