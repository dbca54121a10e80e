"""results.jsonl read strictly: a line whose fields are not of the types the runner writes is
skipped with a warning, as a torn line is, so no reader (the report, --resume, the live view)
meets a trial that is text or an outcome no one knows."""

import dataclasses
import json
import logging
import math

import pytest

from runner.records.results import FIELD_TYPES, EpisodeRecord, ResultLog, parse_record


def full_record() -> EpisodeRecord:
    return EpisodeRecord("a", 1, "fail", "why", 2.5, 0, 1, "t0", "t1", {"agent": 1.0, "verify": 2},
                         checkpoints={"saved": False}, violations=[{"rule": "r", "step": 1, "detail": "d"}],
                         changed=["/x"], check_errors=["e"], host="h0", intervened=True)


def test_every_field_of_a_record_has_its_types_listed():
    """A field added to EpisodeRecord without a type here would make every line with it unreadable."""
    assert set(FIELD_TYPES) == {f.name for f in dataclasses.fields(EpisodeRecord)}
    assert parse_record(json.loads(json.dumps(dataclasses.asdict(full_record())))) == full_record()


WRONG = {
    "trial as text": {"trial": "1"},
    "trial as a bool": {"trial": True},
    "task id as a list": {"task_id": ["a"]},
    "an unknown outcome": {"outcome": "won"},
    "a duration as text": {"duration_s": "slow"},
    "a phase as text": {"phases": {"agent": "1"}},
    "a checkpoint as a number": {"checkpoints": {"saved": 1}},
    "a violation as text": {"violations": ["rm"]},
    "a changed path as a number": {"changed": [1]},
    "an unknown field": {"verdict": "pass"},
}


@pytest.mark.parametrize("wrong", WRONG)
def test_a_line_of_the_wrong_types_is_skipped_with_a_warning(tmp_path, caplog, wrong):
    log = ResultLog(tmp_path)
    log.append(full_record())
    with log.path.open("a") as f:
        f.write(json.dumps({**dataclasses.asdict(full_record()), "trial": 2, **WRONG[wrong]}) + "\n")
        f.write('{"task_id": "b", "tri')  # torn by a crash: skipped without a word
    with caplog.at_level(logging.WARNING):
        assert [(r.task_id, r.trial) for r in log.latest()] == [("a", 1)]
    assert [m for m in caplog.messages if "line 2 is skipped" in m], caplog.messages
    assert not [m for m in caplog.messages if "line 3" in m]


def test_a_nan_duration_is_of_its_type_and_kept_for_readers_to_judge(tmp_path):
    log = ResultLog(tmp_path)
    log.append(dataclasses.replace(full_record(), duration_s=math.nan, phases={"agent": math.inf, "verify": 2.0}))
    (record,) = log.latest()
    assert math.isnan(record.duration_s)
    from runner.records.results import by_host

    assert by_host([record])["h0"]["phase_medians"] == {"verify": 2.0}  # the infinite phase has no median
