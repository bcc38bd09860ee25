#!/usr/bin/python3
"""Interoperation with DI-engine's own Python master and slave (Flask and
requests), loaded at run time from the checkout in DI_ROOT by
reference/di_load.py (no DI-engine code in this repository). Everything is
on loopback: DI-engine's get_host_ip is pinned to 127.0.0.1, and every port
is a free one picked at run time.

usage: test_di_interop.py BUILD_DIR CHECK
  aggregator  DI-engine's test_learner_aggregator sequence against our
              aggregator: four DI-engine slaves with that test's learner
              task handling, a DI-engine master as the coordinator
  master      a DI-engine master drives our mock_learner: connect, tasks,
              a failing task, heartbeats held, disconnect
  slave       our mock_coordinator drives a DI-engine slave: the default
              run, then a script with a failing task (and a script whose
              expectation is wrong, which must be reported as failed)

Exit 0 when every check held, 1 with "FAIL: ..." when one did not, 77
(skipped, with the reason) without DI_ROOT or Debian's python3-flask,
python3-requests, python3-easydict, python3-urlobject, python3-yaml."""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
import di_load  # noqa: E402

LOOP = "127.0.0.1"
WATCHDOG_S = 100  # below the ctest TIMEOUT: a hang is a failure that says where


class Failed(Exception):
    pass


def check(cond, what, *detail):
    if not cond:
        raise Failed(what + ("" if not detail else ": " + " ".join(repr(d) for d in detail)))
    print("ok: " + what, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind((LOOP, 0))
        return s.getsockname()[1]


class Procs:
    """Processes of ours started by a check; all are stopped at the end, and
    their stderr is shown when a check failed."""

    def __init__(self, out):
        self.out = out
        self.procs = []

    def start(self, name, argv, rc=0):
        """rc: the exit status expected (after SIGTERM for a server of ours:
        0, so that a sanitizer's report at exit fails the check)."""
        err = open(os.path.join(self.out, name + ".err"), "w")
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
        self.procs.append((name, p, err, rc))
        return p

    def ready(self, p, name, seconds=15):
        """The first stdout line of p, a JSON object with "ready": true."""
        got = []
        t = threading.Thread(target=lambda: got.append(p.stdout.readline()), daemon=True)
        t.start()
        t.join(seconds)
        if not got or not got[0]:
            raise Failed("%s printed no ready line within %d s (exit %s)" % (name, seconds, p.poll()))
        line = json.loads(got[0])
        if line.get("ready") is not True:
            raise Failed("%s: unexpected first line %r" % (name, got[0]))
        return line

    def stop(self, show):
        bad = []
        for name, p, err, rc in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            err.close()
            if p.returncode != rc:
                bad.append("%s exited %s (expected %d)" % (name, p.returncode, rc))
            if show or p.returncode != rc:
                with open(err.name) as f:
                    tail = f.read()[-3000:]
                print("== %s (exit %s) stderr:\n%s" % (name, p.returncode, tail), flush=True)
        self.procs = []
        if bad and not show:
            raise Failed("; ".join(bad))


def close_reference(obj):
    """close() of a DI-engine master or slave. With Werkzeug 2.1 or later its
    own DELETE /shutdown answers 500 (werkzeug.server.shutdown is gone) and
    close() raises on decoding that page: the reference's flaw, noted, not
    judged; its threads are left to os._exit."""
    import requests
    try:
        obj.close()
    except (ValueError, requests.RequestException) as e:
        print("note: %s.close(): %s: %s (DI-engine's /shutdown under Werkzeug >= 2.1)"
              % (type(obj).__name__, type(e).__name__, e), flush=True)


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


# --- aggregator: DI-engine's test_learner_aggregator against ours ---------

def learner_slave_class(ding):
    """The learners of DI-engine's test_learner_aggregator (its LearnerSlave:
    same task handling, numpy's draws replaced by random's), recording every
    task they are sent."""

    class LearnerSlave(ding.Slave):
        def __init__(self, id, *args, **kwargs):
            super().__init__(*args, **kwargs)
            rng = random.Random(id)
            # The test gives every learner 32; distinct sizes also check
            # that each slice follows its own learner's demand.
            self.batch_size = 32 + id
            self.learner_step = rng.randrange(100 * id, 100 * id + 100)
            self.buffer_id = "buffer_" + str(rng.randrange(10 * id, 10 * id + 10))
            self.task_id = "task_" + str(rng.randrange(10 * id, 10 * id + 10))
            self.learner_done = rng.random() < 0.5
            self.seen = []

        def _process_task(self, task):
            self.seen.append(dict(task))
            name = task['name']
            if name == 'resource':
                return {'gpu': 1}
            elif name == 'learner_start_task':
                return {'message': 'learner task has started'}
            elif name == 'learner_get_data_task':
                return {'batch_size': self.batch_size}
            elif name == 'learner_learn_task':
                return {
                    'learner_step': self.learner_step,
                    'buffer_id': self.buffer_id,
                    'task_id': self.task_id,
                    'learner_done': self.learner_done,
                    'a_list': [1, 2],
                }
            raise ding.TaskFail(result={'message': 'task name error'},
                                message='illegal learner task <{}>'.format(name))

    return LearnerSlave


def run_task(conn, data):
    task = conn.new_task(data)
    task.start().join()
    return task


def check_aggregator(build, ding, procs):
    from ding.interaction.master.task import TaskStatus
    LearnerSlave = learner_slave_class(ding)
    ports = [free_port() for _ in range(4)]
    learners = [LearnerSlave(i, LOOP, p) for i, p in enumerate(ports)]
    for s in learners:
        s.start()
    try:
        argv = [os.path.join(build, "aggregator", "aggregator"), "--slave-port", "0", "--master-port", "0",
                "--log-level", "warn"]
        for i, p in enumerate(ports):
            argv += ["--learner", "learner%d=%s:%d" % (i, LOOP, p)]
        agg = procs.start("aggregator", argv)
        ready = procs.ready(agg, "aggregator", 30)
        check(sorted(ready.get("joined", [])) == ["learner%d" % i for i in range(4)],
              "our aggregator joined the four DI-engine learners", ready)
        master = ding.Master(LOOP, free_port())
        master.start()
        try:
            check(master.ping(), "the DI-engine master answers its own ping")
            with master.new_connection('with_la_slave', LOOP, ready["slave_port"]) as conn:
                check(conn.is_connected and 'with_la_slave' in master, "the DI-engine master connected to ours")

                t = run_task(conn, {'name': 'resource'})
                check(t.status == TaskStatus.COMPLETED and t.result == {'gpu': 4}, "resource == {'gpu': 4}",
                      t.status, t.result)

                t = run_task(conn, {'name': 'learner_start_task', 'task_info': {}})
                check(t.status == TaskStatus.COMPLETED and t.result == {'message': 'learner task has started'},
                      "learner_start_task completed", t.status, t.result)

                t = run_task(conn, {'name': 'learner_get_data_task', 'task_info': {}})
                total = sum(s.batch_size for s in learners)
                check(t.status == TaskStatus.COMPLETED and t.result.get('batch_size') == total,
                      "get-data answers the sum of the batch sizes (%d)" % total, t.status, t.result)

                data = list(range(total))
                t = run_task(conn, {'name': 'learner_learn_task', 'data': data})
                first = learners[0]
                check(t.status == TaskStatus.COMPLETED, "learner_learn_task completed", t.status, t.result)
                want = {'learner_step': first.learner_step, 'buffer_id': first.buffer_id, 'task_id': first.task_id,
                        'learner_done': first.learner_done, 'a_list': [1, 2] * 4}
                check(t.result == want, "learn merged: the first learner's ids, a_list joined", t.result, want)

                t = run_task(conn, {'name': 'fake_task', 'task_info': {}})
                check(t.status == TaskStatus.FAILED and t.result == {'message': 'task name error'},
                      "an unknown task fails with {'message': 'task name error'}", t.status, t.result)

                t = run_task(conn, {'name': 'resource'})
                check(t.result == {'gpu': len(learners)}, "resource still counts every learner", t.result)
            check(not conn.is_connected and 'with_la_slave' not in master, "the DI-engine master disconnected")
        finally:
            close_reference(master)
        start = 0
        for i, s in enumerate(learners):
            names = [x['name'] for x in s.seen if x['name'] != 'resource']
            check(names == ['learner_start_task', 'learner_get_data_task', 'learner_learn_task'],
                  "learner%d was sent start, get-data and learn once each (the unknown task never)" % i, names)
            start_task = next(x for x in s.seen if x['name'] == 'learner_start_task')
            check(start_task.get('task_info') == {}, "learner%d got the start task's task_info" % i, start_task)
            learn = next(x for x in s.seen if x['name'] == 'learner_learn_task')
            check(learn.get('data') == data[start:start + s.batch_size],
                  "learner%d got items [%d, %d)" % (i, start, start + s.batch_size), learn.get('data'))
            start += s.batch_size
        procs.stop(False)
        check(True, "our aggregator exited 0 on SIGTERM")
    finally:
        for s in learners:
            close_reference(s)


# --- master: a DI-engine master drives mock_learner ------------------------

def check_master(build, ding, procs):
    from ding.interaction.master.task import TaskStatus
    dump = os.path.join(procs.out, "dump.jsonl")
    ml = procs.start("mock_learner", [
        os.path.join(build, "mock_learner", "mock_learner"), "--count", "1", "--batch-size", "8",
        "--heartbeat-span-ms", "200", "--dump", dump, "--log-level", "warn",
        "--fault", '{"kind": "fail", "task": "learn", "at": 2}'])
    ready = procs.ready(ml, "mock_learner")
    port, control = ready["learners"][0]["port"], ready["control_port"]

    def state():
        s = get_json("http://%s:%d/state" % (LOOP, control))
        return s["learners"][0] if isinstance(s, dict) and "learners" in s else s[0]

    # A tolerance of 1 s checked every 0.1 s: heartbeats every 0.2 s keep the
    # connection, and the master drops it when they stop.
    master = ding.Master(LOOP, free_port(), heartbeat_tolerance=1.0, heartbeat_check_span=0.1)
    master.start()
    try:
        conn = master.new_connection('learner0', LOOP, port)
        conn.connect()
        check(conn.is_connected and 'learner0' in master, "the DI-engine master connected to mock_learner")
        check(state()["connected"], "mock_learner sees its master", state())

        t = run_task(conn, {'name': 'resource'})
        check(t.status == TaskStatus.COMPLETED and t.result == {'gpu': 1}, "resource == {'gpu': 1}", t.result)
        info = {'task_id': 'task_7', 'buffer_id': 'buffer_7'}
        t = run_task(conn, {'name': 'learner_start_task', 'task_info': info})
        check(t.status == TaskStatus.COMPLETED and t.result == {'message': 'learner task has started'},
              "learner_start_task completed", t.status, t.result)
        t = run_task(conn, {'name': 'learner_get_data_task'})
        check(t.status == TaskStatus.COMPLETED and t.result.get('batch_size') == 8
              and t.result.get('task_id') == 'task_7' and t.result.get('buffer_id') == 'buffer_7',
              "get-data: batch_size 8 and the start task's ids", t.result)
        items = [{'obs': i, 'pad': 'x' * 200000} for i in range(8)]  # 1.6 MB: past libcurl's and MHD's small-body paths
        t = run_task(conn, {'name': 'learner_learn_task', 'data': items})
        check(t.status == TaskStatus.COMPLETED and isinstance(t.result.get('info'), dict)
              and t.result.get('task_id') == 'task_7', "learn completed with an info object", t.status, t.result)
        t = run_task(conn, {'name': 'learner_learn_task', 'data': items})
        check(t.status == TaskStatus.FAILED and t.result == {'message': 'injected failure'},
              "the injected failure of the second learn reaches the master", t.status, t.result)
        t = run_task(conn, {'name': 'fake_task'})
        check(t.status == TaskStatus.FAILED and t.result == {'message': 'task name error'},
              "an unknown task fails with {'message': 'task name error'}", t.status, t.result)

        hb0 = state()["heartbeats"]
        time.sleep(2.5)  # the thing under test is a span of time: heartbeats across it
        st = state()
        check(conn.is_connected and 'learner0' in master,
              "the connection held 2.5 s on heartbeats (the master's tolerance is 1 s)")
        check(st["heartbeats"] - hb0 >= 5, "mock_learner sent heartbeats every 0.2 s", hb0, st["heartbeats"])
        last = master._Master__slave_last_heartbeat.get('learner0')
        check(last is not None and time.time() - last < 1.0, "the master received them", last)

        conn.disconnect()
        check(not conn.is_connected and 'learner0' not in master, "the DI-engine master disconnected")
        deadline = time.monotonic() + 5
        while state()["connected"] and time.monotonic() < deadline:
            time.sleep(0.05)
        st = state()
        check(not st["connected"], "mock_learner forgot its master", st)
        check(st["tasks"].get("learner_learn_task") == 2 and st["learn_items"] == 16,
              "mock_learner counted two learns of 8 items", st["tasks"], st["learn_items"])
    finally:
        close_reference(master)
    with open(dump) as f:
        rows = [json.loads(x) for x in f if x.strip()]
    for n in (1, 2):
        got = [json.loads(r["item"]) if isinstance(r["item"], str) else r["item"]
               for r in rows if r.get("learn") == n and "index" in r]
        check(got == items, "mock_learner received learn %d's 8 items intact" % n, got)
    reports = [(r["task"], r["report"]) for r in rows if "report" in r]
    check(reports.count(("learner_learn_task", "complete")) == 1 and
          reports.count(("learner_learn_task", "fail")) == 1, "one learn reported complete, one fail", reports)
    procs.stop(False)
    check(True, "mock_learner exited 0 on SIGTERM")


# --- slave: mock_coordinator drives a DI-engine slave -----------------------

def coordinator(build, procs, name, port, args, rc=0):
    p = procs.start(name, [os.path.join(build, "mock_coordinator", "mock_coordinator"),
                           "--connect", "%s:%d" % (LOOP, port), "--log-level", "warn"] + args, rc)
    out, _ = p.communicate(timeout=60)
    lines = [x for x in out.splitlines() if x.strip()]
    if not lines:
        raise Failed("%s printed no summary (exit %s)" % (name, p.returncode))
    return p.returncode, json.loads(lines[-1])


def check_slave(build, ding, procs):
    class Learner(ding.Slave):
        """A DI-engine slave answering as DI-engine's learner does
        (flask_fs_learner's task names and result keys), recording what its
        master sends."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.seen, self.connects, self.disconnects = [], [], 0
            self.info = {}

        def _before_connection(self, data):
            self.connects.append(dict(data))

        def _before_disconnection(self, data):
            self.disconnects += 1

        def _process_task(self, task):
            self.seen.append(dict(task))
            name = task['name']
            if name == 'resource':
                return {'gpu': 1}
            if name == 'learner_start_task':
                self.info = task['task_info']
                return {'message': 'learner task has started'}
            if name == 'learner_get_data_task':
                return {'batch_size': 6, 'cur_learner_iter': len(self.seen),
                        'buffer_id': self.info.get('buffer_id'), 'task_id': self.info.get('task_id')}
            if name == 'learner_learn_task':
                return {'info': {'learner_step': len(self.seen), 'items': len(task['data'])},
                        'buffer_id': self.info.get('buffer_id'), 'task_id': self.info.get('task_id')}
            if name == 'learner_close_task':
                return {'task_id': self.info.get('task_id'), 'buffer_id': self.info.get('buffer_id')}
            raise ding.TaskFail(result={'message': 'task name error'},
                                message='illegal learner task <{}>'.format(name))

    port = free_port()
    slave = Learner(LOOP, port, heartbeat_span=0.2)
    slave.start()
    try:
        # items of 250 kB: each learn body is 1.5 MB, past libcurl's small-body path
        rc, summary = coordinator(build, procs, "coordinator_run", port,
                                  ["--rounds", "3", "--expect-learners", "1", "--item-size", "250000"])
        check(rc == 0 and summary.get("ok") is True, "mock_coordinator's default run against a DI-engine slave",
              rc, summary.get("failures"))
        names = [t['name'] for t in slave.seen]
        want = ['resource', 'learner_start_task'] + ['learner_get_data_task', 'learner_learn_task'] * 3 + \
            ['learner_close_task']
        check(names == want, "the DI-engine slave was sent the run's tasks in order", names)
        learns = [t for t in slave.seen if t['name'] == 'learner_learn_task']
        check(all(isinstance(t.get('data'), list) and len(t['data']) == 6 for t in learns),
              "each learn carried the 6 items get-data asked for", [len(t.get('data') or []) for t in learns])
        check(isinstance(slave.seen[1].get('task_info'), dict), "the start task carried a task_info object",
              slave.seen[1])
        check(len(slave.connects) == 1 and slave.disconnects == 1, "one connect and one disconnect",
              slave.connects, slave.disconnects)

        script = os.path.join(procs.out, "script.json")
        with open(script, "w") as f:
            json.dump({"tasks": [
                {"name": "resource", "expect": {"fields": {"gpu": 1}}},
                {"name": "fake_task", "data": {"task_info": {}},
                 "expect": {"status": "failed", "message_contains": "task name error"}},
                {"name": "learner_get_data_task", "expect": {"fields": {"batch_size": 6}}},
                {"name": "learner_learn_task", "expect": {"fields": {"info.items": 6}}}]}, f)
        del slave.seen[:]
        rc, summary = coordinator(build, procs, "coordinator_script", port, ["--script", script])
        check(rc == 0 and summary.get("ok") is True, "a script with a failing task: every expectation held",
              rc, summary.get("failures"))
        statuses = [t.get("status") for t in summary.get("tasks", [])]
        check(statuses == ["completed", "failed", "completed", "completed"],
              "mock_coordinator saw the unknown task fail and the rest complete", statuses)
        check([t['name'] for t in slave.seen] ==
              ['resource', 'fake_task', 'learner_get_data_task', 'learner_learn_task'],
              "the DI-engine slave was sent the script's tasks", [t['name'] for t in slave.seen])
        check(len(slave.connects) == 2 and slave.disconnects == 2, "the second run connected and disconnected",
              len(slave.connects), slave.disconnects)

        with open(script, "w") as f:
            json.dump({"tasks": [{"name": "fake_task", "expect": {"status": "completed"}}]}, f)
        rc, summary = coordinator(build, procs, "coordinator_wrong", port, ["--script", script], 1)
        check(rc == 1 and summary.get("ok") is False and summary.get("failures"),
              "a wrong expectation is reported as failed (exit 1)", rc, summary.get("failures"))
        procs.stop(False)
    finally:
        close_reference(slave)


CHECKS = {"aggregator": check_aggregator, "master": check_master, "slave": check_slave}


def main(argv):
    if len(argv) != 3 or argv[2] not in CHECKS:
        print(__doc__, file=sys.stderr)
        return 2
    build, which = argv[1], argv[2]
    root = di_load.checkout()
    if root is None:
        print("skipped: set DI_ROOT to a DI-engine checkout (it has ding/interaction); got %r"
              % os.environ.get("DI_ROOT"))
        return 77
    missing = di_load.missing_modules()
    if missing:
        print("skipped: %s lacks %s (Debian: %s)"
              % (sys.executable, ", ".join(missing), " ".join("python3-" + m for m in missing)))
        return 77
    ding = di_load.load(root)
    out = tempfile.mkdtemp(prefix="di_interop_%s." % which)
    procs = Procs(out)

    def watchdog():
        print("FAIL: %s: no end within %d s (a hang); logs in %s" % (which, WATCHDOG_S, out), flush=True)
        procs.stop(True)
        os._exit(1)

    timer = threading.Timer(WATCHDOG_S, watchdog)
    timer.daemon = True
    timer.start()
    try:
        CHECKS[which](build, ding, procs)
    except (Failed, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        print("FAIL: %s: %s: %s" % (which, type(e).__name__, e), flush=True)
        procs.stop(True)
        os._exit(1)
    print("ok: %s: every check held" % which, flush=True)
    shutil.rmtree(out, ignore_errors=True)
    # DI-engine's Flask threads do not all end on close(): leave at once.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
