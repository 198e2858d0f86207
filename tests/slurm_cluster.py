"""A real SLURM cluster on this machine for the tests: munged, one slurmctld, two slurmd.

Debian's `slurm-wlm` and `munge` (`make test` installs them). Everything lives in one
directory: the munge key and socket, slurm.conf, state, spools, logs and pid files; the
daemons run as root and are stopped at the end. The two nodes are two `slurmd -N` on this
host with their own ports, as slurm.conf's NodeHostname/Port allow. Clients find the cluster
through SLURM_CONF.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

NEEDED = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "scancel", "squeue")
NODES = ("node1", "node2")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, root: Path, partition: str = "bench"):
        self.root, self.partition = root, partition
        self.conf = root / "slurm.conf"
        self.munge_socket = root / "munge" / "munge.socket"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.procs: list[str] = []

    @staticmethod
    def missing() -> list[str]:
        return [b for b in NEEDED if shutil.which(b) is None]

    def start(self) -> None:
        (self.root / "munge").mkdir(parents=True)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._daemon(["munged", "--force", f"--key-file={key}", f"--socket={self.munge_socket}",
                      f"--pid-file={self.root / 'munge' / 'munged.pid'}", f"--log-file={self.root / 'munge' / 'munged.log'}",
                      f"--seed-file={self.root / 'munge' / 'munged.seed'}"])
        host = socket.gethostname()
        ctl, ports = _free_port(), [_free_port() for _ in NODES]
        cpus = os.cpu_count() or 1
        for d in ("state", "spool"):
            (self.root / d).mkdir()
        nodes = "\n".join(f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={p} CPUs={cpus} State=UNKNOWN"
                          for n, p in zip(NODES, ports))
        self.conf.write_text(f"""\
ClusterName=bench
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctl}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=20
InactiveLimit=0
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}/%n
SlurmctldPidFile={self.root / 'slurmctld.pid'}
SlurmdPidFile={self.root / 'slurmd-%n.pid'}
SlurmctldLogFile={self.root / 'slurmctld.log'}
SlurmdLogFile={self.root / 'slurmd-%n.log'}
{nodes}
PartitionName={self.partition} Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
""")
        self._daemon(["slurmctld", "-f", str(self.conf)])
        for n in NODES:
            (self.root / "spool" / n).mkdir()
            self._daemon(["slurmd", "-f", str(self.conf), "-N", n])
        self._wait_idle()

    def _daemon(self, argv: list[str]) -> None:
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} did not start: {r.stderr.strip() or r.stdout.strip()}\n"
                               f"{self.logs()}")
        self.procs.append(argv[0])

    def _wait_idle(self, timeout: float = 90) -> None:
        t0 = time.monotonic()
        last = ""
        while time.monotonic() - t0 < timeout:
            r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=self.env, capture_output=True, text=True)
            last = r.stdout + r.stderr
            states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
            if all(states.get(n) == "idle" for n in NODES):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the SLURM nodes never became idle: {last}\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for f in sorted(self.root.glob("*.log")) + sorted((self.root / "munge").glob("*.log")):
            out.append(f"--- {f.name}\n" + f.read_text(errors="replace")[-2000:])
        return "\n".join(out)

    def site_file(self, path: Path, python: str, max_jobs: int = 1) -> Path:
        path.write_text(f'partition = "{self.partition}"\npython = "{python}"\nmax_jobs = {max_jobs}\n'
                        'poll_seconds = 1.0\n')
        return path

    def stop(self) -> None:
        subprocess.run(["scancel", "--full", "--partition", self.partition], env=self.env, capture_output=True)
        pids = [self.root / f"slurmd-{n}.pid" for n in NODES] + [self.root / "slurmctld.pid",
                                                                 self.root / "munge" / "munged.pid"]
        for pidfile in pids:
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        time.sleep(1)
