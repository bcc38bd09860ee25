"""Loads DI-engine's interaction modules (and, on request, its
LearnerAggregator) from a plain DI-engine checkout, without DI-engine's heavy
imports: ding/__init__.py and ding/utils/__init__.py pull in torch and most
of the library, so bare packages that point at the checkout stand in for
them, and reference/stand_ins/ supplies the few small packages Debian lacks.
Contains no DI-engine code. Needs Debian's python3-flask, python3-requests,
python3-easydict, python3-urlobject and python3-yaml.

DI-engine's master advertises get_host_ip() (the host's outward address) to
its slaves; here it is pinned to `advertise` (127.0.0.1 by default) so that
traffic stays on loopback.

  root = checkout()            # DI_ROOT, checked; None when unset or not one
  ding = load(root)            # ding.interaction: Master, Slave, TaskFail, ...
  agg = load_aggregator(root)  # ding.worker.adapter.learner_aggregator"""
import importlib
import importlib.util
import logging
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ("flask", "requests", "easydict", "urlobject", "yaml")


class LoadError(Exception):
    pass


def checkout():
    """DI_ROOT when it names a DI-engine checkout, else None."""
    root = os.environ.get("DI_ROOT")
    if root and os.path.isdir(os.path.join(root, "ding", "interaction")):
        return root
    return None


def missing_modules():
    """The Python modules DI-engine's interaction code needs that are absent."""
    missing = []
    for m in MODULES:
        if importlib.util.find_spec(m) is None:
            missing.append(m)
    return missing


def load_file(root, name, path):
    """Loads one file of the checkout as module `name`."""
    if not os.path.isfile(path):
        raise LoadError("%s is not in the DI-engine checkout (DI_ROOT=%s)" % (os.path.relpath(path, root), root))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def package(name, path=None):
    m = types.ModuleType(name)
    m.__path__ = [path] if path else []
    sys.modules[name] = m
    return m


def build_logger(path, name, need_tb=False):
    lg = logging.getLogger(name)
    if not lg.handlers:
        lg.addHandler(logging.StreamHandler(sys.stderr))
    lg.setLevel(logging.INFO)
    return lg, None


def load(root, advertise="127.0.0.1"):
    """ding.interaction from the checkout at root, its master pinned to advertise."""
    if "ding.interaction" in sys.modules:
        return sys.modules["ding.interaction"]
    sys.path[:0] = [root, os.path.join(HERE, "stand_ins")]
    package("ding", os.path.join(root, "ding"))
    utils = package("ding.utils", os.path.join(root, "ding", "utils"))
    helper = types.ModuleType("ding.utils.default_helper")
    helper.one_time_warning = lambda msg: logging.getLogger("di_load").warning(msg)
    sys.modules["ding.utils.default_helper"] = helper
    utils.build_logger = build_logger
    interaction = importlib.import_module("ding.interaction")
    importlib.import_module("ding.interaction.master.master").get_host_ip = lambda: advertise
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    return interaction


def load_aggregator(root, advertise="127.0.0.1"):
    """ding.worker.adapter.learner_aggregator, with DI-engine's own k8s helper
    and operator server."""
    load(root, advertise)
    utils = sys.modules["ding.utils"]
    k8s = load_file(root, "ding.utils.k8s_helper", os.path.join(root, "ding", "utils", "k8s_helper.py"))
    utils.get_operator_server_kwargs = k8s.get_operator_server_kwargs
    utils.exist_operator_server = k8s.exist_operator_server
    package("ding.worker", os.path.join(root, "ding", "worker"))
    package("ding.worker.coordinator", os.path.join(root, "ding", "worker", "coordinator"))
    package("ding.worker.adapter", os.path.join(root, "ding", "worker", "adapter"))
    load_file(root, "ding.worker.coordinator.operator_server",
              os.path.join(root, "ding", "worker", "coordinator", "operator_server.py"))
    return load_file(root, "ding.worker.adapter.learner_aggregator",
                     os.path.join(root, "ding", "worker", "adapter", "learner_aggregator.py"))
