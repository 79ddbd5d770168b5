"""Imports follow the stages, and the stdlib-only code imports nothing but the standard library and itself.

The stages (STAGES) are the order a run's data flows in: a package imports its own stage, an
earlier one or the shared packages (SHARED), never a later one, except through a named entry in
LATER_STAGE_EXCEPTIONS (each tested to be still in use). So the first stages never load the last
ones' code: the TF process does not load the results store, the plan does not open it. What
composes stages is the front end beside the dispatcher (FRONT_END): it may import every stage,
and no stage or shared package imports it.

Ansible ships this code to the nodes (through the links in module_utils/) and runs it with
whatever Python they have: one import of TensorFlow, numpy or even dtfbench's own TF code
would break every node run. The rule lives here, not in docstrings: STDLIB_ONLY names the
packages (or modules) it covers, and every import in their files - at the top, inside a
function, relative, or a constant `importlib.import_module("...")` - must resolve to the
standard library or to one of them.

Two checks of that rule: the source (every import statement, also those that only run later),
and a real import of every module in a fresh interpreter (what its import actually loads).
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
    "dtfbench.contract",
    "dtfbench.adapters.calls",
)

# The stages, in the order a run's data flows (docs/design.md), and the package of each
# (inventory is Ansible's: plugins/inventory/, no package here). A module imports its own
# stage, an earlier one, or SHARED.
STAGES = ("inventory", "plan", "launch", "node", "workload", "results", "report", "forecast")
STAGE_PACKAGES = {
    "dtfbench.plan": "plan",
    "dtfbench.launch": "launch",
    "dtfbench.node": "node",
    "dtfbench.workload": "workload",
    "dtfbench.results": "results",
    "dtfbench.report": "report",
    "dtfbench.forecast": "forecast",
}
# What every stage may import; they import no stage (only each other).
SHARED = ("dtfbench.contract", "dtfbench.linux", "dtfbench.compat", "dtfbench.adapters")
# The front end beside the dispatcher (__main__.py): the commands that compose stages (the report
# with forecast's section). It may import every stage and the shared packages; none of them imports it.
FRONT_END = ("dtfbench.commands",)
# The imports of a later stage that are allowed, by module: {module: {later package: why}}.
# The front end composes stages; nothing else does.
LATER_STAGE_EXCEPTIONS: dict[str, dict[str, str]] = {}

# The one exception, by module: third-party packages a module may import only inside a
# function (never at import time), because only those functions need them and they run only
# where the package is there. s3sync's client_config/make_client build a botocore S3 client;
# its callers are `python -m dtfbench s3sync` in the nodes' virtualenv (boto3 is pinned there)
# and the s3_dataset_sync module (AnsibleAWSModule, which requires botocore). Its download()
# also checks S3's CRC32C, CRC64NVME and XXHASH checksums with awscrt, where awscrt is there
# (an object of theirs falls back to its MD5 without it), and CRC32s with isal's CRC32 where
# isal is there (zlib's without it). Everything else of s3sync - the
# sync engine the module drives - is standard library.
LAZY_ONLY = {
    "dtfbench.node.s3sync": ("botocore", "awscrt", "isal"),
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
        # A module alone: its packages' __init__ files load with it, so they are checked too.
        parents = [".".join(name.split(".")[:i]) for i in range(2, name.count(".") + 1)]
        return [(parent, source_of(parent) / "__init__.py") for parent in parents] + [(name, path)]
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


def loaded_with(target: str) -> bool:
    """Whether a module an import loaded is allowed: one of allowed(), or the package of one
    (module_files checks its __init__)."""
    return allowed(target) or any(name.startswith(target + ".") for name in STDLIB_ONLY)


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


def from_import(module: str, file: Path, node: ast.ImportFrom) -> tuple[str, str]:
    """The dotted name a `from ... import` imports from (relative ones resolved), and how it reads."""
    base = node.module or ""
    if node.level:
        package = package_of(module, file).split(".")
        up = package[: len(package) - (node.level - 1)] if node.level > 1 else package
        base = ".".join(up + ([node.module] if node.module else []))
    return base, "from %s%s import %s" % ("." * node.level, node.module or "", ", ".join(a.name for a in node.names))


def import_of(module: str, file: Path, node: ast.AST):
    """(line, dotted name, how it reads) of the import that `node` makes, if any."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield node.lineno, alias.name, "import %s" % alias.name
    elif isinstance(node, ast.ImportFrom):
        base, text = from_import(module, file, node)
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
    assert source_of(name) is not None, "%s names no package or module under src/: update STDLIB_ONLY" % name


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
        loaded = [m for m in json.loads(done.stdout) if not loaded_with(m) and m.split(".")[0] != "dtfbench"]
        outside = [m for m in json.loads(done.stdout) if m.startswith("dtfbench.") and not loaded_with(m)]
        if loaded or outside:
            bad[module] = "loads %s" % ", ".join(loaded + outside)
    assert not bad, "importing the stdlib-only code needs more than the standard library:\n  %s" % "\n  ".join(
        "%s: %s" % item for item in sorted(bad.items())
    )


def _under(target: str, packages) -> str | None:
    return next((p for p in packages if target == p or target.startswith(p + ".")), None)


def dtfbench_imports(name: str):
    """(module, file, line, imported dtfbench module, how it reads) for every dtfbench import
    in the package `name`, at the top or inside a function."""
    for module, file in module_files(name):
        tree = ast.parse(file.read_text(), filename=str(file))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [(alias.name, "import %s" % alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base, text = from_import(module, file, node)
                # `from dtfbench import forecast` imports dtfbench.forecast.
                targets = [(base + "." + alias.name if base == "dtfbench" else base, text) for alias in node.names]
            else:
                continue
            for target, text in targets:
                if target.startswith("dtfbench."):
                    yield module, file, node.lineno, target, text


def backwards_imports(package: str, exceptions=LATER_STAGE_EXCEPTIONS) -> list[str]:
    """The imports in `package` of a later stage (or, in a shared package, of any stage), and of
    the front end by anything but itself."""
    own_stage = STAGE_PACKAGES.get(package)
    front_end = package in FRONT_END
    found = []
    for module, file, line, target, text in dtfbench_imports(package):
        if _under(target, SHARED):
            continue
        if _under(target, FRONT_END):
            if not front_end:
                found.append(
                    "%s:%d: %s (the front end: no stage imports it)" % (file.relative_to(SRC.parent), line, text)
                )
            continue
        target_package = _under(target, STAGE_PACKAGES)
        if target_package is None:
            found.append(
                "%s:%d: %s (not in a stage nor shared: add it to STAGE_PACKAGES or SHARED)"
                % (file.relative_to(SRC.parent), line, text)
            )
            continue
        if front_end:  # it composes the stages: any of them
            continue
        if own_stage is not None and STAGES.index(STAGE_PACKAGES[target_package]) <= STAGES.index(own_stage):
            continue
        if target_package in exceptions.get(module, {}):
            continue
        found.append("%s:%d: %s" % (file.relative_to(SRC.parent), line, text))
    return found


def test_every_package_is_a_stage_or_shared():
    packages = {"dtfbench." + p.name for p in (SRC / "dtfbench").iterdir() if (p / "__init__.py").is_file()}
    known = set(STAGE_PACKAGES) | set(SHARED) | set(FRONT_END)
    assert packages == known, (
        "name each subpackage's stage in STAGE_PACKAGES (or make it SHARED, or FRONT_END where it "
        "composes stages): %s" % ", ".join(sorted(packages ^ known))
    )


@pytest.mark.parametrize("package", sorted(STAGE_PACKAGES) + list(SHARED) + list(FRONT_END))
def test_no_package_imports_a_later_stage(package):
    bad = backwards_imports(package)
    where = STAGE_PACKAGES.get(package, "shared")
    assert not bad, (
        "%s (%s) imports a later stage; the stages run %s, and a shared package (%s) imports no "
        "stage. Move what both need into an earlier stage or dtfbench.contract, hand it over from "
        "the caller, or name the exception in LATER_STAGE_EXCEPTIONS:\n  %s"
        % (package, where, " -> ".join(STAGES), ", ".join(SHARED), "\n  ".join(bad))
    )


def test_every_exception_is_used():
    # An exception that no import needs any more would let a new one in unseen (none today).
    for module, later in LATER_STAGE_EXCEPTIONS.items():
        package = _under(module, STAGE_PACKAGES)
        used = {_under(t, STAGE_PACKAGES) for m, _f, _l, t, _x in dtfbench_imports(package) if m == module}
        assert set(later) <= used, "%s no longer imports %s: remove it from LATER_STAGE_EXCEPTIONS" % (
            module,
            ", ".join(sorted(set(later) - used)),
        )
        # ... and without it the check would fail (the exception is what lets the import through).
        assert backwards_imports(package, exceptions={}), module


def test_a_backwards_import_fails_the_check(tmp_path, monkeypatch):
    """The check itself: an import of the results store added to plan/ is found."""
    fake = tmp_path / "dtfbench"
    for name in ("plan", "results"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text("")
    (fake / "plan" / "sweep.py").write_text("def resume():\n    from ..results import store\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    [found] = backwards_imports("dtfbench.plan")
    assert found.endswith("dtfbench/plan/sweep.py:2: from ..results import store"), found


def test_the_front_end_imports_every_stage_and_no_stage_imports_it(tmp_path, monkeypatch):
    """The check itself: the front end may compose the last stage with the first; a stage (even the
    last) that imports the front end is found."""
    fake = tmp_path / "dtfbench"
    for name in ("plan", "forecast", "commands"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text("")
    (fake / "commands" / "report.py").write_text("from ..forecast import predict\nfrom ..plan import sweep\n")
    (fake / "forecast" / "predict.py").write_text("def table():\n    from ..commands import report\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    assert backwards_imports("dtfbench.commands") == []
    [found] = backwards_imports("dtfbench.forecast")
    assert found.endswith(
        "dtfbench/forecast/predict.py:2: from ..commands import report (the front end: no stage imports it)"
    )


def loaded_by(module):
    """The modules a fresh interpreter loads to import `module` (dtfbench from the tree)."""
    done = subprocess.run(
        [sys.executable, "-c", LOADER, module],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def test_the_tf_process_does_not_load_the_results_store():
    # A worker's failure names a lost peer in dtfbench.contract's words; the store (sqlite3, the
    # environment view, nvidia-smi's parser) stays out of the TF process.
    loaded = loaded_by("dtfbench.workload.reporting")
    assert "dtfbench.workload.reporting" in loaded
    assert not loaded & {"dtfbench.results", "dtfbench.results.store", "dtfbench.results.record", "sqlite3"}, sorted(
        loaded
    )


def test_the_sweep_table_does_not_load_the_fitting_code():
    # ansible-playbook's own process imports the table's action plugin (sweep_table -> the report
    # and its forecast section) before it can hand the task out: scipy.optimize (~0.12 s) only
    # when a sweep of several GPU counts fits a model, the Student t (scipy.special) always.
    loaded = loaded_by("dtfbench.commands.report")
    assert "dtfbench.forecast.scaling_model" in loaded
    assert "scipy.special" in loaded
    assert "scipy.optimize" not in loaded
