"""Several Ray nodes on this one machine, for tests of a run placed across nodes.

A ``ray.cluster_utils.Cluster`` (a head and worker nodes, each its own raylet) owned by a child process, apart
from the suite's own Ray head: its nodes declare logical GPUs (Ray schedules by declared resources) and CPU
processes stand in for them (trainer/ranks.py CPU_STANDS_IN_FOR_GPUS). The test adds and removes nodes through
the child's standard input, one JSON command a line, and starts the trainer with RAY_ADDRESS set to the
cluster's, as a Ray job's entrypoint finds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_OWNER = r"""
import json, sys
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={
    "num_cpus": 1, "num_gpus": 0, "include_dashboard": False, "object_store_memory": 100 * 1024 * 1024,
    "temp_dir": sys.argv[1]})
nodes = {}
print(json.dumps({"address": cluster.address}), flush=True)
for line in sys.stdin:
    command = json.loads(line)
    if command["do"] == "add":
        node = cluster.add_node(num_cpus=command["cpus"], num_gpus=command["gpus"],
                                object_store_memory=100 * 1024 * 1024)
        cluster.wait_for_nodes()
        nodes[node.node_id] = node
        print(json.dumps({"node_id": node.node_id}), flush=True)
    elif command["do"] == "remove":
        cluster.remove_node(nodes.pop(command["node_id"]))
        print(json.dumps({"removed": command["node_id"]}), flush=True)
cluster.shutdown()
"""


class RayNodes:
    """The child process owning the cluster; ``add`` and ``remove`` nodes, ``address`` for RAY_ADDRESS."""

    def __init__(self):
        # Short: Ray's socket paths must fit 107 bytes.
        self.temp_dir = tempfile.mkdtemp(prefix="rn-", dir="/tmp")
        # Little of the suite's environment, as tests/deploy's two-node cluster: its services' settings are none of
        # these nodes' business. A rank actor gets the trainer's settings from its driver (trainer/loop/ray_driver.py).
        environment = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
                       "HOME": os.environ.get("HOME", "/root"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        self.owner = subprocess.Popen([sys.executable, "-c", _OWNER, self.temp_dir],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True, env=environment)
        self.address = self._answer()["address"]

    def _answer(self) -> dict:
        line = self.owner.stdout.readline()
        if not line:
            raise RuntimeError(f"the Ray cluster's owner exited with code {self.owner.wait(timeout=30)}")
        return json.loads(line)

    def _tell(self, **command) -> dict:
        self.owner.stdin.write(json.dumps(command) + "\n")
        self.owner.stdin.flush()
        return self._answer()

    def add(self, *, gpus: int, cpus: int) -> str:
        return self._tell(do="add", gpus=gpus, cpus=cpus)["node_id"]

    def remove(self, node_id: str) -> None:
        self._tell(do="remove", node_id=node_id)

    def environment(self) -> dict[str, str]:
        """The trainer's environment: this cluster's address, as a Ray job's entrypoint is given its cluster's."""
        return {**os.environ, "RAY_ADDRESS": self.address}

    def actors(self) -> list:
        """Every actor the cluster's GCS knows of, alive or dead, read from a short-lived driver (Ray's actor table:
        ``ray.util.state`` needs a dashboard, which these nodes do without)."""
        script = ("import json, ray\nfrom ray._private.state import actors\n"
                  f"ray.init(address={self.address!r}, log_to_driver=False)\n"
                  "print(json.dumps([{'name': a['Name'], 'class_name': a['ActorClassName'], 'state': a['State'],"
                  " 'node_id': a['Address']['NodeID'], 'pid': a.get('Pid')} for a in actors().values()]))\n")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              env=self.environment())
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def close(self) -> None:
        self.owner.stdin.close()
        try:
            self.owner.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.owner.kill()
            self.owner.wait()
        subprocess.run(["rm", "-rf", self.temp_dir], check=False)


def smoke_command(folder: Path, lean_url: str, *settings: str, resume: bool = False, attempt: int = 1) -> list[str]:
    """``python -m trainer run`` on the cpu-smoke preset as a person (or a Ray job) starts it: no torchrun."""
    from trainer.sft.smoke_model import write_smoke_promptset

    folder.mkdir(parents=True, exist_ok=True)
    promptset = folder / "smoke.jsonl"
    if not promptset.exists():
        write_smoke_promptset(promptset)
    command = [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
               "--output", str(folder / "run"), "--lean-url", lean_url, "--attempt", str(attempt)]
    if resume:
        command.append("--resume")
    for setting in settings:
        command += ["--set", setting]
    return command


def start_driver(command: list[str], environment: dict[str, str]) -> subprocess.Popen:
    """The trainer's command as its own process group, as Ray's job supervisor starts an entrypoint."""
    from deploy.services import REPO_DIR

    return subprocess.Popen(command, cwd=REPO_DIR, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def read_events(driver: subprocess.Popen, on_event=lambda event: None, timeout_s: float = 600) -> list[dict]:
    """Every event the driver prints, ``on_event`` called with each as it comes; waits for the driver to exit."""
    import time

    events = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            line = driver.stdout.readline()
            if not line:
                break
            events.append(json.loads(line))
            on_event(events[-1])
        driver.wait(120)
    finally:
        if driver.poll() is None:
            driver.kill()
    return events


def actor_states_of(nodes: RayNodes, placement_group: str) -> dict[str, str]:
    """The run's actors (named after its placement group) and their states, as the cluster's GCS knows them."""
    return {actor["name"]: actor["state"] for actor in nodes.actors() if actor["name"].startswith(placement_group)}


class JoinedNode:
    """A worker node joined to a running Ray head (the suite's, which the platform submits its jobs to), as an
    operator adds one: ``ray start --address=<the head's GCS> --block`` as a child process, in its own process
    group with its own temp folder and ports. Its logical GPUs are Ray's bookkeeping; CPU processes stand in for
    them (trainer/ranks.py CPU_STANDS_IN_FOR_GPUS). ``remove`` ends its raylet and everything it started, as a
    node lost to its cluster: the head marks it dead and its resources leave the cluster's totals."""

    def __init__(self, head, *, gpus: int, cpus: int):
        from deploy.services import free_port

        self.head = head
        before = set(head_alive_node_ids(head))
        # Short: Ray's socket paths must fit 107 bytes.
        self.temp_dir = tempfile.mkdtemp(prefix="rw-", dir="/tmp")
        ports = {option: free_port() for option in (
            "node-manager-port", "object-manager-port", "metrics-export-port", "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port", "runtime-env-agent-port")}
        command = [str(Path(sys.executable).with_name("ray")), "start", "--block", f"--address=127.0.0.1:{head.port}",
                   "--node-ip-address=127.0.0.1", f"--num-gpus={gpus}", f"--num-cpus={cpus}",
                   f"--object-store-memory={100 * 1024 * 1024}", f"--temp-dir={self.temp_dir}",
                   "--disable-usage-stats", *(f"--{option}={port}" for option, port in ports.items())]
        self.log = open(Path(self.temp_dir) / "ray-start.log", "w")
        # The head's own environment (the repository on the workers' path, Ray's authentication mode as the head's).
        self.process = subprocess.Popen(command, env=head.environment(), stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.node_id = self._wait_for_a_new_node(before)

    def _wait_for_a_new_node(self, before: set[str], timeout_s: float = 120) -> str:
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"`ray start` of a worker node exited with code {self.process.returncode}:\n"
                                   f"{(Path(self.temp_dir) / 'ray-start.log').read_text()[-3000:]}")
            new = set(head_alive_node_ids(self.head)) - before
            if new:
                [node_id] = new
                return node_id
            time.sleep(0.5)
        self.remove()
        raise RuntimeError(f"the worker node did not join the Ray head at {self.head.address} within {timeout_s} s")

    def remove(self) -> None:
        """SIGTERM to the node's process group (its raylet tells the head it is going), SIGKILL if it lingers."""
        import signal

        if self.process.poll() is None:
            for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.log.close()
        subprocess.run(["rm", "-rf", self.temp_dir], check=False)


def head_alive_node_ids(head) -> list[str]:
    """The ids of the head's live nodes, from its dashboard's state API."""
    import urllib.request

    url = f"{head.address}/api/v0/nodes?filter_keys=state&filter_predicates=%3D&filter_values=ALIVE&limit=1000"
    with urllib.request.urlopen(url, timeout=30) as response:
        return [node["node_id"] for node in json.load(response)["data"]["result"]["result"]]
