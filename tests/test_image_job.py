#!/usr/bin/env python3
"""The mock DIJob of deploy/k8s/ played on one machine, every program from
the image's root file system under chroot as user 10001, the mock operator
in the part of DI-orchestrator's server:

1. the aggregator with no flag but those of deploy/k8s/aggregatorconfig.yaml
   and DI-orchestrator's environment (KUBERNETES_POD_NAMESPACE,
   KUBERNETES_POD_NAME, KUBERNETES_SERVER_URL as host:port, AGGREGATOR_PORT;
   KUBERNETES_AGGREGATOR_URL points learners at 127.0.0.1, as the pod's
   Service name would in a cluster) listens on all interfaces, says so,
   learns its learners from the server and joins them;
2. mock_learner with the learner template's args (the $(VARS) as
   DI-orchestrator sets them; --host 127.0.0.1 and a free control port in
   place of 0.0.0.0 and 22390, so that parallel tests do not collide);
3. the coordinator's dilearn-mock-job-coordinator asks the server for a
   learner of 4 GPUs (POST /v1alpha1/replicas, checked on the journal), then,
   given this aggregator, waits for its 4 learners and runs mock_coordinator
   with the job's script from the ConfigMap: every expectation holds (the
   slow learner waited for, the failing learner's learn failed and named);
4. SIGTERM: the aggregator exits 0.

usage: test_image_job.py SOURCE_DIR IMAGE_DIR
"""
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

src, img = sys.argv[1], sys.argv[2]
root = os.path.join(img, "rootfs")
CHROOT = shutil.which("chroot") or shutil.which("chroot", path="/usr/sbin:/sbin")
if os.geteuid() != 0 or not CHROOT:
    print("SKIP: entering the image's root file system needs root and chroot")
    sys.exit(77)
try:
    import yaml
except ImportError:
    print("SKIP: needs python3-yaml")
    sys.exit(77)
if not os.access(os.path.join(root, "usr/bin/aggregator"), os.X_OK):
    print(f"FAIL: no image at {img}: the fixture test image_build did not build it")
    sys.exit(1)

NS, JOB = "team-a", "dilearn-mock"
AGG_POD = f"{JOB}-aggregator-q4x7z"
procs = []
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        fails += 1
    return cond


def free_ports(n, host):
    """n consecutive free TCP ports on host (bounded tries)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind((host, 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        socks = []
        try:
            for p in range(base, base + n):
                t = socket.socket()
                socks.append(t)
                t.bind((host, p))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no free ports")


def in_image(argv, env, log):
    cmd = [CHROOT, "--userspec=10001:10001", root] + argv
    p = subprocess.Popen(cmd, env=dict(env, PATH="/usr/bin:/bin"), stdout=subprocess.PIPE, stderr=log, text=True)
    procs.append(p)
    return p


def ready_line(p, what, timeout=20):
    """The first stdout line of p, which must be a {"ready": true} JSON."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([p.stdout], [], [], 0.2)
        if r:
            line = p.stdout.readline()
            if line:
                return json.loads(line)
        if p.poll() is not None:
            break
    raise RuntimeError(f"{what} gave no ready line in {timeout} s (exit {p.poll()})")


def listens_on_any(port):
    """True if something listens on 0.0.0.0:port (from /proc/net/tcp)."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and local == f"00000000:{port:04X}":
                return True
    return False


with open(os.path.join(src, "deploy/k8s/mock-dijob.yaml")) as f:
    docs = {d["kind"]: d for d in yaml.safe_load_all(f) if d}
with open(os.path.join(src, "deploy/k8s/aggregatorconfig.yaml")) as f:
    agconfig = yaml.safe_load(f)
job = docs["DIJob"]["spec"]
learner_c = job["learner"]["template"]["spec"]["containers"][0]
coord_c = job["coordinator"]["template"]["spec"]["containers"][0]
agg_c = agconfig["spec"]["aggregator"]["template"]["spec"]["containers"][0]
script = docs["ConfigMap"]["data"]["script.json"]

work = tempfile.mkdtemp(prefix="dilearn-job-", dir=os.path.join(root, "tmp"))
os.chmod(work, 0o755)
logs = {n: open(os.path.join(work, n + ".log"), "w+") for n in ("operator", "learners", "aggregator", "coordinator")}
try:
    gpus = int(coord_c["args"][coord_c["args"].index("--gpus") + 1])
    agg_port = free_ports(2, "0.0.0.0")
    learner_port = free_ports(gpus, "127.0.0.1")
    # (in a cluster: <ddp-learner pod>.<namespace>:port)
    learners = ",".join(f"127.0.0.1:{learner_port + i}" for i in range(gpus))

    # DI-orchestrator's server: the mock operator, knowing the coordinator
    # (for the POST) and the aggregator's learners (for its GET).
    op = in_image(["/usr/bin/mock_operator", "--learners", f"{NS}/{AGG_POD}={learners}",
                   "--learners", f"{NS}/{JOB}-coordinator=", "--seed", "7"], {}, logs["operator"])
    opr = ready_line(op, "mock_operator")
    server = f"127.0.0.1:{opr['port']}"  # DI-orchestrator's form: host:port

    # The learner pod: the template's command and args, with the environment
    # DI-orchestrator gives a ddp-learner pod of 4 GPUs.
    learner_env = {"LEARNER_PORT": str(learner_port), "LOCAL_WORLD_SIZE": str(gpus), "WORLD_SIZE": str(gpus),
                   "START_RANK": "0", "KUBERNETES_POD_NAMESPACE": NS, "KUBERNETES_SERVER_URL": server,
                   "KUBERNETES_POD_NAME": f"{JOB}-ddp-learner-a1b2c"}
    args = [re.sub(r"\$\((\w+)\)", lambda m: learner_env[m.group(1)], a) for a in learner_c["args"]]
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--control-port") + 1] = "0"
    lp = in_image(learner_c["command"] + args, learner_env, logs["learners"])
    lr = ready_line(lp, "mock_learner")
    check(len(lr["learners"]) == gpus and lr["learners"][0]["port"] == learner_port,
          f"mock_learner with the learner template's args: {gpus} learners from port {learner_port}")

    # The aggregator: the AggregatorConfig's args and DI-orchestrator's
    # environment; nothing else.
    agg_env = {"KUBERNETES_POD_NAMESPACE": NS, "KUBERNETES_POD_NAME": AGG_POD, "KUBERNETES_SERVER_URL": server,
               "AGGREGATOR_PORT": str(agg_port), "KUBERNETES_AGGREGATOR_URL": f"127.0.0.1:{agg_port}"}
    ap = in_image(["/usr/bin/aggregator"] + agg_c.get("args", []), agg_env, logs["aggregator"])
    ar = ready_line(ap, "aggregator", timeout=60)
    check(ar["slave_port"] == agg_port and ar["master_port"] == agg_port + 1 and len(ar["joined"]) == gpus,
          f"aggregator with no flags: ports {ar['slave_port']}/{ar['master_port']} from AGGREGATOR_PORT, "
          f"joined {len(ar['joined'])} learners the server listed")
    check(listens_on_any(agg_port) and listens_on_any(agg_port + 1), "it listens on 0.0.0.0 on both ports")
    logs["aggregator"].flush()
    with open(logs["aggregator"].name) as f:
        alog = f.read()
    check("listening on all interfaces" in alog and f"{NS}/{AGG_POD}" in alog
          and f"http://127.0.0.1:{agg_port + 1}" in alog,
          "its log says it is in DI-orchestrator's pod, on all interfaces, and what learners are told")

    # The coordinator: first what it asks the server for (dry run), then the
    # run against this aggregator.
    coord_env = {"KUBERNETES_POD_NAMESPACE": NS, "KUBERNETES_POD_NAME": f"{JOB}-coordinator",
                 "KUBERNETES_SERVER_URL": server, "COORDINATOR_PORT": "22273"}
    dry = subprocess.run([CHROOT, "--userspec=10001:10001", root] + coord_c["command"] + ["--gpus", str(gpus),
                         "--dry-run"], env=dict(coord_env, PATH="/usr/bin:/bin"), capture_output=True, text=True,
                         timeout=60)
    with urllib.request.urlopen(f"http://127.0.0.1:{opr['control_port']}/control/journal", timeout=10) as r:
        journal = r.read().decode()
    check(dry.returncode == 0 and re.fullmatch(rf"{JOB}-learner-\w+\.{NS}:\d+\n", dry.stdout) is not None
          and '"gpus":"4"' in journal.replace(" ", "") and f"{JOB}-coordinator" in journal,
          f"dilearn-mock-job-coordinator POSTs a 4-GPU learner to the server and reads its address: "
          f"{dry.stdout.strip()!r}" + ("" if dry.returncode == 0 else f" {dry.stderr.strip()[-300:]}"))
    lost = subprocess.run([CHROOT, "--userspec=10001:10001", root] + coord_c["command"] + ["--dry-run", "--wait-s", "2"],
                          env=dict(coord_env, KUBERNETES_POD_NAME="no-such-coordinator", PATH="/usr/bin:/bin"),
                          capture_output=True, text=True, timeout=60)
    check(lost.returncode == 2 and "answered 404 for 2 s" in lost.stderr,
          f"a job the server does not know: asked again until --wait-s, then exit 2: {lost.stderr.strip()[-120:]!r}")
    script_path = os.path.join(work, "script.json")
    with open(script_path, "w") as f:
        f.write(script)
    cargs = list(coord_c["args"])
    cargs[cargs.index("--script") + 1] = script_path[len(root):]
    cargs[cargs.index("--wait-s") + 1] = "60"
    cargs = ["--aggregator", f"127.0.0.1:{agg_port}"] + cargs + ["--port", "0", "--host", "127.0.0.1"]
    cp = subprocess.run([CHROOT, "--userspec=10001:10001", root] + coord_c["command"] + cargs,
                        env=dict(coord_env, PATH="/usr/bin:/bin"), stdout=subprocess.PIPE, stderr=logs["coordinator"],
                        text=True, timeout=180)
    summary = json.loads(cp.stdout.strip().splitlines()[-1]) if cp.stdout.strip() else {}
    statuses = [t.get("status") for t in summary.get("tasks", [])]
    check(cp.returncode == 0 and summary.get("ok") is True,
          f"the job's coordinator script held (exit {cp.returncode}): {statuses} {summary.get('failures')}")
    check(statuses.count("failed") == 1 and len(statuses) == len(json.loads(script)["tasks"]),
          "every task of the script ran; learner 3's learn failed as the script expects")
    lat = summary["tasks"][3].get("latency_ms", 0) if len(statuses) > 3 else 0
    check(lat >= 1500, f"the first learn waited for the slow learner 1 (delay fault of 1500 ms): {lat} ms")

    # SIGTERM, as the kubelet sends it
    ap.send_signal(signal.SIGTERM)
    check(ap.wait(timeout=15) == 0, "the aggregator exits 0 on SIGTERM")
finally:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if fails:
        for n, f in logs.items():
            f.flush()
            f.seek(0)
            print(f"---- {n} log (last 30 lines)")
            print("".join(f.readlines()[-30:]))
    for f in logs.values():
        f.close()
    shutil.rmtree(work, ignore_errors=True)

print(f"{fails} failure(s)")
sys.exit(1 if fails else 0)
