"""The stand-in answers the failures of kimina-lean-server's REPL pool the way the real server does
(issue 44: its ``routers/check.py`` and ``repl.py`` at fb2393d and e3bb327, the code of the pinned 2.0.0
image), so the client's tests against the stand-in meet them: a crash fails the whole request with 500,
no free REPL gives 429 while the other proofs run on, a timeout is the proof's own answer and kills its
REPL, ``env`` ids grow per REPL, ``/health`` asks no key, a numeric snippet id is a 422."""

import subprocess
import sys
import time

import httpx
import pytest

from trainer.verification.standin_server import ReplFault, ReplFaults, StandinServerThread, StandinSettings

PROOF = "import Mathlib\n\ntheorem two_plus_two : (2 : ℕ) + 2 = 4 := by\n  norm_num\n"


def proof(note: str = "", fault: str | None = None) -> str:
    marker = f"\n  -- lean-standin fault: {fault}" if fault else ""
    return PROOF + (f"  -- {note}\n" if note else "") + marker


def check(server, *codes, timeout=2, ids=None):
    snippets = [{"id": ids[i] if ids else f"s{i}", "code": code} for i, code in enumerate(codes)]
    return httpx.post(f"{server.url}/api/check", json={"snippets": snippets, "timeout": timeout}, timeout=30)


@pytest.mark.parametrize("fault, detail", [("crash", "JSON decode error"), ("long-line", "Failed to read from REPL stdout")])
def test_a_repl_that_crashes_fails_the_whole_request_with_500_losing_its_neighbours(fresh_standin, fault, detail):
    answer = check(fresh_standin, proof("first"), proof(fault=fault), proof("third"))
    assert answer.status_code == 500
    assert answer.json() == {"detail": detail}


def test_no_free_repl_gives_429_while_the_requests_other_proofs_run_on(fresh_standin):
    fresh_standin.app.settings.latency_s = 1.0
    started = time.monotonic()
    answer = check(fresh_standin, proof("slow neighbour"), proof(fault="no-repl"))
    assert answer.status_code == 429 and answer.json() == {"detail": "No available REPLs"}
    assert time.monotonic() - started < 1.0  # answered before its neighbour finished...
    assert fresh_standin.app.snippets_checked == 0
    time.sleep(1.5)
    assert fresh_standin.app.snippets_checked == 1  # ...which ran on to its end, its result lost


def test_a_timeout_is_the_proofs_own_answer_and_kills_its_repl_so_the_next_proof_pays_the_import_again(fresh_standin):
    fresh_standin.app.settings.max_concurrency = 1  # one REPL: every proof meets the same one, or its successor
    first = check(fresh_standin, proof("first")).json()["results"][0]
    timed_out = check(fresh_standin, proof(fault="timeout"), timeout=1).json()["results"][0]
    after = check(fresh_standin, proof("after")).json()["results"][0]
    assert first["response"]["env"] == 1
    assert timed_out == {"id": "s0", "time": 1.0, "error": "Lean REPL command timed out in 1.0 seconds",
                         "diagnostics": {"repl_uuid": timed_out["diagnostics"]["repl_uuid"]}}
    assert len(timed_out["diagnostics"]["repl_uuid"]) == 32  # the killed REPL's uuid, in hex
    assert after["response"]["env"] == 1  # a new REPL...
    assert fresh_standin.app.repls_started == 2  # ...that loaded the imports again


def test_an_import_header_that_times_out_says_so(fresh_standin):
    [result] = check(fresh_standin, proof(fault="header-timeout"), timeout=1).json()["results"]
    assert result["error"] == "Lean REPL header command timed out in 1.0 seconds"
    assert result["time"] == 1.0 and "repl_uuid" in result["diagnostics"]


def test_a_new_repl_pays_the_import_latency_once(fresh_standin):
    fresh_standin.app.settings.max_concurrency, fresh_standin.app.settings.import_latency_s = 1, 1.0
    started = time.monotonic()
    check(fresh_standin, proof("loads the imports"))
    cold = time.monotonic() - started
    started = time.monotonic()
    check(fresh_standin, proof("reuses the repl"))
    assert cold >= 1.0 > time.monotonic() - started


def test_env_ids_grow_with_each_proof_a_repl_runs(fresh_standin):
    fresh_standin.app.settings.max_concurrency = 1
    envs = [check(fresh_standin, proof(f"proof {n}")).json()["results"][0]["response"]["env"] for n in range(3)]
    assert envs == [1, 2, 3]


def test_health_asks_no_key_while_checks_still_do():
    with StandinServerThread(StandinSettings(api_key="the-key")) as server:
        assert httpx.get(f"{server.url}/health").status_code == 200
        assert check(server, proof()).status_code == 401


def test_a_numeric_snippet_id_is_refused_with_422_naming_the_field(fresh_standin):
    answer = check(fresh_standin, proof(), ids=[7])
    assert answer.status_code == 422
    [problem] = answer.json()["detail"]
    assert problem["loc"] == ["body", "snippets", 0, "id"] and problem["msg"] == "Input should be a valid string"


def test_a_share_of_proofs_meets_each_fault_and_the_draws_repeat_with_their_seed():
    faults, again = (ReplFaults({"crash": 0.1, "timeout": 0.2}, seed=5) for _ in range(2))
    draws = [faults.draw(PROOF) for _ in range(20_000)]
    assert draws == [again.draw(PROOF) for _ in range(20_000)]
    assert draws.count(ReplFault.CRASH) / len(draws) == pytest.approx(0.1, abs=0.01)
    assert draws.count(ReplFault.TIMEOUT) / len(draws) == pytest.approx(0.2, abs=0.01)


@pytest.mark.parametrize("argument, says", [
    ("crash=1.5", "between 0 and 1, got 1.5"),
    ("melt=0.1", "'melt' is not a fault the stand-in knows; give one of crash, long-line"),
    ("crash", "expected KIND=SHARE, got 'crash'; e.g. crash=0.01"),
])
def test_the_command_refuses_a_fault_it_cannot_inject_saying_what_to_give(argument, says):
    finished = subprocess.run([sys.executable, "-m", "trainer", "lean-standin", "--fault", argument, "--port", "1"],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert says in finished.stderr
