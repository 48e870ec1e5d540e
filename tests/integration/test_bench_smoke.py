"""Smoke of the bench code (`make bench`): tiny scale, real fio, DuckDB and moto.

No timing is asserted: these tests check that each figure is measured and
reported, and that the transition count of a state machine executed in moto
is what its path implies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench import report
from bench.common import stat
from bench.orchestration import run_execution
from bench.run import main

DOC = f"# bench\n\n{report.BEGIN}\nold\n{report.END}\n\nprose kept\n"


LAMBDA = {"Type": "AWS::Lambda::Function", "Properties": {"Handler": "handler.handler"}}


def _arn(logical: str) -> str:
    """A placeholder the template's Fn::Join replaces with the function's ARN."""
    return f"@@{logical}@@"


def _definition_string(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition as CDK writes it: Fn::Join of text and Fn::GetAtt ARNs."""
    parts: list[Any] = []
    for i, piece in enumerate(re.split(r"@@(\w+)@@", json.dumps(definition))):
        parts.append({"Fn::GetAtt": [piece, "Arn"]} if i % 2 else piece)
    return {"Fn::Join": ["", parts]}


def _task(fn: str, nxt: str | None, **extra: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": _arn(fn), "Payload.$": "$"},
        "ResultSelector": {"result.$": "$.Payload"},
        **extra,
    }
    if nxt:
        state["Next"] = nxt
    else:
        state["End"] = True
    return state


def mini_template() -> dict[str, Any]:
    """A state machine shaped like the stack's: Plan, PrepareCell, Fleet (distributed) of RunSlot."""
    definition = {
        "StartAt": "Plan",
        "States": {
            "Plan": _task("PlanFnFunction", "PrepareCell", ResultPath="$.plan"),
            "PrepareCell": _task("PrepareCellFnFunction", "Fleet", ResultPath="$.prepared"),
            "Fleet": {
                "Type": "Map",
                "ItemsPath": "$.prepared.result.slots",
                "ItemSelector": {"slot_index.$": "$$.Map.Item.Value"},
                "MaxConcurrency": 1000,
                "ResultPath": None,
                "Next": "Done",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                    "StartAt": "RunSlot",
                    "States": {
                        "RunSlot": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                            "Parameters": {
                                "FunctionName": _arn("LaunchFnFunction"),
                                "Payload": {
                                    "slot_index.$": "$.slot_index",
                                    "task_token.$": "$$.Task.Token",
                                },
                            },
                            "End": True,
                        }
                    },
                },
            },
            "Done": {"Type": "Succeed"},
        },
    }
    return {
        "Resources": {
            "PlanFnFunction": LAMBDA,
            "PrepareCellFnFunction": LAMBDA,
            "LaunchFnFunction": LAMBDA,
            "Machine": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {"DefinitionString": _definition_string(definition)},
            },
        }
    }


def test_stat_gives_min_median_max_and_count() -> None:
    assert stat([3.0, 1.0, 2.0, 10.0], "s") == {
        "min": 1.0,
        "median": 2.5,
        "max": 10.0,
        "n": 4,
        "unit": "s",
    }


def test_moto_execution_counts_one_transition_per_state_entered_and_per_slot() -> None:
    # given: Plan, PrepareCell, Fleet, Done in the parent and RunSlot per slot
    template = mini_template()
    # when
    got = run_execution(template, slots=3, timeout_s=60)
    # then
    assert got["parent_states"] == {"Plan": 1, "PrepareCell": 1, "Fleet": 1, "Done": 1}
    assert got["child_executions"] == 3
    assert got["child_states"] == {"RunSlot": 3}
    assert got["fleet_step_s"] >= 0


def test_report_marks_missed_targets_and_keeps_the_prose(tmp_path: Path) -> None:
    # given: one missed target and one figure that could not be measured
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    results = {
        "machine": {},
        "ingest": {
            "status": "measured",
            "ratio_to_json_loads": stat([9.0, 10.0, 11.0], "x"),
            "met": {"ratio_to_json_loads": False},
        },
        "fleet_step": {"status": "not measured", "reason": "no local cloud"},
    }
    # when
    report.update_doc(doc, results)
    # then
    text = doc.read_text()
    assert "| ingest | ratio to json.loads of the same bytes | 9.00 | 10.00 | 11.00 |" in text
    assert "**missed**" in text
    assert "not measured: no local cloud" in text
    assert "prose kept" in text and "\nold\n" not in text


def test_report_refuses_a_doc_without_markers(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# no markers\n")
    with pytest.raises(ValueError, match="markers not found"):
        report.update_doc(doc, {})


def test_smoke_run_measures_local_figures_and_writes_json_and_docs(tmp_path: Path) -> None:
    # given
    out, doc = tmp_path / "latest.json", tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    # when: real fio (1 s jobs), iofleet local, ingest and DuckDB queries at tiny scale
    rc = main(
        [
            "--smoke",
            "--only",
            "fidelity,overhead,ingest,queries",
            "--out",
            str(out),
            "--docs",
            str(doc),
            "--work",
            str(tmp_path / "work"),
        ]
    )
    # then
    assert rc == 0
    results = json.loads(out.read_text())
    for figure in ("fidelity", "overhead", "ingest", "queries"):
        assert results[figure]["status"] == "measured", results[figure]
    assert results["fidelity"]["iops_ratio_median"] > 0
    assert results["fidelity"]["p99_ratio_median"] > 0
    assert results["overhead"]["agent_peak_rss_mib"]["max"] > 0
    assert results["ingest"]["results"] == 12
    assert results["queries"]["duckdb"]["rows_out"]["fleet_latency"]["all"] > 0
    assert results["machine"]["versions"]["fio"].startswith("fio-")
    assert "| fidelity | IOPS ratio iofleet / bare fio |" in doc.read_text()
