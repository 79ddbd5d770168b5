#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""What a node is and runs: the ``environment`` document of a worker's result.

Collected once per task, before the measured steps, on the node itself:

- ``host``, ``instance_type`` (only where the caller knows it: the inventory's), ``cpu``
  (model, logical cores, the instruction-set flags TF builds care about: avx, avx2, avx512f,
  fma), ``memory_mib``; ``memory_limit_mib``, the memory cgroup's limit on this process where
  there is one (v2 ``memory.max``, v1 ``memory.limit_in_bytes``; null without a limit);
- ``os`` (name, kernel, machine), ``python`` (version, implementation, executable);
- ``tensorflow``: version and how it was built (``tf.sysconfig.get_build_info()`` on TF 2;
  on TF 1.x ``__git_version__``, ``__compiler_version__`` and ``test.is_built_with_cuda()``),
  whether oneDNN is on; only from a TF module the caller already imported (``tf=``), or,
  with ``--tensorflow`` on the command line, by importing it in this process;
- ``gpu_query``: nvidia-smi's raw answer (argv, exit code, stdout, stderr) to two
  ``--query-gpu`` questions, which the controller reads with ``dtfbench.node.nvidia_smi``
  (``dtfbench.results.environment_view``): the parser stays one, and this file stays small;
- ``cuda``, ``cudnn``: the versions TF was built with, else the toolkit's files;
- ``env``: CUDA_VISIBLE_DEVICES and every TF_*, OMP_*, KMP_* variable.

Collecting never fails a run: a piece it cannot get is the string ``unknown`` and its
reason is in ``unknown`` (``{"cpu.model": "no /proc/cpuinfo: ..."}``).

Standard library only, for the oldest Python of pyproject.toml's [tool.dtfbench.oldest-python]:
the tf_cnn_benchmarks adapter imports it on
TF 1.x nodes (the role copies it beside the adapter), our workload imports it from the
package, and the sweep's host check runs it as a script::

    python environment.py [--tensorflow | --tensorflow-metadata] [--instance-type TYPE]   # JSON on stdout
"""

from __future__ import absolute_import, division, print_function

import ast
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time

SCHEMA = 1
UNKNOWN = "unknown"
ENV_PATTERN = re.compile(r"^(CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|TF_\w+|OMP_\w+|KMP_\w+)$")
CPU_FLAGS = ("avx", "avx2", "avx512f", "fma")
# The GPU questions: the one dtfbench.node.nvidia_smi asks (without the moment's utilisation), then
# clocks and power limit, asked apart so that a driver that lacks those still answers the first.
GPU_FIELDS = ("index", "name", "memory.total", "driver_version", "uuid", "pci.bus_id", "compute_cap")
CLOCK_FIELDS = ("index", "clocks.max.sm", "clocks.max.mem", "power.limit")
NVIDIA_SMI_TIMEOUT = 20
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
CUDA_VERSION_FILES = ("/usr/local/cuda/version.json", "/usr/local/cuda/version.txt")
CUDNN_HEADERS = (
    "/usr/include/cudnn_version.h",
    "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
    "/usr/include/x86_64-linux-gnu/cudnn_version_v8.h",
    "/usr/local/cuda/include/cudnn_version.h",
    "/usr/include/cudnn.h",
    "/usr/local/cuda/include/cudnn.h",
)


class _Doc(object):
    """The document and its reasons; every piece is set through `put`, which never raises."""

    def __init__(self):
        self.doc = {"schema": SCHEMA, "unknown": {}}

    def put(self, path, getter):
        try:
            value = getter()
        except Exception as err:  # collecting never fails a run
            value = _Unknown("%s: %s" % (type(err).__name__, " ".join(str(err).split())[:200]))
        target = self.doc
        parts = path.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        if isinstance(value, _Unknown):
            target[parts[-1]] = UNKNOWN
            self.doc["unknown"][path] = value.why
        else:
            target[parts[-1]] = value


class _Unknown(object):
    def __init__(self, why):
        self.why = why


def _read(path):
    with open(path) as handle:
        return handle.read()


def _cpuinfo():
    try:
        return _read("/proc/cpuinfo")
    except (IOError, OSError) as err:
        return _Unknown("cannot read /proc/cpuinfo: %s" % err)


def _cpu_model(info):
    if isinstance(info, _Unknown):
        return info
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model", "Processor") and value.strip():
            return value.strip()
    return platform.processor() or _Unknown("/proc/cpuinfo names no CPU model")


def _cpu_flags(info):
    if isinstance(info, _Unknown):
        return info
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            present = set(value.split())
            return dict((flag, flag in present) for flag in CPU_FLAGS)
    return _Unknown("/proc/cpuinfo lists no CPU flags")


def _logical_cores():
    try:
        import multiprocessing

        return multiprocessing.cpu_count()
    except NotImplementedError:
        return _Unknown("the number of CPUs cannot be read here")


def _memory_mib():
    try:
        text = _read("/proc/meminfo")
    except (IOError, OSError) as err:
        return _Unknown("cannot read /proc/meminfo: %s" % err)
    match = re.search(r"^MemTotal:\s+(\d+)\s+kB", text, re.M)
    return int(match.group(1)) // 1024 if match else _Unknown("/proc/meminfo has no MemTotal")


def _os_name():
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = _read(path)
        except (IOError, OSError):
            continue
        match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
        if match:
            return match.group(1)
    return _Unknown("no /etc/os-release")


def _env_vars(environ):
    return dict((key, value) for key, value in environ.items() if ENV_PATTERN.match(key))


# --- nvidia-smi (raw; the controller parses it) ---------------------------------------------


def _which(binary):
    if os.sep in binary:
        return binary if os.access(binary, os.X_OK) else None
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder, binary)
        if folder and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _run(argv, timeout):
    """(rc, stdout, stderr) of argv, ended after `timeout` s (Python 2.7 has no timeout=)."""
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.time() + timeout
    while proc.poll() is None:
        if time.time() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError("%s did not answer within %g s (a hung GPU or driver)" % (argv[0], timeout))
        time.sleep(0.02)
    stdout, stderr = proc.communicate()
    return proc.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")


def query_gpus(binary="nvidia-smi", fields=GPU_FIELDS, timeout=NVIDIA_SMI_TIMEOUT):
    """nvidia-smi's answer to ``--query-gpu=FIELDS``: {argv, fields, rc, stdout, stderr}, or
    {status, reason} when it cannot be asked. A field this driver refuses ('Field "x" is not
    a valid field to query', compute_cap before R510) is dropped and the question asked again."""
    path = _which(binary)
    if path is None:
        return {"status": "absent", "reason": "%s was not found on PATH: no NVIDIA driver is installed" % binary}
    fields = list(fields)
    for _ in range(len(fields)):
        argv = [path, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
        try:
            rc, stdout, stderr = _run(argv, timeout)
        except (OSError, RuntimeError) as err:
            return {"status": "error", "reason": "cannot run %s: %s" % (binary, err)}
        invalid = _INVALID_FIELD.search(stdout + "\n" + stderr)
        if rc != 0 and invalid and invalid.group(1) in fields[1:]:
            fields.remove(invalid.group(1))
            continue
        break
    return {"argv": argv, "fields": fields, "rc": rc, "stdout": stdout, "stderr": stderr}


# --- TensorFlow (only one already imported, or asked for) -----------------------------------


def tensorflow_info(tf):
    """Version and build of an imported TF module: {version, git_version, compiler, build, cuda_build, onednn}."""
    info = {
        "version": getattr(tf, "__version__", None) or UNKNOWN,
        "git_version": getattr(tf, "__git_version__", None) or UNKNOWN,
        "compiler": getattr(tf, "__compiler_version__", None) or UNKNOWN,
    }
    sysconfig = getattr(tf, "sysconfig", None)
    get_build_info = getattr(sysconfig, "get_build_info", None)
    if get_build_info is not None:  # TF >= 2.3
        build = dict(get_build_info())
        info["build"] = dict(
            (str(k), v if isinstance(v, (bool, int, float, type(None))) else str(v)) for k, v in build.items()
        )
        info["cuda_build"] = bool(build.get("is_cuda_build"))
    else:  # TF 1.x: what it exposes
        info["build"] = UNKNOWN
        test = getattr(tf, "test", None)
        built_with_cuda = getattr(test, "is_built_with_cuda", None)
        info["cuda_build"] = bool(built_with_cuda()) if built_with_cuda else UNKNOWN
    info["onednn"] = _onednn()
    return info


_TF_DIST = re.compile(
    r"^(tensorflow|tensorflow[_-]cpu|tensorflow[_-]gpu|tf[_-]nightly\w*|intel[_-]tensorflow)"
    r"-([^-]+?)\.(?:dist|egg)-info$",
    re.I,
)


def tensorflow_metadata(paths=None):
    """TF's version from its package metadata and its build from build_info.py, without
    importing it (a second's look instead of a TF import): what the sweep's host check uses."""
    for folder in sys.path if paths is None else paths:
        try:
            names = sorted(os.listdir(folder or "."))
        except (IOError, OSError):
            continue
        for name in names:
            match = _TF_DIST.match(name)
            if not match or not os.path.isdir(os.path.join(folder, "tensorflow")):
                continue
            info = {
                "version": match.group(2),
                "distribution": match.group(1),
                "source": "package metadata",
                "build": UNKNOWN,
                "cuda_build": UNKNOWN,
            }
            try:
                text = _read(os.path.join(folder, "tensorflow", "python", "platform", "build_info.py"))
                pairs = re.search(r"OrderedDict\((\[.*\])\)", text, re.S)
                build = dict(ast.literal_eval(pairs.group(1))) if pairs else None
            except (IOError, OSError, ValueError, SyntaxError):
                build = None
            if build:
                info["build"] = dict(
                    (str(k), v if isinstance(v, (bool, int, float, type(None))) else str(v)) for k, v in build.items()
                )
                info["cuda_build"] = bool(build.get("is_cuda_build"))
            return info
    return _Unknown("no TensorFlow package on this Python's path (%s)" % sys.executable)


def _onednn():
    """Whether TF runs its oneDNN (MKL) kernels: TF's own answer where it has one."""
    try:
        from tensorflow.python.util import _pywrap_util_port as port
    except Exception:
        return UNKNOWN
    for name in ("IsMklEnabled", "IsBuiltWithOneDNN"):
        check = getattr(port, name, None)
        if check is not None:
            return bool(check())
    return UNKNOWN


def _library_version(tf_info, build_key, paths, parse, missing):
    """{version, source} of a library TF runs on (CUDA, cuDNN): what TF's build names under
    `build_key` (the library this TF was built with), else the first of `paths` that `parse`
    finds a version in; _Unknown naming what is `missing` where neither says."""
    build = tf_info.get("build") if isinstance(tf_info, dict) else None
    if isinstance(build, dict) and build.get(build_key):
        return {"version": str(build[build_key]), "source": "tensorflow build"}
    for path in paths:
        try:
            text = _read(path)
        except (IOError, OSError):
            continue
        version = parse(text)
        if version:
            return {"version": version, "source": path}
    return _Unknown("TF does not say (not a CUDA build, or not imported) and " + missing)


def _cuda(tf_info):
    def parse(text):
        match = re.search(r'"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"([^"]+)"', text) or re.search(
            r"CUDA Version\s+([\d.]+)", text
        )
        return match.group(1) if match else None

    return _library_version(tf_info, "cuda_version", CUDA_VERSION_FILES, parse, "no CUDA toolkit in /usr/local/cuda")


def _cudnn(tf_info):
    def parse(text):
        parts = [re.search(r"#define CUDNN_%s\s+(\d+)" % name, text) for name in ("MAJOR", "MINOR", "PATCHLEVEL")]
        return ".".join(p.group(1) for p in parts) if all(parts) else None

    return _library_version(tf_info, "cudnn_version", CUDNN_HEADERS, parse, "no cuDNN header found")


def _memory_limit_mib():
    """The memory cgroup's limit on this process, in MiB; None when it has none (the largest
    number, v2's 'max', or no memory cgroup at all)."""
    with open("/proc/self/mountinfo") as handle:
        mounts = [line.split() for line in handle]
    with open("/proc/self/cgroup") as handle:
        groups = [line.rstrip("\n").split(":", 2) for line in handle]
    for hierarchy, controllers, path in (g for g in groups if len(g) == 3):
        v1 = "memory" in controllers.split(",")
        if not v1 and (hierarchy, controllers) != ("0", ""):
            continue
        for fields in mounts:
            tail = fields[fields.index("-") + 1 :] if "-" in fields else []
            if len(tail) < 3 or tail[0] != ("cgroup" if v1 else "cgroup2"):
                continue
            if v1 and "memory" not in tail[2].split(","):
                continue
            inside = path[len(fields[3]) :] if fields[3] != "/" and path.startswith(fields[3]) else path
            limit_file = os.path.join(fields[4], inside.lstrip("/"), "memory.limit_in_bytes" if v1 else "memory.max")
            if os.path.exists(limit_file):
                text = _read(limit_file).strip()
                # v1 says 'no limit' with the largest page-aligned 64-bit number.
                return None if text == "max" or int(text) >= 1 << 62 else int(text) // (1024 * 1024)
    return None


# --- the document ----------------------------------------------------------------------------


def collect(tf=None, instance_type=None, environ=None, nvidia_smi="nvidia-smi", tf_unknown_why=None, tf_metadata=False):
    """This node's environment document (never raises). `tf`: an imported TensorFlow module;
    else, with `tf_metadata`, TF's package metadata; else its fields are unknown
    (`tf_unknown_why` says why, if the caller knows)."""
    environ = os.environ if environ is None else environ
    doc = _Doc()
    doc.put("collected_at", lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    doc.put("host", socket.gethostname)
    doc.put(
        "instance_type",
        lambda: (
            instance_type or _Unknown("the inventory gives no instance_type for this host (only EC2 inventories do)")
        ),
    )
    info = _cpuinfo()
    doc.put("cpu.model", lambda: _cpu_model(info))
    doc.put("cpu.logical_cores", _logical_cores)
    doc.put("cpu.flags", lambda: _cpu_flags(info))
    doc.put("memory_mib", _memory_mib)
    doc.put("memory_limit_mib", _memory_limit_mib)
    doc.put("os.name", _os_name)
    doc.put("os.kernel", platform.release)
    doc.put("os.machine", platform.machine)
    doc.put("python.version", platform.python_version)
    doc.put("python.implementation", platform.python_implementation)
    doc.put("python.executable", lambda: sys.executable)
    if tf is not None:
        doc.put("tensorflow", lambda: tensorflow_info(tf))
    elif tf_metadata:
        doc.put("tensorflow", tensorflow_metadata)
    else:
        doc.put("tensorflow", lambda: _Unknown(tf_unknown_why or "TensorFlow was not imported by this process"))
    tf_info = doc.doc.get("tensorflow")
    doc.put("cuda", lambda: _cuda(tf_info))
    doc.put("cudnn", lambda: _cudnn(tf_info))
    doc.put("gpu_query.gpus", lambda: query_gpus(nvidia_smi, GPU_FIELDS))
    doc.put("gpu_query.clocks", lambda: query_gpus(nvidia_smi, CLOCK_FIELDS))
    doc.put("env", lambda: _env_vars(environ))
    return doc.doc


def collect_in(python, script=None, instance_type=None, timeout=120):
    """The document collected by another Python (a TF 1.x node's, which runs the program) with
    TF imported there; where that fails, this process's document with TF unknown and why."""
    script = script or os.path.abspath(__file__).replace(".pyc", ".py")
    argv = [python, script, "--tensorflow"] + (["--instance-type", instance_type] if instance_type else [])
    why = None
    try:
        rc, stdout, stderr = _run(argv, timeout)
        if rc == 0:
            return json.loads(stdout.strip().splitlines()[-1])
        why = "%s could not import TensorFlow (exit %d): %s" % (
            python,
            rc,
            (stderr.strip().splitlines() or ["no output"])[-1][:300],
        )
    except (OSError, RuntimeError, ValueError, IndexError) as err:
        why = "%s could not report its environment: %s" % (python, err)
    return collect(instance_type=instance_type, tf_unknown_why=why)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = dict(os.environ)  # as it was given: before this process sets anything
    instance_type = None
    if "--instance-type" in argv:
        position = argv.index("--instance-type")
        instance_type = argv[position + 1] if position + 1 < len(argv) else None
    tf, why = None, None
    if "--tensorflow" in argv:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        try:
            import tensorflow as tf  # noqa: F401 (importing is the point of --tensorflow)
        except Exception as err:  # an ImportError, or a broken install
            tf, why = None, "import tensorflow failed: %s: %s" % (type(err).__name__, err)
    sys.stdout.write(
        json.dumps(
            collect(
                tf=tf,
                instance_type=instance_type,
                environ=environ,
                tf_unknown_why=why,
                tf_metadata="--tensorflow-metadata" in argv,
            ),
            sort_keys=True,
        )
        + "\n"
    )
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
