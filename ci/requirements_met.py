"""Exit 0 when every requirement pyproject.toml declares for pylog and the given extras is installed at a
version it allows (extras naming ``pylog[...]`` followed), 1 naming the first that is not: ci/setup.sh then
installs. A fixed list of imports missed a dependency added later (google-re2) on a machine set up before it."""
from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path


def requirements(project: dict, extras: list[str]) -> list[str]:
    found, todo, seen = list(project.get("dependencies", [])), list(extras), set()
    optional = project.get("optional-dependencies", {})
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in optional.get(extra, []):
            nested = re.fullmatch(r"\s*pylog\[([^\]]+)\]\s*", line)
            if nested:
                todo.extend(e.strip() for e in nested.group(1).split(","))
            else:
                found.append(line)
    return found


def unmet(line: str) -> str | None:
    """Why ``line`` (a PEP 508 requirement) is not met here, or None."""
    try:
        from packaging.requirements import Requirement
    except ImportError:   # no packaging: presence only
        name = re.split(r"[\s<>=!~\[;]", line.strip(), maxsplit=1)[0]
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            return f"{name} is not installed"
        return None
    requirement = Requirement(line)
    if requirement.marker is not None and not requirement.marker.evaluate():
        return None
    try:
        version = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return f"{requirement.name} is not installed"
    if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
        return f"{requirement.name} {version} does not satisfy {requirement.specifier}"
    return None


def main(argv: list[str]) -> int:
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    for line in requirements(project, argv):
        why = unmet(line)
        if why:
            print(f"ci/setup.sh: {why} ({line.strip()})", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
