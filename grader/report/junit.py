"""JUnit XML as pytest writes it (xunit2), rebuilt from the grader's own records."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from grader.model import SubmissionResult

# Characters XML 1.0 cannot hold at all, not even escaped: shown as \xNN / \uNNNN instead.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


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
        module, _, name = _xml_text(test.nodeid).partition("::")
        case = ET.SubElement(
            suite, "testcase", name=name, classname=module.removesuffix(".py").replace("/", ".")
        )
        message = _xml_text(test.message)
        if test.status == "failed":
            ET.SubElement(
                case,
                "failure",
                message=message.splitlines()[0][:500] if message.strip() else "failed",
            ).text = message
        elif test.status == "not run":
            ET.SubElement(case, "skipped", message=message or "not run")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda match: ascii(match.group())[1:-1], text)
