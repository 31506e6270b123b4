"""Print the project's requirements from pyproject.toml, one per line: its
build-system requirements, its dependencies and the named extras.

Used by the Dockerfile to install dependencies in their own layer, before the
source is copied, so that editing code does not reinstall torch and friends.

Usage: python3 requirements.py PYPROJECT [EXTRA ...]
"""

import sys
import tomllib


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1], "rb") as fh:
        pyproject = tomllib.load(fh)
    project = pyproject["project"]
    lines = list(pyproject.get("build-system", {}).get("requires", []))
    lines += project.get("dependencies", [])
    extras = project.get("optional-dependencies", {})
    for extra in argv[2:]:
        if extra not in extras:
            sys.stderr.write(f"requirements.py: no extra named {extra!r} in {argv[1]}\n")
            return 2
        lines.extend(extras[extra])
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
