"""The scoring program: one episode's collected output scored with a benchmark's own metric
functions. It runs inside the sandbox (runner.benchmarks.sandbox) with the scoring venv's
Python, on the standard library and the benchmark's code only: nothing of cu-run is importable
there, so this file imports nothing of cu-run either.

Input, a JSON file (argv[1], read-only):
    evaluator     the task's upstream evaluator block (func, result, expected, options, conj)
    collected     the folder the guest's collector filled, pulled to the host (read-only)
    assets        {url: path} of the gold files the evaluator downloads (read-only)
    package_root  the folder holding the benchmark's `desktop_env` package
    left_out      modules the scoring venv leaves out on purpose (easyocr: it needs torch)
    scratch       a writable folder: the getters' files are put here under upstream's names

Output, on the original stdout, one line: {"score": float, "metrics": [...]} or
{"error": "...", "traceback": "..."}. Whatever the metrics print goes to stderr.

Upstream's rule for combining several metrics (desktop_env's evaluate), in our words: with
conj "and" (the default) the first metric at 0 makes the score 0, else it is their mean; with
"or" the first at 1 makes it 1, else it is their maximum.
"""

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import shutil
import sys
import traceback
import types

METRICS_PACKAGE = "desktop_env.evaluators.metrics"
GETTERS_PACKAGE = "desktop_env.evaluators.getters"


class LeftOut(ImportError):
    pass


class _Unusable:
    """A name imported from a left-out module (`from playwright.sync_api import expect`): using it
    in any way raises LeftOut."""

    def __init__(self, name):
        self._name = name

    def _refuse(self, *_args, **_kwargs):
        raise LeftOut(f"{self._name}: {self._name.split('.')[0]} is left out of the scoring venv")

    __call__ = __iter__ = __enter__ = __getitem__ = _refuse

    def __getattr__(self, attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        self._refuse()


class _LeftOutFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of a left-out module succeed (upstream's modules import them at their top), and
    any use of one raises LeftOut: a metric that needs it fails loudly, it never scores wrong."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        name = spec.name

        class _Absent(types.ModuleType):
            def __getattr__(self, attribute):
                if attribute.startswith("__"):
                    raise AttributeError(attribute)
                return _Unusable(f"{name}.{attribute}")

        module = _Absent(name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def metric_modules(package_root, package=METRICS_PACKAGE):
    """{function name: module name} from PACKAGE's __init__ (`from .table import ...`), read as
    text: importing it would import every metric's (or getter's) dependencies."""
    init = os.path.join(package_root, *package.split("."), "__init__.py")
    with open(init, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found


def load_function(package_root, name, package=METRICS_PACKAGE):
    """The function NAME of PACKAGE, its module imported without the packages' __init__ files."""
    modules = metric_modules(package_root, package)
    if name not in modules:
        raise LookupError(f"{name} is not in {package} of {package_root}")
    parts = package.split(".")
    for depth in range(1, len(parts) + 1):
        name_so_far = ".".join(parts[:depth])
        if name_so_far not in sys.modules:
            module = types.ModuleType(name_so_far)
            module.__path__ = [os.path.join(package_root, *parts[:depth])]
            sys.modules[name_so_far] = module
    module = importlib.import_module(f"{package}.{modules[name]}")
    return getattr(module, name)


# -- getters: each turns what the collector gathered (or the host's gold file) into the value
# upstream's getter of that type returns.

def _gives(config):
    return sorted(set(config.get("gives", [0])))


def _listed(config, key):
    value = config[key]
    return list(value) if config.get("multi") else [value]


def _one_or_list(values):
    return values[0] if len(values) == 1 else values


def _collected_file(job, slot, index, dest):
    source = os.path.join(job["collected"], slot, str(index))
    if not os.path.isfile(source) or os.path.islink(source):
        return None
    target = os.path.join(job["scratch"], slot, os.path.basename(dest))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(source, target)
    return target


def get_vm_file(job, slot, config):
    dests = _listed(config, "dest")
    return _one_or_list([_collected_file(job, slot, i, dests[i]) for i in _gives(config)])


def get_cloud_file(job, slot, config):
    urls, dests = _listed(config, "path"), _listed(config, "dest")
    paths = []
    for i in _gives(config):
        target = os.path.join(job["scratch"], slot, os.path.basename(dests[i]))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(job["assets"][urls[i]], target)
        paths.append(target)
    return _one_or_list(paths)


def _command_output(stream):
    def get(job, slot, config):
        path = os.path.join(job["collected"], slot, stream)
        if not os.path.isfile(path) or os.path.islink(path):
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    return get


def _home_file(job, slot, config):
    return _collected_file(job, slot, 0, config["dest"])


class _GatheredHome:
    """Upstream's `env` for a getter of its own that reads one file under $HOME (Chrome's
    Preferences): the guest it asks is the home the collector gathered, nothing else."""

    vm_platform = "Linux"

    def __init__(self, home):
        self.home = os.path.realpath(home)
        self.controller = self

    def execute_python_command(self, command):
        # Such a getter asks the guest's Python where the file is (os.getenv('HOME')); the same
        # text runs here with HOME the gathered home.
        printed, saved = io.StringIO(), os.environ.get("HOME")
        os.environ["HOME"] = self.home
        try:
            with contextlib.redirect_stdout(printed):
                exec(command, {})  # the getter's own text, from the benchmark's code
        finally:
            if saved is None:
                del os.environ["HOME"]
            else:
                os.environ["HOME"] = saved
        return {"status": "success", "output": printed.getvalue(), "error": ""}

    def get_file(self, path):
        """The file's bytes; None, as upstream's controller answers, for anything else."""
        real = os.path.realpath(path)
        if not real.startswith(self.home + os.sep) or not os.path.isfile(real):
            return None
        with open(real, "rb") as handle:
            return handle.read()


def _upstream_getter(job, slot, config):
    getter = load_function(job["package_root"], f"get_{config['type']}", GETTERS_PACKAGE)
    return getter(_GatheredHome(os.path.join(job["collected"], slot, "home")), config)


GETTERS = {
    "rule": lambda job, slot, config: config["rules"],
    "vm_file": get_vm_file,
    "cloud_file": get_cloud_file,
    "vm_command_line": _command_output("stdout"),
    "vm_command_error": _command_output("stderr"),
    "vlc_config": _home_file,
    "gimp_config_file": _home_file,
}


def state(job, key, index, config):
    """What the getter of CONFIG returns: ours for what we gather ourselves, upstream's own for a
    file it reads under the home (the collector gathered it into the slot's home/)."""
    slot = f"{key}-{index}"
    getter = GETTERS.get(config["type"])
    if getter is None and os.path.isdir(os.path.join(job["collected"], slot, "home")):
        getter = _upstream_getter
    if getter is None:
        raise LookupError(f"getter {config['type']}: nothing was collected for it")
    return getter(job, slot, config)


def score(job):
    evaluator = job["evaluator"]
    funcs = evaluator["func"]
    several = isinstance(funcs, list)
    funcs = funcs if several else [funcs]
    results = evaluator["result"] if several else [evaluator["result"]]
    expected = evaluator.get("expected")
    expected = (expected if several else [expected]) if expected else None
    options = evaluator.get("options", [{}] * len(funcs) if several else {})
    options = options if several else [options]
    conj = evaluator.get("conj", "and")
    scores = []
    for index, name in enumerate(funcs):
        metric = load_function(job["package_root"], name)
        result_state = state(job, "result", index, results[index])
        arguments = [result_state]
        if expected:
            arguments.append(state(job, "expected", index, expected[index]))
        value = float(metric(*arguments, **(options[index] or {})))
        scores.append({"func": name, "score": value})
        if several and conj == "and" and value == 0.0:
            return 0.0, scores
        if several and conj == "or" and value == 1.0:
            return 1.0, scores
    values = [s["score"] for s in scores]
    if not several:
        return values[0], scores
    return (sum(values) / len(values) if conj == "and" else max(values)), scores


def main():
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the metrics' own printing goes to stderr; stdout carries the one result line
    with open(sys.argv[1], encoding="utf-8") as handle:
        job = json.load(handle)
    sys.meta_path.insert(0, _LeftOutFinder(job.get("left_out", [])))
    sys.path.insert(0, job["package_root"])
    try:
        total, scores = score(job)
        answer = {"score": total, "metrics": scores}
    except BaseException as exc:  # noqa: BLE001 - any failure of the metric is reported, never scored
        answer = {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()[-20000:],
                  "left_out": isinstance(exc, LeftOut)}
    out.write(json.dumps(answer) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
