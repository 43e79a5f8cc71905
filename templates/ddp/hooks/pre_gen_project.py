"""Reject answers the template cannot render, before any file is written.

The rules live in cookiecutter.json (`_constraints`) so that ddpgen and plain
cookiecutter enforce the same ones.
"""

import json
import keyword
import re
import sys

ANSWERS = json.loads("""{{ cookiecutter | jsonify }}""")


def constraint_violations(answers):
    for rule in answers.get("_constraints", []):
        if all(answers.get(key) == value for key, value in rule["if"].items()):
            for key, allowed in rule["require"].items():
                if answers.get(key) not in allowed:
                    condition = ", ".join(f"{k}={v}" for k, v in rule["if"].items())
                    yield (
                        f"unsupported combination {condition} with "
                        f"{key}={answers.get(key)}: {rule['because']}"
                    )


def package_name_problem(name):
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        return f"package name {name!r} must be lowercase letters, digits and '_'"
    if keyword.iskeyword(name):
        return f"package name {name!r} is a Python keyword"
    return None


def main():
    problems = list(constraint_violations(ANSWERS))
    name_problem = package_name_problem(ANSWERS["package_name"])
    if name_problem:
        problems.append(name_problem)
    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
