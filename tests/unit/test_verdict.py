import pytest

from runner.scoring.verdict import parse_verdict


@pytest.mark.parametrize("stdout,code,kind,reason", [
    ("PASS\n", 0, "pass", ""),
    ("checking...\nPASS\n\n  \n", 0, "pass", ""),
    ("FAIL file missing\n", 0, "fail", "file missing"),
    ("FAIL: wrong value 7\n", 0, "fail", "wrong value 7"),
    ("FAIL\n", 0, "fail", "no reason given"),
    ("FAIL the decoy changed\n", 1, "fail", "the decoy changed"),  # a verdict wins over the exit code
    ("PASS\nFAIL late failure\n", 0, "fail", "late failure"),
])
def test_verdicts(stdout, code, kind, reason):
    verdict = parse_verdict(stdout, code)
    assert (verdict.kind, verdict.reason) == (kind, reason)


@pytest.mark.parametrize("stdout,code", [
    ("", 0),
    ("\n\n", 0),
    ("", 2),
    ("PASS\nTraceback (most recent call last):\n  ValueError: x\n", 1),
    ("PASS\nsome trailing noise\n", 0),
    ("PASSED\n", 0),
    ("pass\n", 0),
    ("FAILURE to launch\n", 0),
    ("PASS\n", 3),
])
def test_everything_else_is_a_verifier_error(stdout, code):
    assert parse_verdict(stdout, code).kind == "error"
