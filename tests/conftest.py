"""The cast every test shares: alice owns things, bob is shared on them, charlie is a stranger."""

import shutil

import pytest

DEMO_STATEMENTS = [
    ("add_small", "theorem add_small : (2 : ℕ) + 3 = 5 := by"),
    ("mul_small", "theorem mul_small : (6 : ℤ) * 7 = 42 := by"),
    ("lt_small", "theorem lt_small : (3 : ℚ) / 4 < 1 := by"),
]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-password")


@pytest.fixture
def charlie(django_user_model):
    return django_user_model.objects.create_user("charlie", password="charlie-password")


def make_demo_promptset_version(owner):
    """Version 1 of a promptset of the three demo statements, made through the models directly."""
    from promptsets.models import Problem, Promptset, PromptsetVersion, VersionProblem, statement_hash

    promptset = Promptset.objects.create(owner=owner, name="arith")
    version = PromptsetVersion.objects.create(promptset=promptset, number=1, problem_count=len(DEMO_STATEMENTS))
    for position, (key, statement) in enumerate(DEMO_STATEMENTS):
        problem = Problem.objects.create(promptset=promptset, problem_key=key, name=key, formal_statement=statement,
                                         header="import Mathlib", statement_hash=statement_hash(statement))
        VersionProblem.objects.create(version=version, problem=problem, position=position)
    return version


@pytest.fixture
def promptset_version(alice):
    """Version 1 of a three-problem promptset of alice's."""
    return make_demo_promptset_version(alice)


@pytest.fixture
def make_run(alice, promptset_version):
    """A stored run of alice's, in any state, without dispatching it."""
    from runs.models import Run
    from trainer.config import RunConfig

    def make(state="queued", **fields):
        fields.setdefault("config", RunConfig.from_preset("cpu-demo").to_json_dict())
        fields.setdefault("preset", "cpu-demo")
        return Run.objects.create(owner=fields.pop("owner", alice), name=fields.pop("name", "a run"),
                                  promptset_version=promptset_version, state=state, **fields)

    return make


@pytest.fixture
def make_admitted_run(make_run):
    """A queued run of alice's that the scheduler has admitted: what dispatch takes (it never starts one
    still waiting in the queue)."""
    from django.utils import timezone

    return lambda **fields: make_run(admitted_at=timezone.now(), **fields)


@pytest.fixture
def alices_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def dispatched(monkeypatch):
    """The ids of the runs handed to Celery, in order, instead of reaching its broker (whether a run resumes
    follows from its attempt); Celery and Ray themselves are exercised in tests/integration."""
    calls = []

    def taken_by_the_broker(run_id: int) -> bool:
        calls.append(run_id)
        return True

    monkeypatch.setattr("runs.actions.enqueue_dispatch", taken_by_the_broker)
    return calls


@pytest.fixture
def terminal_stderr(monkeypatch):
    """Call it in the test's body (pytest's capture takes standard error back when the body starts): from
    then on standard error is a terminal (it says it is one); returns it, to read what commands draw."""
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    def become_terminal() -> Terminal:
        stderr = Terminal()
        monkeypatch.setattr("sys.stderr", stderr)
        return stderr

    return become_terminal


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.passed_its_call = report.passed
    return report


@pytest.fixture(autouse=True)
def tmp_path_removed_once_passed(request):
    """A passed test's tmp_path goes as soon as it ends, not when the session does: the suite's checkpoints
    (a SmolLM2 one is 1.5 GB) would otherwise pile up to several GB on a CI disk that may have little to spare.
    A failed test's stays, to read."""
    yield
    tmp_path = (request.node.funcargs or {}).get("tmp_path")
    if tmp_path is not None and getattr(request.node, "passed_its_call", False):
        shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture(scope="module")
def standin_url():
    """The Lean stand-in, in a thread of this process (never real Lean: trainer/verification/standin_server.py)."""
    from trainer.verification.standin_server import StandinServerThread, StandinSettings

    with StandinServerThread(StandinSettings()) as server:
        yield server.url
