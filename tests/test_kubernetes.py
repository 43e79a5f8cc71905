"""The container and Kubernetes files: the PyTorchJob's own command, run as two
"pods" (processes) with the variables the Kubeflow training operator sets, and
the image the README builds being the one the manifest names. (No container
engine runs here: the Dockerfile is checked, not built.)"""

import re
import shlex
import subprocess

import pytest
import yaml
from helpers import (
    assert_same_weights,
    child_env,
    final_model,
    free_port,
    kill_group,
    train,
)

SMALL = ["--device", "cpu", "--train-size", "256", "--eval-size", "64"]
SMALL += ["--batch-size", "16", "--epochs", "2"]


def manifest(project):
    documents = list(
        yaml.safe_load_all((project / "scripts" / "pytorchjob.yaml").read_text())
    )
    return {document["kind"]: document for document in documents}


def operator_env(job, mode, pod, port):
    """What the training operator sets in pod number `pod` (0 = Master)."""
    if mode == "launch":
        policy = job["spec"]["elasticPolicy"]
        env = dict(
            PET_NNODES=f"{policy['minReplicas']}:{policy['maxReplicas']}",
            PET_NPROC_PER_NODE=1,  # spec.nprocPerNode on a CPU "node"
            PET_RDZV_BACKEND=policy["rdzvBackend"],
            PET_RDZV_ENDPOINT=f"127.0.0.1:{port}",
            PET_RDZV_ID="job",
            PET_MAX_RESTARTS=policy["maxRestarts"],
        )
    else:
        env = dict(PET_NNODES=2, PET_NODE_RANK=pod, RANK=pod, WORLD_SIZE=2)
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    return env


def container_of(job):
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"
    ][0]


def pod_command(container, checkpoints, flags):
    command = [
        c.replace("/checkpoints", str(checkpoints)) for c in container["command"]
    ]
    command += [
        c.replace("/checkpoints", str(checkpoints)) for c in container.get("args", [])
    ]
    if command[:2] == ["sh", "-c"]:
        return command[:2] + [command[2] + " " + shlex.join(flags)]
    return command + flags


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_the_pytorchjob_command_trains_two_pods_like_one_node(projects, tmp_path, mode):
    project = projects(mode)
    job = manifest(project)["PyTorchJob"]
    container = container_of(job)
    port = free_port()
    pods = []
    for pod in range(2):
        env = child_env(**operator_env(job, mode, pod, port))
        env.update({item["name"]: item["value"] for item in container.get("env", [])})
        flags = SMALL + ["--metrics-file", str(tmp_path / f"metrics{pod}.json")]
        flags += ["--nprocs", "1"] if mode == "mp" else []
        pods.append(
            subprocess.Popen(
                pod_command(container, tmp_path / "checkpoints", flags),
                cwd=project,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        )
    try:
        outputs = [pod.communicate(timeout=240)[0] for pod in pods]
    finally:
        for pod in pods:
            kill_group(pod.pid)
    for pod, output in zip(pods, outputs, strict=True):
        assert pod.returncode == 0, output[-3000:]
    train(project, tmp_path / "one", *SMALL)
    assert_same_weights(final_model(tmp_path), final_model(tmp_path / "one"))


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_manifest_claims_shared_storage_memory_shm_and_no_root(projects, mode):
    documents = manifest(projects(mode))
    job, claim = documents["PyTorchJob"], documents["PersistentVolumeClaim"]
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert {spec["restartPolicy"] for spec in replicas.values()} == {"OnFailure"}
    pod = replicas["Worker"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["shm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["checkpoints"]["persistentVolumeClaim"]["claimName"] == (
        claim["metadata"]["name"]
    )
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    mounts = {mount["mountPath"] for mount in container_of(job)["volumeMounts"]}
    assert mounts == {"/checkpoints", "/dev/shm"}
    if mode == "mp":
        script = container_of(job)["args"][0]
        assert '--nnodes "$PET_NNODES" --node-rank "$PET_NODE_RANK"' in script
        assert "WORLD_SIZE" not in script  # the operator's is processes, not pods


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_readme_builds_the_image_the_manifest_runs(projects, mode):
    project = projects(mode)
    readme = (project / "README.md").read_text()
    built = re.search(r"^\s*docker build -t (\S+) \.$", readme, re.M)[1]
    pushed = re.search(r"^\s*docker push (\S+)$", readme, re.M)[1]
    assert built == pushed == container_of(manifest(project)["PyTorchJob"])["image"]
    dockerfile = (project / "Dockerfile").read_text()
    assert f"docker build -t {built} ." in dockerfile


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_dockerfile_is_pinned_installs_the_project_and_drops_root(projects, mode):
    project = projects(mode)
    lines = [
        line
        for line in (project / "Dockerfile").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    base = next(line for line in lines if line.startswith("FROM ")).split()[1]
    assert re.fullmatch(
        r"pytorch/pytorch:\d+\.\d+\.\d+-cuda[\d.]+-cudnn\d+-runtime", base
    )
    copied = [line.split()[1:-1] for line in lines if line.startswith("COPY ")]
    for sources in copied:
        for source in sources:
            assert source == "." or (project / source).exists(), source
    assert any("pip install ." in line for line in lines)
    user = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert user and user[-1] not in ("root", "0")
    ignored = (project / ".dockerignore").read_text().split()
    for litter in ("checkpoints/", ".venv/", "**/__pycache__/", ".git/", "data/"):
        assert litter in ignored
