"""dask's TLS as `invoke deploy --target k8s --tls-secret` writes it, run for real.

No cluster here: the plain manifests' scheduler and worker run as containers of the cpu-debian12
image with exactly their args and env, the Secret's three files mounted where the pods mount them
(root:0, 0440, read by the pod's uid through group 0, as kubelet projects a Secret with fsGroup 0),
made by the openssl commands docs/deploy.md gives a site. A client holding the site CA's
certificate runs a job; what a pod that got past the NetworkPolicy would try is refused by the
scheduler: plain tcp://, TLS with no client certificate, a certificate from another CA. Without --tls-secret the scheduler runs the
code of any client that reaches it (the defect the flag closes).
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from rapidship.config.matrix import load_matrix
from rapidship.deploy import k8s
from rapidship.deploy.plan import TLS_DIR, plan_deploy
from support.commands import ROOT
from support.pods import docker, env_flags, substituted

pytestmark = pytest.mark.docker
# TLS to the scheduler trusting its CA, no client certificate: distributed makes no such context, so
# ssl does it by hand, as an attacker would. The scheduler must end the connection; how the end reaches
# the client depends on timing (TLS 1.3 checks the client certificate after the client's handshake
# is done: an alert during the handshake, ssl.SSLEOFError or a reset on the first write, or an
# empty read), so every form of "the server closed it" is one outcome, and only an answer or a
# connection held open is another. Exit 3: refused; 4: held open; 0: served.
ANONYMOUS = ("import socket, ssl, sys; host = sys.argv[1].split('//')[1].split(':')[0]\n"
             "ctx = ssl.create_default_context(cafile='/etc/rapidship/tls/ca.crt'); ctx.check_hostname = False\n"
             "try:\n"
             "    s = ctx.wrap_socket(socket.create_connection((host, 8786), timeout=15)); s.sendall(b'x' * 8)\n"
             "    data = s.recv(8)\n"
             "except socket.timeout:\n"
             "    print('held open'); sys.exit(4)\n"
             "except (ssl.SSLError, ConnectionError) as err:\n"
             "    print('refused', type(err).__name__, err); sys.exit(3)\n"
             "if not data:\n"
             "    print('refused', 'closed'); sys.exit(3)\n"
             "print('served', data)")
JOB = ("from distributed import Client; import sys; c = Client(sys.argv[1], timeout='{timeout}'); "
       "c.wait_for_workers(1, timeout=60); print('sum', c.submit(sum, range(10)).result())")
# the same job where the scheduler must refuse: whatever form the failure takes (timed out while the
# scheduler keeps closing the connection, CommClosedError, an ssl or reset error), exit 3 says the
# client never got in; an answer would print the sum
REFUSED_JOB = ("import sys\nfrom distributed import Client\ntry:\n"
               "    c = Client(sys.argv[1], timeout='{timeout}'); c.wait_for_workers(1, timeout=60)\n"
               "    print('sum', c.submit(sum, range(10)).result())\n"
               "except Exception as err:\n    print('refused', type(err).__name__); sys.exit(3)")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def site_ca(directory: Path) -> Path:
    """A CA and one certificate for the cluster (server and client use: every role presents it)."""
    directory.mkdir(parents=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=site CA", "-keyout", "ca.key", "-out", "ca.crt", cwd=directory)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
            "/CN=rapidship dask", "-keyout", "tls.key", "-out", "tls.csr", cwd=directory)
    (directory / "ext").write_text("extendedKeyUsage=serverAuth,clientAuth\n")
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
            "-extfile", "ext", "-out", "tls.crt", cwd=directory)
    secret = directory / "secret"     # what the Secret holds, as kubelet projects it
    secret.mkdir()
    for key in ("ca.crt", "tls.crt", "tls.key"):
        (secret / key).write_bytes((directory / key).read_bytes())
        (secret / key).chmod(0o440)
    secret.chmod(0o755)
    return secret


@pytest.fixture
def cluster(cpu_image, tmp_path):
    made: list[str] = []
    network = f"rapidship-tls-{uuid.uuid4().hex[:8]}"
    docker("network", "create", network)
    good = site_ca(tmp_path / "site")
    rogue = site_ca(tmp_path / "rogue")   # its own CA's certificate, trusting the site CA's server
    (rogue / "ca.crt").chmod(0o640)
    (rogue / "ca.crt").write_bytes((good / "ca.crt").read_bytes())

    def start(tls: bool):
        name = f"rs{uuid.uuid4().hex[:6]}"
        plan = plan_deploy(load_matrix(ROOT / "variants.yaml").get("cpu-debian12"),
                           "registry.example/rapidship/dask@sha256:" + "0" * 64, "amd64", 1, "1g", None, None, None,
                           1001, name=name, tls_secret="rapidship-tls" if tls else None)
        docs = k8s.plain(plan)
        pods = {c["name"]: c for doc in docs for _, pod in k8s.pod_specs(doc) for c in pod["containers"]}
        mount = ["-v", f"{good}:{TLS_DIR}:ro"] if tls else []
        user = ["--user", f"{plan.uid}:0", "--memory", "1g"]
        sched = pods["scheduler"]
        made.append(docker("run", "-d", "--network", network, "--network-alias", f"{name}-scheduler", *user, *mount,
                           *env_flags(sched), cpu_image.ref, *sched["args"]))
        worker = pods["worker"]
        made.append(docker("run", "-d", "--network", network, *user, *mount,
                           *env_flags(worker, {"POD_NAME": f"{name}-worker-0"}), cpu_image.ref,
                           *substituted(worker["args"], {"POD_NAME": f"{name}-worker-0"})))

        def client(address: str, secret: Path | None = good, env: dict | None = None, timeout: str = "60s",
                   code: str = JOB):
            """A client pod: the same image, this secret mounted, the env the manifests give (or `env`)."""
            flags = ["-v", f"{secret}:{TLS_DIR}:ro"] if secret else []
            given = env_flags({}, env) if env is not None else env_flags(sched)
            return subprocess.run(["docker", "run", "--rm", "--network", network, *user, *flags,
                                   *given, "-e", "RAPIDS_DOCTOR=off", cpu_image.ref,
                                   "python", "-c", code.format(timeout=timeout), address.format(name=name)],
                                  capture_output=True, text=True, timeout=300)
        return client

    yield start, rogue
    subprocess.run(["docker", "rm", "-f", *made], capture_output=True)
    subprocess.run(["docker", "network", "rm", network], capture_output=True)


def test_a_client_with_the_site_certificate_runs_a_job_and_every_other_way_in_is_refused(cluster):
    start, rogue = cluster
    client = start(tls=True)
    ok = client("tls://{name}-scheduler:8786")
    assert ok.returncode == 0 and "sum 45" in ok.stdout, ok.stderr[-2000:]   # worker joined over TLS too
    # what a pod past the NetworkPolicy tries; each refused by the scheduler, not by its own settings
    plain = client("tcp://{name}-scheduler:8786", secret=None, env={}, timeout="15s", code=REFUSED_JOB)
    anonymous = client("tls://{name}-scheduler:8786", env={}, code=ANONYMOUS)   # trusts the server, shows no certificate
    other_ca = client("tls://{name}-scheduler:8786", secret=rogue, timeout="15s", code=REFUSED_JOB)   # another CA's
    for refused in (plain, anonymous, other_ca):   # refused: never served, never held open, whatever the error's form
        assert refused.returncode == 3 and "refused" in refused.stdout, (refused.returncode, refused.stdout,
                                                                         refused.stderr[-1500:])
        assert "sum" not in refused.stdout and "served" not in refused.stdout


def test_without_tls_any_client_that_reaches_the_scheduler_runs_code_there(cluster):
    start, _ = cluster
    client = start(tls=False)
    anyone = client("tcp://{name}-scheduler:8786", secret=None, env={})
    assert anyone.returncode == 0 and "sum 45" in anyone.stdout, anyone.stderr[-2000:]
