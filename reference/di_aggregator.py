#!/usr/bin/python3
"""Runs DI-engine's own Python LearnerAggregator from a plain DI-engine
checkout, so that the benchmarks and the scenario library can put it where
ours stands. Contains no DI-engine code: it loads the checkout's files and
replaces only the heavy imports around them (torch, through ding.utils) with
stand-ins of ours. Needs Debian's python3-flask, python3-requests,
python3-easydict, python3-urlobject and python3-yaml.

usage:
  di_aggregator.py --config FILE
      FILE is DI-engine's aggregator config: {"slave": {"host", "port"},
      "master": {"host", "port"}, "learner": {"ID": ["ID", "HOST", PORT], ...}}
  di_aggregator.py SLAVE_PORT MASTER_PORT ID=HOST:PORT ...
      the same on loopback (the benchmarks' form)

environment:
  DI_ROOT                 the DI-engine checkout (required)
  DI_ADVERTISE_HOST       the address its master gives learners in /connect
                          (default 127.0.0.1: DI-engine would pick the host's
                          outward address, which would take traffic off loopback)
  KUBERNETES_SERVER_URL   set: DI-engine's Kubernetes mode, against that
  KUBERNETES_POD_NAMESPACE, KUBERNETES_POD_NAME
                          operator server, read by DI-engine's own k8s helper

Prints one line {"ready": true, "pid", "slave_port", "master_port",
"world_size"} once start() has returned with both ends up; exits 3 (after
saying why on stderr) when start() failed, 2 on bad usage. SIGTERM or SIGINT:
close() is given 5 s, then the process exits 0."""
import json
import os
import signal
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def die(code, msg):
    print("di_aggregator: " + msg, file=sys.stderr, flush=True)
    sys.exit(code)


def parse_args(argv):
    if len(argv) == 2 and argv[0] == "--config":
        try:
            with open(argv[1]) as f:
                cfg = json.load(f)
        except (OSError, ValueError) as e:
            die(2, "cannot read the config %s: %s" % (argv[1], e))
        for key in ("slave", "master", "learner"):
            if not isinstance(cfg.get(key), dict):
                die(2, "%s: \"%s\" must be an object" % (argv[1], key))
        return cfg
    if len(argv) >= 2 and argv[0].isdigit() and argv[1].isdigit():
        learners = {}
        for a in argv[2:]:
            lid, sep, hp = a.partition("=")
            host, sep2, port = hp.rpartition(":")
            if not sep or not sep2 or not port.isdigit():
                die(2, "learner %r: expected ID=HOST:PORT" % a)
            learners[lid] = [lid, host, int(port)]
        return {"slave": {"host": "127.0.0.1", "port": int(argv[0])},
                "master": {"host": "127.0.0.1", "port": int(argv[1])},
                "learner": learners}
    die(2, "usage: di_aggregator.py --config FILE | SLAVE_PORT MASTER_PORT ID=HOST:PORT ...")


if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
ROOT = os.environ.get("DI_ROOT")
if not ROOT or not os.path.isdir(os.path.join(ROOT, "ding", "interaction")):
    die(2, "DI_ROOT must name a DI-engine checkout (it has ding/interaction); got %r" % ROOT)
cfg_dict = parse_args(sys.argv[1:])
sys.path.insert(0, HERE)
import di_load  # noqa: E402
from easydict import EasyDict  # noqa: E402

# RFC 6761: every name under .localhost is loopback, but glibc without
# nss-myhostname does not resolve them. The scenario runner names each
# Kubernetes-mode learner <pod>.localhost (so that the mock operator tells
# pods apart by host, as in a cluster); resolve those as the RFC says.
_getaddrinfo = socket.getaddrinfo


def _loopback_localhost(host, *args, **kwargs):
    if isinstance(host, str) and host.endswith(".localhost"):
        host = "127.0.0.1"
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_localhost

try:
    mod = di_load.load_aggregator(ROOT, os.environ.get("DI_ADVERTISE_HOST", "127.0.0.1"))
except di_load.LoadError as e:
    die(2, str(e))


def listening(host, port, seconds):
    """Whether host:port accepts a TCP connection within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            stop.wait(0.05)


stop = threading.Event()
agg = mod.LearnerAggregator(EasyDict(cfg_dict))
agg.start()
# start() logs and returns when a side fails to start (DI-engine's start-up
# flaw): tell it by whether both ports answer.
for side in ("slave", "master"):
    host = cfg_dict[side].get("host") or "127.0.0.1"
    if host == "0.0.0.0":
        host = "127.0.0.1"
    if agg._end_flag or not listening(host, int(cfg_dict[side]["port"]), 5):
        die(3, "LearnerAggregator.start() failed: its %s port %s is not listening (see its log above)"
            % (side, cfg_dict[side]["port"]))
print(json.dumps({"ready": True, "pid": os.getpid(), "slave_port": cfg_dict["slave"]["port"],
                  "master_port": cfg_dict["master"]["port"], "world_size": agg._world_size}), flush=True)

signal.signal(signal.SIGTERM, lambda *a: stop.set())
signal.signal(signal.SIGINT, lambda *a: stop.set())
stop.wait()
closer = threading.Thread(target=agg.close, daemon=True)
closer.start()
closer.join(5)
os._exit(0)
