"""The stdlib-only code imports nothing but the standard library and itself.

Ansible ships this code to the nodes (through the links in module_utils/) and runs it with
whatever Python they have: one import of TensorFlow, numpy or even dtfbench's own TF code
would break every node run. The rule lives here, not in docstrings: STDLIB_ONLY names the
packages (or modules) it covers, and every import in their files - at the top, inside a
function, relative, or a constant `importlib.import_module("...")` - must resolve to the
standard library or to one of them.

Two checks: the source (every import statement, also those that only run later), and a real
import of every module in a fresh interpreter (what its import actually loads).
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# The stdlib-only code, by dotted name: a package covers every module under it. Update this
# one list when the layout changes (docs/design.md says what each subpackage may import).
STDLIB_ONLY = (
    "dtfbench.plan",
    "dtfbench.launch",
    "dtfbench.node",
    "dtfbench.linux",
    "dtfbench.results",
)

# The one exception, by module: third-party packages a module may import only inside a
# function (never at import time), because only those functions need them and they run only
# where the package is there. s3sync's client_config/make_client build a botocore S3 client;
# its callers are `python -m dtfbench.s3sync` in the nodes' virtualenv (boto3 is pinned there)
# and the s3_dataset_sync module (AnsibleAWSModule, which requires botocore). Everything else
# of s3sync - the sync engine the module drives - is standard library.
LAZY_ONLY = {
    "dtfbench.node.s3sync": ("botocore",),
}

STDLIB = frozenset(sys.stdlib_module_names)


def source_of(name: str) -> Path | None:
    """The package folder or module file of a dotted name under src/, or None."""
    path = SRC.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def module_files(name: str) -> list[tuple[str, Path]]:
    """(dotted module name, file) of every module under the package or module `name`."""
    path = source_of(name)
    if path is None:
        return []
    if path.is_file():
        return [(name, path)]
    found = []
    for file in sorted(path.rglob("*.py")):
        parts = list(file.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append((".".join(parts), file))
    return found


def allowed(target: str) -> bool:
    """Whether importing the dotted name `target` stays within the standard library or STDLIB_ONLY."""
    if target.split(".")[0] in STDLIB:
        return True
    return any(target == name or target.startswith(name + ".") for name in STDLIB_ONLY)


def package_of(module: str, file: Path) -> str:
    return module if file.name == "__init__.py" else module.rpartition(".")[0]


def in_functions(tree: ast.AST) -> set[int]:
    """ids of the nodes inside a function body (run when called, not at import)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(child) for child in ast.walk(node) if child is not node)
    return inside


def imported_names(module: str, file: Path):
    """(line, dotted name, how it reads, inside a function) for every import the file can make."""
    tree = ast.parse(file.read_text(), filename=str(file))
    lazy = in_functions(tree)
    for node in ast.walk(tree):
        for line, target, text in import_of(module, file, node):
            yield line, target, text, id(node) in lazy


def import_of(module: str, file: Path, node: ast.AST):
    """(line, dotted name, how it reads) of the import that `node` makes, if any."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield node.lineno, alias.name, "import %s" % alias.name
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = package_of(module, file).split(".")
            up = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            base = ".".join(up + ([node.module] if node.module else []))
        text = "from %s%s import %s" % ("." * node.level, node.module or "", ", ".join(a.name for a in node.names))
        if allowed(base):
            return
        # `from pkg import module` imports pkg.module: allowed when that one is.
        for alias in node.names:
            yield node.lineno, "%s.%s" % (base, alias.name) if base else alias.name, text
    elif (
        isinstance(node, ast.Call)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called in ("import_module", "__import__"):
            yield node.lineno, node.args[0].value, "%s(%r)" % (called, node.args[0].value)


def violations(name: str) -> list[str]:
    found = []
    for module, file in module_files(name):
        for line, target, text, lazy in imported_names(module, file):
            if allowed(target) or (lazy and target.split(".")[0] in LAZY_ONLY.get(module, ())):
                continue
            found.append("%s:%d: %s" % (file.relative_to(SRC.parent), line, text))
    return found


def need(name: str):
    path = source_of(name)
    if path is None or path.is_file():
        # Before the layout of issue #17 (a flat package: dtfbench/plan.py is a module).
        pytest.skip("the package %s does not exist (yet): the layout of issue #17 brings it" % name)


@pytest.mark.parametrize("name", STDLIB_ONLY)
def test_sources_import_only_the_standard_library_and_each_other(name):
    need(name)
    bad = violations(name)
    assert not bad, (
        "%s must import only the standard library and %s (Ansible runs it on the nodes with "
        "their own Python); move these imports out of it:\n  %s" % (name, ", ".join(STDLIB_ONLY), "\n  ".join(bad))
    )


LOADER = r"""
import importlib, json, sys
before = set(sys.modules)
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.parametrize("name", STDLIB_ONLY)
def test_importing_loads_only_the_standard_library_and_each_other(name):
    need(name)
    bad = {}
    for module, _file in module_files(name):
        # -S: no site-packages beyond what PYTHONPATH gives, so a third-party import fails
        # here even when it is installed (and is reported as the error it would be on a node).
        done = subprocess.run(
            [sys.executable, "-S", "-c", LOADER, module],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        )
        if done.returncode != 0:
            bad[module] = done.stderr.strip().splitlines()[-1]
            continue
        loaded = [m for m in json.loads(done.stdout) if not allowed(m) and m.split(".")[0] != "dtfbench"]
        outside = [m for m in json.loads(done.stdout) if m.startswith("dtfbench.") and not allowed(m)]
        if loaded or outside:
            bad[module] = "loads %s" % ", ".join(loaded + outside)
    assert not bad, "importing the stdlib-only code needs more than the standard library:\n  %s" % "\n  ".join(
        "%s: %s" % item for item in sorted(bad.items())
    )
