"""JUnit XML as pytest writes it (xunit2), rebuilt from the grader's own records."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from grader.model import SubmissionResult


def render(result: SubmissionResult) -> str:
    failures = sum(t.status == "failed" for t in result.tests)
    skipped = sum(t.status == "not run" for t in result.tests)
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="pytest",
        tests=str(len(result.tests)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{result.seconds:.3f}",
    )
    for test in result.tests:
        module, _, name = test.nodeid.partition("::")
        case = ET.SubElement(
            suite, "testcase", name=name, classname=module.removesuffix(".py").replace("/", ".")
        )
        if test.status == "failed":
            ET.SubElement(
                case,
                "failure",
                message=test.message.splitlines()[0][:500] if test.message else "failed",
            ).text = test.message
        elif test.status == "not run":
            ET.SubElement(case, "skipped", message=test.message or "not run")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode")
