"""Check pip's dry-run report of the GPU extra (``make gpu-resolve``) against the pins in pyproject.toml.

Prints the version the ``openrlhf`` extra's pins (and flash-attn) resolve to: what pip would install or,
for what the venv already has and pip kept (torch, ray, openrlhf), the installed version. Exits non-zero
when a pin resolves to another version.

    python .ci/gpu_resolve_check.py .venv/gpu-resolve.json
"""

import json
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def main(report_path: str) -> int:
    extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["openrlhf"]
    pins = {canonicalize_name(req.name): req.specifier for req in map(Requirement, extra)}
    report = json.load(open(report_path))
    to_install = {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]
    }
    wrong = []
    for name in [*pins, "flash-attn"]:
        got, where = to_install.get(name), ""
        if got is None:
            try:
                got, where = version(name), " (already in the venv)"
            except PackageNotFoundError:
                where = "not in the resolution"
        print(f"  {name:<13} {got or ''}{where}")
        if name in pins and (got is None or not pins[name].contains(got, prereleases=True)):
            wrong.append(f"{name} {got} (pinned {pins[name]})")
    if wrong:
        print("the openrlhf extra resolves off its pins: " + ", ".join(wrong), file=sys.stderr)
        return 1
    print("gpu-resolve: the openrlhf extra resolves to its pins")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
