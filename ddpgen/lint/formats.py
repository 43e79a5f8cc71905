"""`ddpgen lint --format`: the findings as the tools that run linters read them.

github: GitHub Actions workflow commands, one `::warning ...::` line per
finding (annotations on the pull request's diff); the escaping is that of
@actions/core. sarif: SARIF 2.1.0, which GitHub code scanning uploads.
rules_markdown: the rules' sections of docs/lint.md (tools/lint_docs.py).
"""

import json
from dataclasses import asdict
from pathlib import Path

from ddpgen import __version__
from ddpgen.lint.rule import Rule
from ddpgen.lint.rules import RULES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# A file that does not parse: listed with the rules, so every result names one.
PARSE_ERROR = Rule(
    "DDP000",
    "cannot parse: the file is not valid Python",
    None,
    docs="DDP000 the file does not parse\n\n"
    "No rule can read it; the other files are still linted.",
)


def as_json(findings):
    return json.dumps([asdict(finding) for finding in findings], indent=2)


def escape_data(text):
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text):
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def as_github(findings):
    lines = []
    for finding in findings:
        properties = {
            "file": Path(finding.path).as_posix(),
            "line": finding.line,
            "col": finding.col,
            "title": f"ddpgen lint {finding.code}",
        }
        joined = ",".join(
            f"{k}={escape_property(str(v))}" for k, v in properties.items()
        )
        message = escape_data(f"{finding.code} {finding.message}")
        lines.append(f"::warning {joined}::{message}")
    return "\n".join(lines)


def artifact_location(path):
    """A relative path stays relative (code scanning resolves it against the
    checkout); an absolute one becomes a file: URI."""
    path = Path(path)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    return {"uri": path.as_posix(), "uriBaseId": "%SRCROOT%"}


def sarif_rule(rule):
    return {
        "id": rule.code,
        "shortDescription": {"text": rule.message.split(":")[0]},
        "fullDescription": {"text": rule.message},
        "help": {"text": rule.docs, "markdown": rule.docs},
        "defaultConfiguration": {"level": "warning", "enabled": rule.default},
    }


def sarif_result(finding, rule_index):
    region = {"startLine": finding.line, "startColumn": finding.col}
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "level": "error" if finding.code == PARSE_ERROR.code else "warning",
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": artifact_location(finding.path),
                    "region": region,
                }
            }
        ],
    }


def as_sarif(findings):
    rules = [PARSE_ERROR, *RULES]
    rule_index = {rule.code: index for index, rule in enumerate(rules)}
    driver = {
        "name": "ddpgen lint",
        "version": __version__,
        "rules": [sarif_rule(rule) for rule in rules],
    }
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "results": [sarif_result(f, rule_index) for f in findings],
            }
        ],
    }
    return json.dumps(log, indent=2)


FORMATS = {"json": as_json, "github": as_github, "sarif": as_sarif}


def rules_markdown(rules=RULES):
    """One `## CODE title` section per rule, from the rule modules' docs."""
    return "\n".join(f"## {rule.docs.rstrip()}\n" for rule in rules)
