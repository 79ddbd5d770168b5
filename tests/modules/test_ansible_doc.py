"""Every module in library/ documents itself: ansible-doc renders it and its JSON parses."""

import functools
import glob
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ansible

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBRARY = os.path.join(REPO, "library")
MODULES = sorted(
    os.path.basename(path)[:-3]
    for path in glob.glob(os.path.join(LIBRARY, "*.py"))
    if not os.path.basename(path).startswith("_")
)


@pytest.fixture(scope="module")
def doc_of(ansible_doc):
    """ansible-doc's finished process for these arguments, run once for the module's tests: the
    rendering test and the JSON test read the same rendered page (ansible-doc takes seconds)."""
    return functools.cache(ansible_doc)


def test_the_project_modules_are_there():
    assert {"tf_cluster_spec", "tf_task"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_ansible_doc_renders(doc_of, module):
    proc = doc_of(module)
    assert proc.returncode == 0, proc.stderr
    assert "[WARNING]" not in proc.stderr and "[ERROR]" not in proc.stderr, proc.stderr
    assert "OPTIONS" in proc.stdout and "RETURN VALUES" in proc.stdout, proc.stdout
    assert "EXAMPLES" in proc.stdout and "AUTHOR" in proc.stdout.upper()


@pytest.mark.parametrize("module", MODULES)
def test_ansible_doc_json(doc_of, module):
    proc = doc_of("--json", module)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    entry = data.get(module) or data[next(iter(data))]
    doc = entry["doc"]
    assert doc["module"] == module
    assert doc["short_description"] and doc["description"]
    assert doc["author"]
    assert doc["options"] and entry["return"] and entry["examples"].strip()
    rendered = doc_of(module).stdout
    for option in doc["options"]:
        assert option in rendered
    for key in entry["return"]:
        assert key in rendered


def exported_filters():
    """Every filter name the project's filter plugins export (their FilterModule().filters())."""
    import importlib.util

    names = []
    for path in sorted(glob.glob(os.path.join(REPO, "plugins", "filter", "*.py"))):
        spec = importlib.util.spec_from_file_location("filter_" + os.path.basename(path)[:-3], path)
        plugin = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(plugin)
        names += sorted(plugin.FilterModule().filters())
    return names


# Every filter, each with a document of its own.
FILTERS = exported_filters()


def test_the_project_filters_are_there():
    assert {"tf_node_specs", "environment_documents", "environment_differences"} <= set(FILTERS)


def project_tool(tool: str, *args: str) -> subprocess.CompletedProcess:
    """ansible-doc, ansible-config, ... of this interpreter with the project's ansible.cfg."""
    return subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), tool), *args],
        cwd=REPO,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg")),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", FILTERS)
def test_each_filter_documents_itself(name):
    proc = project_tool("ansible-doc", "-t", "filter", "--json", name)
    assert proc.returncode == 0 and "[ERROR]" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)[name]["doc"]
    # Its own document, not another filter's of the same file.
    assert doc["name"] == name and doc["short_description"], doc


# Every callback plugin of the project (ansible.cfg enables them all).
CALLBACKS = sorted(os.path.basename(path)[:-3] for path in glob.glob(os.path.join(REPO, "plugins", "callback", "*.py")))


@pytest.mark.parametrize("name", CALLBACKS)
def test_each_callback_documents_itself_and_is_enabled(name):
    proc = project_tool("ansible-doc", "-t", "callback", "--json", name)
    assert proc.returncode == 0 and "[ERROR]" not in proc.stderr and "[WARNING]" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)[name]["doc"]
    assert doc["name"] == name and doc["short_description"] and doc["description"], doc
    # Prose only: a list item with ': ' in it is a YAML mapping, which ansible-doc's text view
    # cannot show (it fails with 'Unable to retrieve documentation').
    texts = [doc["description"], doc.get("notes", []), *(o["description"] for o in doc.get("options", {}).values())]
    prose = [line for text in texts for line in ([text] if isinstance(text, str) else text)]
    assert all(isinstance(line, str) for line in prose), [line for line in prose if not isinstance(line, str)]
    assert name in enabled_callbacks(), enabled_callbacks()


@functools.cache
def enabled_callbacks() -> list[str]:
    config = project_tool("ansible-config", "dump", "--format", "json")
    assert config.returncode == 0, config.stderr
    return next(s["value"] for s in json.loads(config.stdout) if s["name"] == "CALLBACKS_ENABLED")
