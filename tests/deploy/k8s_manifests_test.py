#!/usr/bin/python3
"""Checks deploy/k8s without a cluster.

  render   SRC KUBECTL NPM_CACHE   render every overlay, count objects per kind, validate every
                                   document against the Kubernetes and CRD schemas (offline;
                                   LeaderWorkerSet against a schema derived from its upstream
                                   CRD, its pod templates against Kubernetes' PodTemplateSpec),
                                   and check how the tp overlay wires its ranks together
  loopback SRC KUBECTL BIN_DIR PROBE
                                   start the cpu overlay's containers (every replica) on 127.0.0.1
                                   with exactly their command, args and env (only host names,
                                   ports, the image's paths and ConfigMap mounts rewritten; a
                                   dns:/// name becomes its Service's pod addresses), run every gRPC
                                   probe they name with PROBE, then generate through the router.
                                   The tp overlay needs GPUs and cannot run here: its leader's and
                                   workers' args (LWS variables filled in) go through the
                                   verifier's own flag checks (--check-flags) instead
  image    SRC KUBECTL BIN_DIR PROBE ROOTFS USERSPEC
                                   the same with the container image's root filesystem: each
                                   container runs under `chroot --userspec=USERSPEC ROOTFS` with
                                   the image's own binaries, models and paths unchanged (only
                                   host names and ports rewritten; ConfigMap volumes bind-mounted
                                   read-only at their mountPath), after checking the manifests run
                                   the pods as the image's user; PROBE and BIN_DIR/splitspec (the
                                   client) run on the host. scripts/image-test.sh sets ROOTFS up.

Exit 77 (skip) when kubectl's kustomize is missing or too old, or the npm registry is unreachable.
"""
import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

SKIP = 77
OVERLAYS = ["cpu", "gpu", "tls", "tp"]
# Objects per kind each overlay must render: a missing or extra object is a failure.
EXPECTED = {
    "cpu": {"Namespace": 1, "ConfigMap": 3, "Service": 4, "Deployment": 3, "StatefulSet": 1,
            "PodDisruptionBudget": 4, "NetworkPolicy": 1, "PodMonitor": 1, "ScaledObject": 1},
}
EXPECTED["gpu"] = dict(EXPECTED["cpu"], PersistentVolumeClaim=1)
EXPECTED["tls"] = dict(EXPECTED["cpu"], Issuer=2, Certificate=3)
EXPECTED["tp"] = {k: v for k, v in EXPECTED["gpu"].items() if k != "StatefulSet"}
EXPECTED["tp"].update(NetworkPolicy=2, LeaderWorkerSet=1)
# What LeaderWorkerSet injects into every container (the kubelet expands $(NAME) in args from
# them), with the values of rank 1 in group 0 of a two-rank set in namespace splitspec.
LWS_ENV = {"LWS_LEADER_ADDRESS": "verifier-tp-0.verifier-tp.splitspec", "LWS_GROUP_SIZE": "2",
           "LWS_WORKER_INDEX": "1"}
NPM_PACKAGES = ["kubernetes-models@5.1.0", "@kubernetes-models/keda@2.0.0",
                "@kubernetes-models/prometheus-operator@6.0.0", "@kubernetes-models/cert-manager@6.0.0"]


def render(src, kubectl, overlay):
    version = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True).stdout
    match = re.search(r"Kustomize Version: v(\d+)", version)
    if not match or int(match.group(1)) < 4:
        print(f"SKIP: {kubectl} has no kustomize >= v4 (Debian 12's kubernetes-client embeds v2)")
        sys.exit(SKIP)
    out = subprocess.run([kubectl, "kustomize", os.path.join(src, "deploy/k8s/overlays", overlay)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"kubectl kustomize {overlay} failed:\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def validate(src, documents, npm_cache, label):
    modules = os.path.join(npm_cache, "node_modules")
    out = subprocess.run(["node", os.path.join(src, "tests/deploy/validate_manifests.mjs"), modules],
                         input=json.dumps(documents), capture_output=True, text=True)
    print(out.stdout + out.stderr, end="")
    return out.returncode == 0


def check_render(src, kubectl, npm_cache):
    install = subprocess.run(["bash", os.path.join(src, "tests/deploy/npm_install.sh"), npm_cache]
                             + NPM_PACKAGES)
    if install.returncode == SKIP:
        print("SKIP: the npm registry cannot be reached, so the schemas cannot be installed")
        sys.exit(SKIP)
    if install.returncode != 0:
        sys.exit("npm install failed")
    ok = True
    for overlay in OVERLAYS:
        documents = render(src, kubectl, overlay)
        counts = dict(collections.Counter(d["kind"] for d in documents))
        print(f"== overlay {overlay}: {len(documents)} objects: {json.dumps(counts, sort_keys=True)}")
        if counts != EXPECTED[overlay]:
            print(f"FAIL: expected {json.dumps(EXPECTED[overlay], sort_keys=True)}")
            ok = False
        ok = validate(src, documents, npm_cache, overlay) and ok
        ok = check_router_discovery(documents, overlay) and ok
        ok = check_step_ports(documents, overlay) and ok
    # A worker with TLS and a step port would not start: the check must see one.
    broken = render(src, kubectl, "tls")
    worker_containers(broken)[0]["args"].append("--step-port=50071")
    if check_step_ports(broken, "broken", quiet=True):
        print("FAIL: a TLS worker with --step-port passed the step port check")
        ok = False
    # The discovery check must be able to fail: a pool named by a plain address is refused.
    broken = render(src, kubectl, "cpu")
    router_args(broken)[:] = [a.replace("dns:///drafter-model", "drafter-model") for a in router_args(broken)]
    if check_router_discovery(broken, "broken", quiet=True):
        print("FAIL: a drafter pool named without dns:/// passed the discovery check")
        ok = False
    # The tls overlay's router wants a bearer key from a Secret; the check must be able to fail.
    tls = render(src, kubectl, "tls")
    ok = check_router_api_key(tls) and ok
    router_pod(tls)["volumes"] = [v for v in router_pod(tls)["volumes"] if v["name"] != "api-key"]
    if check_router_api_key(tls, quiet=True):
        print("FAIL: a router whose key file is on no mounted Secret passed the api-key check")
        ok = False
    # The validator must reject a broken document, or "valid" above means nothing.
    broken = [d for d in render(src, kubectl, "cpu") if d["kind"] == "StatefulSet"]
    broken[0]["spec"]["replicas"] = "two"
    if validate(src, broken, npm_cache, "broken"):
        print("FAIL: a StatefulSet with replicas: \"two\" passed validation")
        ok = False
    # Likewise for both halves of the LeaderWorkerSet check: its own fields, its pod templates.
    tp = render(src, kubectl, "tp")
    for label, breakage in [
            ("a misspelt LeaderWorkerSet field", lambda t: t.update(sise=2)),
            ("a LeaderWorkerSet size that is not an integer", lambda t: t.update(size="two")),
            ("a worker container port that is not a number",
             lambda t: t["workerTemplate"]["spec"]["containers"][0].update(ports=[{"containerPort": "x"}])),
            ("a leader template without containers", lambda t: t["leaderTemplate"]["spec"].pop("containers"))]:
        lws = json.loads(json.dumps(next(d for d in tp if d["kind"] == "LeaderWorkerSet")))
        breakage(lws["spec"]["leaderWorkerTemplate"])
        if validate(src, [lws], npm_cache, "broken"):
            print(f"FAIL: {label} passed validation")
            ok = False
    return check_tp_wiring(tp) and ok


def router_pod(documents):
    router = next(d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == "router")
    return router["spec"]["template"]["spec"]


def router_args(documents):
    return router_pod(documents)["containers"][0]["args"]


def check_router_api_key(documents, quiet=False):
    """The router reads --api-key-file from a read-only mount of a Secret volume."""
    pod = router_pod(documents)
    files = [a.split("=", 1)[1] for a in router_args(documents) if a.startswith("--api-key-file=")]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounted = [m for m in pod["containers"][0].get("volumeMounts", [])
               if files and files[0].startswith(m["mountPath"].rstrip("/") + "/")
               and m.get("readOnly") and "secret" in volumes.get(m["name"], {})]
    good = len(files) == 1 and bool(mounted)
    if not quiet:
        if good:
            print(f"== overlay tls: the router reads its bearer key {files[0]} from Secret "
                  f"{volumes[mounted[0]['name']]['secret']['secretName']}")
        else:
            print("FAIL: overlay tls: the router's --api-key-file is not on a read-only Secret mount")
    return good


def report(failures, overlay, quiet, passed):
    """Prints a check's failures, or what it found when there are none (nothing when quiet);
    True when there are none."""
    if not quiet:
        for f in failures:
            print(f"FAIL: overlay {overlay}: {f}")
        if not failures:
            print(f"== overlay {overlay}: {passed}")
    return not failures


def check_router_discovery(documents, overlay, quiet=False):
    """The router follows the verifier and every drafter pool by DNS: each --verifier and
    --drafter NAME= value is dns:///SERVICE:PORT of a headless Service in the same rendering
    that exposes PORT and selects the pods of a workload, so scaling any of them needs no
    change to the router."""
    services = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Service"}
    templates = []
    for d in documents:
        if d["kind"] in ("StatefulSet", "Deployment"):
            templates.append(d["spec"]["template"]["metadata"]["labels"])
        elif d["kind"] == "LeaderWorkerSet":  # LWS labels each group's leader with worker-index 0
            leader = d["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"].get("labels", {})
            templates.append(dict(leader, **{"leaderworkerset.sigs.k8s.io/worker-index": "0"}))
    failures, targets = [], []
    for arg in router_args(documents):
        if arg.startswith("--verifier="):
            targets.append(("--verifier", arg.split("=", 1)[1]))
        elif arg.startswith("--drafter="):
            pool, _, target = arg.split("=", 1)[1].partition("=")
            targets.append((f"--drafter {pool}", target))
    if not any(flag == "--verifier" for flag, _ in targets) or len(targets) < 2:
        failures.append("the router names no verifier or no drafter pool")
    for flag, target in targets:
        match = re.fullmatch(r"dns:///([a-z0-9-]+):(\d+)", target)
        service = services.get(match.group(1)) if match else None
        if service is None:
            failures.append(f"{flag} {target} is not dns:/// of a Service of this rendering")
        elif service["spec"].get("clusterIP") != "None":
            failures.append(f"{flag} {target}: Service {match.group(1)} is not headless (one address, not one per pod)")
        elif int(match.group(2)) not in [p["port"] for p in service["spec"]["ports"]]:
            failures.append(f"{flag} {target}: Service {match.group(1)} has no port {match.group(2)}")
        elif not any(all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
                     for labels in templates):
            failures.append(f"{flag} {target}: Service {match.group(1)} selects no workload's pods")
    return report(failures, overlay, quiet, "the router follows " +
                  ", ".join(f"{flag} {target}" for flag, target in targets) + " (headless Services)")


def worker_containers(documents):
    """The containers of the workers' StatefulSets and Deployments (role worker)."""
    return [d["spec"]["template"]["spec"]["containers"][0] for d in documents
            if d["kind"] in ("StatefulSet", "Deployment")
            and d["spec"]["template"]["metadata"]["labels"].get("splitspec.io/role") == "worker"]


def check_step_ports(documents, overlay, quiet=False):
    """Workers on plaintext serve their step calls on a TCP port (--step-port) that is one of
    their container ports, named step, and the NetworkPolicy lets the router reach it; workers on
    TLS (which refuse --step-port) have neither the flag nor the port."""
    failures = []
    containers = worker_containers(documents)
    if not containers:
        failures.append("no worker containers")
    for c in containers:
        tls = any(a.startswith("--tls-cert=") for a in c["args"])
        step = flag_value(c, "step-port")
        named = [p["containerPort"] for p in c.get("ports", []) if p.get("name") == "step"]
        if tls and (any(a.startswith("--step-port") for a in c["args"]) or named):
            failures.append(f"{c['name']}: on TLS, yet with a step port ({step}, {named})")
        elif not tls and (step is None or named != [int(step)]):
            failures.append(f"{c['name']}: --step-port {step} is not its container port named step {named}")
    policies = [d for d in documents if d["kind"] == "NetworkPolicy"]
    router_ports = [p.get("port") for pol in policies for rule in pol["spec"].get("ingress", [])
                    if rule.get("from") for p in rule.get("ports", [])]
    wants_step = any(flag_value(c, "step-port") is not None for c in containers)
    if wants_step != ("step" in router_ports):
        failures.append(f"the router's NetworkPolicy ports {router_ports} do not match the workers' step ports")
    return report(failures, overlay, quiet,
                  "worker step ports " + ("on, open to the router" if wants_step else "off (TLS)"))


def lws_containers(lws):
    """The leader's and the workers' verifier containers."""
    template = lws["spec"]["leaderWorkerTemplate"]
    return (template["leaderTemplate"]["spec"]["containers"][0],
            template["workerTemplate"]["spec"]["containers"][0])


def flag_value(container, flag):
    values = [a.split("=", 1)[1] for a in container["args"] if a.startswith(f"--{flag}=")]
    return values[0] if len(values) == 1 else None


def check_tp_wiring(documents):
    """Rank 0 listens where the workers look for it; every pod has one GPU; the router reaches
    the leaders only. Returns False (printing why) on any mismatch."""
    lws = next(d for d in documents if d["kind"] == "LeaderWorkerSet")
    leader, worker = lws_containers(lws)
    failures = []
    port = flag_value(leader, "tp-leader-port")
    if flag_value(leader, "tp-rank") != "0":
        failures.append("the leader is not --tp-rank=0")
    if port is None or int(port) not in [p["containerPort"] for p in leader.get("ports", [])]:
        failures.append(f"the leader's --tp-leader-port {port} is not one of its container ports")
    if flag_value(worker, "tp-leader") != f"$(LWS_LEADER_ADDRESS):{port}":
        failures.append(f"workers do not connect to $(LWS_LEADER_ADDRESS):{port}: {flag_value(worker, 'tp-leader')}")
    if flag_value(worker, "tp-rank") != "$(LWS_WORKER_INDEX)":
        failures.append("workers do not take their rank from LWS_WORKER_INDEX")
    for name, c in (("leader", leader), ("worker", worker)):
        if flag_value(c, "tp") != "$(LWS_GROUP_SIZE)":
            failures.append(f"the {name}'s --tp is not the group size")
        if not (flag_value(c, "device") or "").startswith("cuda"):
            failures.append(f"the {name} does not run on --device cuda")
        if str(c["resources"]["limits"].get("nvidia.com/gpu")) != "1":
            failures.append(f"the {name} does not ask for one nvidia.com/gpu")
        for arg in c["args"]:
            for var in re.findall(r"\$\(([A-Z_]+)\)", arg):
                if var not in LWS_ENV and var not in [e["name"] for e in c.get("env", [])]:
                    failures.append(f"the {name}'s {arg} names $({var}), which nothing defines")
    service = next(d for d in documents if d["kind"] == "Service" and d["metadata"]["name"] == "verifier")
    if service["spec"]["selector"].get("leaderworkerset.sigs.k8s.io/worker-index") != "0":
        failures.append("the verifier Service does not select the leaders only")
    router = next(d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == "router")
    verifier_flag = flag_value(router["spec"]["template"]["spec"]["containers"][0], "verifier")
    if verifier_flag != f"dns:///verifier:{service['spec']['ports'][0]['port']}":
        failures.append(f"the router's --verifier {verifier_flag} is not the verifier Service by DNS")
    for f in failures:
        print(f"FAIL: tp overlay: {f}")
    if not failures:
        print("== tp overlay: rank 0 listens on the port the workers dial; ranks, group size and leader "
              "address come from LWS; one GPU per pod; the router reaches the leaders through the "
              "verifier Service")
    return not failures


def check_tp_flags(src, kubectl, bin_dir):
    """The tp overlay's leader and worker args, LWS variables filled in, pass the verifier's own
    flag checks; the same args without --tp-leader must not (or the check proves nothing)."""
    lws = next(d for d in render(src, kubectl, "tp") if d["kind"] == "LeaderWorkerSet")
    ok = True
    for name, container in zip(("leader", "worker"), lws_containers(lws)):
        env = dict(LWS_ENV, LWS_WORKER_INDEX="0" if name == "leader" else LWS_ENV["LWS_WORKER_INDEX"])
        args = [re.sub(r"\$\(([A-Z_]+)\)", lambda m: env[m.group(1)], a) for a in container["args"]]
        argv = [os.path.join(bin_dir, os.path.basename(container["command"][0]))] + args + ["--check-flags"]
        out = subprocess.run(argv, capture_output=True, text=True)
        print(f"== tp {name}: {' '.join(argv)}\n{out.stdout}{out.stderr}", end="")
        if out.returncode != 0 or "flags ok" not in out.stdout:
            print(f"FAIL: the tp overlay's {name} args do not pass --check-flags")
            ok = False
        if name == "worker":
            without_leader = [a for a in argv if not a.startswith("--tp-leader=")]
            if subprocess.run(without_leader, capture_output=True).returncode != 2:
                print("FAIL: --check-flags accepted a worker without --tp-leader")
                ok = False
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pod:
    """One replica of a workload, as a local process."""

    def __init__(self, name, workload, container):
        self.name, self.workload, self.container = name, workload, container
        # containerPort -> loopback port; named ports for Service targetPorts.
        self.ports = {p["containerPort"]: free_port() for p in container.get("ports", [])}
        self.named = {p["name"]: self.ports[p["containerPort"]] for p in container.get("ports", [])}
        self.process = None
        self.log = None


def build_pods(documents):
    """Pods of every workload: every replica its StatefulSet or Deployment asks for."""
    pods = []
    for d in documents:
        if d["kind"] not in ("StatefulSet", "Deployment"):
            continue
        containers = d["spec"]["template"]["spec"]["containers"]
        assert len(containers) == 1, f"{d['metadata']['name']}: one container per pod expected"
        replicas = d["spec"].get("replicas", 1)
        for i in range(replicas):
            name = f"{d['metadata']['name']}-{i}"
            pods.append(Pod(name, d, containers[0]))
    return pods


def resolver(documents, pods):
    """Maps `host:port` as the cluster resolves it to the loopback port of the pod behind it."""
    services = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Service"}
    by_name = {p.name: p for p in pods}

    def pods_of(service):
        selector = service["spec"]["selector"]
        return [p for p in pods if all(p.workload["spec"]["template"]["metadata"]["labels"].get(k) == v
                                       for k, v in selector.items())]

    def local_address(pod, service, port):
        spec_port = next(p for p in service["spec"]["ports"] if p["port"] == port)
        target = spec_port.get("targetPort", port)
        return f"127.0.0.1:{pod.named[target] if isinstance(target, str) else pod.ports[target]}"

    def resolve(match):
        name, host, port = match.group(1), match.group(2), int(match.group(3))
        labels = host.split(".")
        if name and host in services:
            # dns:///<headless service>:<port>: the cluster's DNS answers with every pod behind
            # it; loopback pods differ by port, not address, so they become an address list.
            service = services[host]
            return ",".join(local_address(pod, service, port) for pod in pods_of(service))
        if labels[-1] in services and len(labels) == 2:  # <pod>.<headless service>
            return local_address(by_name[labels[0]], services[labels[1]], port)
        if host in services:
            return local_address(pods_of(services[host])[0], services[host], port)
        return match.group(0)

    return resolve


def command_line(pod, resolve, paths):
    """The container's command and args with only loopback hosts, ports and local paths."""
    argv = []
    for arg in pod.container.get("command", []) + pod.container.get("args", []):
        flag, eq, value = arg.partition("=")
        if eq and value == "0.0.0.0":
            value = "127.0.0.1"
        elif eq and value.isdigit() and int(value) in pod.ports:
            value = str(pod.ports[int(value)])
        elif eq:
            value = re.sub(r"(dns:///)?([a-z0-9][a-z0-9.-]*):(\d+)", resolve, value)
        arg = flag + eq + value
        for image_path, local in paths.items():
            arg = arg.replace(image_path, local)
        argv.append(arg)
    return argv


def mount_config_maps(pod, documents, scratch):
    """Writes each ConfigMap volume's data as the kubelet would; returns mountPath -> dir."""
    config_maps = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ConfigMap"}
    volumes = {v["name"]: v for v in pod.workload["spec"]["template"]["spec"].get("volumes", [])}
    paths = {}
    for mount in pod.container.get("volumeMounts", []):
        source = volumes[mount["name"]]["configMap"]["name"]
        directory = os.path.join(scratch, pod.name, mount["name"])
        os.makedirs(directory)
        for key, text in config_maps[source]["data"].items():
            with open(os.path.join(directory, key), "w") as f:
                f.write(text)
        paths[mount["mountPath"]] = directory
    return paths


def run_probes(pod, probe):
    """Each gRPC probe the container names, once, as the kubelet would send it; None when all pass."""
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        spec = pod.container.get(kind)
        if spec is None:
            return f"names no {kind}"
        if "grpc" not in spec:
            return f"{kind} is not a native gRPC probe"
        out = subprocess.run([probe, str(pod.ports[spec["grpc"]["port"]])], capture_output=True, text=True)
        if out.returncode != 0:
            return f"{kind} on port {spec['grpc']['port']} failed: {out.stderr.strip()}"
    return None


def wait_serving(pod, deadline, probe):
    """Waits for the pod's 'listening on' line, then runs its probes and reads its metrics."""
    while time.time() < deadline:
        if pod.process.poll() is not None:
            return f"exited with {pod.process.returncode}"
        with open(pod.log.name) as f:
            if "listening on" in f.read():
                break
        time.sleep(0.1)
    else:
        return "did not start"
    if error := run_probes(pod, probe):
        return error
    body = urllib.request.urlopen(f"http://127.0.0.1:{pod.named['metrics']}/metrics", timeout=10).read()
    if b"# TYPE" not in body:
        return "metrics port serves no metrics"
    return None


class LocalFiles:
    """Pods run from the build tree: image paths and ConfigMap mounts mapped to local paths."""

    def __init__(self, src, bin_dir):
        self.image = {"/opt/splitspec/bin": os.path.abspath(bin_dir),
                      "/opt/splitspec/models": os.path.join(src, "models")}

    def argv(self, pod, resolve, config_dirs):
        return command_line(pod, resolve, dict(self.image, **config_dirs))

    def cleanup(self):
        pass


class ImageRoot:
    """Pods run from a container image's root filesystem with chroot, as the image's user."""

    def __init__(self, rootfs, userspec):
        self.rootfs, self.userspec = rootfs, userspec
        self.mounts = []

    def argv(self, pod, resolve, config_dirs):
        # The kubelet mounts each ConfigMap volume at its mountPath; the image provides the
        # mount point (a read-only root cannot grow one).
        for mount_path, directory in config_dirs.items():
            target = os.path.join(self.rootfs, mount_path.lstrip("/"))
            subprocess.run(["mount", "--bind", directory, target], check=True)
            self.mounts.append(target)
            subprocess.run(["mount", "-o", "remount,bind,ro", target], check=True)
        return ["chroot", f"--userspec={self.userspec}", self.rootfs] + command_line(pod, resolve, {})

    def check_user(self, pods):
        """The manifests' runAsUser/runAsGroup must be the image's user, or the pods run as another."""
        uid, gid = self.userspec.split(":")
        for pod in pods:
            context = pod.workload["spec"]["template"]["spec"].get("securityContext", {})
            runs_as = f"{context.get('runAsUser')}:{context.get('runAsGroup')}"
            if runs_as != f"{uid}:{gid}":
                return f"{pod.name}: runs as {runs_as}, the image's user is {self.userspec}"
        return None

    def cleanup(self):
        for target in reversed(self.mounts):
            subprocess.run(["umount", target])


def same_as_target_only(src, bin_dir, request, served):
    """Speculative greedy output must be the target model's own greedy output: the image's
    services against the bundled target model run alone by the host's build."""
    local = subprocess.run([os.path.join(bin_dir, "splitspec"), "generate", "--model",
                            os.path.join(src, "models/target")] + request,
                           capture_output=True, text=True, timeout=300)
    if local.returncode != 0:
        print(f"FAIL: target-only generation on the host failed: {local.stderr}")
        return False
    # Locally the prompt is echoed before the completion; through a router the completion is
    # followed by a blank line and the summary line.
    prompt = request[request.index("--prompt") + 1]
    expected = local.stdout[len(prompt):] if local.stdout.startswith(prompt) else local.stdout
    completion = served[:served.rfind("\n[")] if "\n[" in served else served
    if completion != expected:
        print(f"FAIL: the image's services generated {completion!r}, the target model alone {expected!r}")
        return False
    print("== the output equals the target model's own greedy output (host build, models/target)")
    return True


def check_loopback(src, kubectl, bin_dir, probe, files):
    # The probe must be able to fail, or "answer" below means nothing.
    if subprocess.run([probe, str(free_port())], capture_output=True).returncode == 0:
        sys.exit("FAIL: the gRPC probe passed on a port where nothing listens")
    documents = render(src, kubectl, "cpu")
    pods = build_pods(documents)
    if isinstance(files, ImageRoot) and (error := files.check_user(pods)):
        sys.exit(f"FAIL: {error}")
    resolve = resolver(documents, pods)
    scratch = tempfile.mkdtemp(prefix="splitspec-k8s-")
    # Workers first, router last (it waits for a verifier): the order a rollout converges to.
    pods.sort(key=lambda p: p.workload["metadata"]["name"] == "router")
    ok = True
    try:
        for pod in pods:
            argv = files.argv(pod, resolve, mount_config_maps(pod, documents, scratch))
            env = {e["name"]: e["value"] for e in pod.container.get("env", [])}
            env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
            print(f"== {pod.name}: {' '.join(argv)}", flush=True)
            pod.log = open(os.path.join(scratch, pod.name + ".log"), "w")
            pod.process = subprocess.Popen(argv, env=env, stdout=pod.log, stderr=subprocess.STDOUT)
            if pod.workload["metadata"]["name"] == "router":
                for p in pods:
                    if p is not pod and (error := wait_serving(p, time.time() + 300, probe)):
                        sys.exit(f"{p.name}: {error}\n" + open(p.log.name).read())
        router = next(p for p in pods if p.workload["metadata"]["name"] == "router")
        if error := wait_serving(router, time.time() + 300, probe):
            sys.exit(f"router: {error}\n" + open(router.log.name).read())
        print("== every pod's startup, readiness and liveness gRPC probes answer SERVING; "
          "generating through the router", flush=True)
        request = ["--prompt", "def add(a, b):\n", "--max-tokens", "16"]
        out = subprocess.run([os.path.join(bin_dir, "splitspec"), "generate", "--router",
                              f"127.0.0.1:{router.named['grpc']}"] + request,
                             capture_output=True, text=True, timeout=300)
        print(out.stdout + out.stderr)
        if out.returncode != 0 or not out.stdout.strip():
            print("FAIL: generation through the manifest-built deployment failed")
            ok = False
        elif isinstance(files, ImageRoot):
            ok = same_as_target_only(src, bin_dir, request, out.stdout)
    finally:
        for pod in reversed(pods):
            if pod.process and pod.process.poll() is None:
                pod.process.terminate()
        for pod in pods:
            if pod.process:
                try:
                    pod.process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    pod.process.kill()
        files.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)
    return ok


def main():
    mode, src, kubectl, extra = sys.argv[1:5]
    if not shutil.which(kubectl):
        print(f"SKIP: {kubectl} is not installed (needs kubectl with kustomize >= v4)")
        sys.exit(SKIP)
    if mode == "render":
        ok = check_render(src, kubectl, extra)
    elif mode == "loopback":
        ok = check_tp_flags(src, kubectl, extra)
        ok = check_loopback(src, kubectl, extra, sys.argv[5], LocalFiles(src, extra)) and ok
    else:
        ok = check_loopback(src, kubectl, extra, sys.argv[5], ImageRoot(sys.argv[6], sys.argv[7]))
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
