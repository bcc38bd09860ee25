"""Runs DI-engine's Python LearnerAggregator (from a DI-engine checkout at
$DI_ROOT, default /tmp/di) for side-by-side benchmarks: loopback only.
usage: run_py_agg.py SLAVE_PORT MASTER_PORT learnerID=HOST:PORT ...
Prints {"ready": true, "pid": P} once started. Contains no DI-engine code."""
import importlib, json, logging, os, sys, signal, time, types
root = os.environ.get("DI_ROOT", "/tmp/di")
sys.path[:0] = [root, os.path.join(root, "shim")]
from easydict import EasyDict
# ding.utils is heavy: stub the three names learner_aggregator.py imports.
utils = types.ModuleType("ding.utils")
def build_logger(path, name, need_tb=False):
    lg = logging.getLogger(name)
    lg.addHandler(logging.StreamHandler(sys.stderr))
    lg.setLevel(logging.INFO)
    return lg, None
utils.build_logger = build_logger
utils.get_operator_server_kwargs = lambda cfg: {}
utils.exist_operator_server = lambda: False
sys.modules["ding.utils"] = utils
import ding
ding.utils = utils
import ding.interaction
_mm = importlib.import_module("ding.interaction.master.master")
_mm.get_host_ip = lambda: "127.0.0.1"   # keep all traffic on loopback
opsrv = types.ModuleType("ding.worker.coordinator.operator_server")
opsrv.OperatorServer = object
for name in ["ding.worker", "ding.worker.coordinator", "ding.worker.adapter"]:
    m = types.ModuleType(name); m.__path__ = []; sys.modules[name] = m
sys.modules["ding.worker.coordinator.operator_server"] = opsrv
path = os.path.join(root, "ding/worker/adapter/learner_aggregator.py")
spec = importlib.util.spec_from_file_location("ding.worker.adapter.learner_aggregator", path)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
logging.getLogger("werkzeug").setLevel(logging.ERROR)

slave_port, master_port = int(sys.argv[1]), int(sys.argv[2])
learners = {}
for a in sys.argv[3:]:
    lid, hp = a.split("=", 1)
    h, p = hp.rsplit(":", 1)
    learners[lid] = [lid, h, int(p)]
cfg = EasyDict({"slave": {"host": "127.0.0.1", "port": slave_port},
                "master": {"host": "127.0.0.1", "port": master_port},
                "learner": learners})
agg = mod.LearnerAggregator(cfg)
agg.start()
print(json.dumps({"ready": True, "pid": os.getpid(), "world_size": agg._world_size}), flush=True)
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
while True:
    time.sleep(1)
