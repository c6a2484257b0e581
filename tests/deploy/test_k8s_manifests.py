#!/usr/bin/env python3
"""deploy/k8s/ringkv.yaml against the compose cluster and the daemon: the
two deployments cannot drift, and ringkvd accepts what they set.

Proves, with no Kubernetes (the manifests are parsed, not applied):
- the ports: the image's EXPOSE (deploy/Dockerfile), each StatefulSet's
  container ports and the headless Service's are the same five
  (7000/udp gossip, 7001, 7380, 6379, 9180), the defaults ringkvd prints;
- the image: the compose file's default image is the manifests';
- the settings: every RINGKV_<KEY> the compose file gives each node is
  given with the same value in the manifests, except what names the
  deployment (cluster name, seeds, where the CA is mounted) or a node
  (name, rack, addresses, its certificate); a
  variable in one and not the other fails;
- the racks: one StatefulSet per rack, rack1..rack3 as in compose, alike
  but for their names and rack; seeds are pods that exist;
- the data directory: the volume mounts (PVC, compose volume) are the
  image's VOLUME and RINGKV_DATA_DIR;
- probes on /health/ready and /health/live on the metrics port, a
  PodDisruptionBudget of one, a headless Service publishing not-ready pods
  (nodes must find each other before they are ready), the secret mounted
  where RINGKV_CLUSTER_SECRET_FILE points, the TLS Secret where the CA and
  the pod's own certificate and key are read (internode mutual TLS, RESP
  in TLS on 6380, as in compose, whose nodes read nodeN's);
- ringkvd --check-config accepts each deployment's environment (pod
  fields filled in as Kubernetes would) and prints every setting it set:
  none is a key the daemon does not know.
"""
# ctest: alongside others
import copy
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "cluster"))
import harness as h  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PORTS = {(7000, "UDP"), (7001, "TCP"), (7380, "TCP"), (6379, "TCP"),
         (9180, "TCP"), (6380, "TCP")}
# set per deployment or per node, not shared settings
PER_DEPLOYMENT = {"RINGKV_CLUSTER_NAME", "RINGKV_SEEDS",
                  # where each mounts its secrets (checked below)
                  "RINGKV_TLS_CA_FILE"}
PER_NODE = {"RINGKV_NODE_NAME", "RINGKV_RACK", "RINGKV_LISTEN_ADDRESS",
            "RINGKV_ADVERTISE_ADDRESS", "RINGKV_HOST", "RINGKV_TLS_CERT_FILE",
            "RINGKV_TLS_KEY_FILE"}
# where each deployment mounts the TLS files: the test's own are used to
# run ringkvd --check-config (key: the test PKI's file)
TLS_FILES = {"RINGKV_TLS_CERT_FILE": "n1.crt", "RINGKV_TLS_KEY_FILE": "n1.key",
             "RINGKV_TLS_CA_FILE": "ca.crt"}
# read by the CLI, not by ringkvd
CLI_ONLY = {"RINGKV_HOST"}


def compose_default(v):
    """'${X:-d}' -> 'd' (as compose expands it with X unset)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(v))


def load():
    with open(os.path.join(ROOT, "deploy", "k8s", "ringkv.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    with open(os.path.join(ROOT, "deploy", "docker-compose.yml")) as f:
        comp = yaml.safe_load(f)
    with open(os.path.join(ROOT, "deploy", "Dockerfile")) as f:
        dockerfile = f.read()
    return docs, comp, dockerfile


def k8s_env(c, pod, ns="default", ip="127.0.0.1"):
    """The container's environment with Kubernetes' $(VAR) references and
    pod fields filled in, in order."""
    fields = {"metadata.name": pod, "metadata.namespace": ns,
              "status.podIP": ip}
    env = {}
    for e in c["env"]:
        if "valueFrom" in e:
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[e["name"]] = re.sub(r"\$\(([A-Z_]+)\)",
                                    lambda m: env[m.group(1)], e["value"])
    return env


def check_config(env, tmp, pki):
    """ringkvd --check-config in env (plus a data_dir and secret of
    tmp's, and the TLS files of the test PKI pki in place of the
    deployment's): its printed settings, {key: text}."""
    env = dict(env)
    for k, f in TLS_FILES.items():
        h.check(k in env, "no %s" % k)
        env[k] = os.path.join(pki, f)
    secret = os.path.join(tmp, "secret")
    with open(secret, "w") as f:
        f.write("test-secret\n")
    run_env = {k: v for k, v in os.environ.items()
               if not k.startswith("RINGKV_")}
    run_env.update(env)
    run_env["RINGKV_CLUSTER_SECRET_FILE"] = secret
    run_env["RINGKV_DATA_DIR"] = os.path.join(tmp, "data")
    p = subprocess.run([h.RINGKVD, "--check-config"], env=run_env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=30)
    out = p.stdout.decode(errors="replace")
    h.check(p.returncode == 0, "ringkvd --check-config refused %r:\n%s" %
            (env, out))
    got = {}
    for line in out.splitlines():
        k, sep, v = line.partition(": ")
        if sep and not line.startswith("#"):
            got[k] = v.strip().strip('"')
    for k in env:
        if k.startswith("RINGKV_") and k not in CLI_ONLY:
            key = k[len("RINGKV_"):].lower()
            h.check(key in got, "%s: ringkvd has no setting %s" % (k, key))
    return got


def main():
    docs, comp, dockerfile = load()
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    services = {s["metadata"]["name"]: s for s in kinds["Service"]}
    sets = kinds["StatefulSet"]

    # ports
    exposed = set()
    for p in re.search(r"^EXPOSE (.*)$", dockerfile, re.M).group(1).split():
        port, _, proto = p.partition("/")
        exposed.add((int(port), (proto or "tcp").upper()))
    h.check(exposed == PORTS, "Dockerfile EXPOSE %r" % exposed)
    headless = services["ringkv"]["spec"]
    h.check(headless.get("clusterIP") == "None" and
            headless.get("publishNotReadyAddresses") is True,
            "the ringkv Service is not headless publishing not-ready pods")
    h.check({(p["port"], p["protocol"]) for p in headless["ports"]} == PORTS,
            "headless Service ports %r" % headless["ports"])

    # compose: what each node gets
    cnodes = {n: s for n, s in comp["services"].items()}
    h.check(len(cnodes) == 6, "compose file has %d nodes" % len(cnodes))
    cenv = {n: {k: compose_default(v) for k, v in s["environment"].items()}
            for n, s in cnodes.items()}
    shared_c = {k: v for k, v in cenv["node1"].items()
                if k.startswith("RINGKV_") and k not in PER_NODE and
                k not in PER_DEPLOYMENT}
    compose_racks = sorted({e["RINGKV_RACK"] for e in cenv.values()})
    compose_image = compose_default(cnodes["node1"]["image"])

    # the StatefulSets: one per rack, alike but for name and rack
    h.check(len(sets) == len(compose_racks), "%d StatefulSets for racks %r"
            % (len(sets), compose_racks))
    racks = []
    seeds_all = None
    pods = set()
    norm = None
    for s in sets:
        name = s["metadata"]["name"]
        c = s["spec"]["template"]["spec"]["containers"][0]
        env = k8s_env(c, name + "-0")
        racks.append(env["RINGKV_RACK"])
        seeds_of = env["RINGKV_SEEDS"]
        h.check(norm is None or seeds_of == seeds_all, "%s: other seeds %r"
                % (name, seeds_of))
        seeds_all = seeds_of
        pods |= {"%s-%d" % (name, i) for i in range(s["spec"]["replicas"])}
        h.check(s["spec"]["serviceName"] == "ringkv",
                "%s: serviceName %r" % (name, s["spec"]["serviceName"]))
        h.check(c["image"] == compose_image, "%s: image %r, compose %r" %
                (name, c["image"], compose_image))
        h.check({(p["containerPort"], p["protocol"]) for p in c["ports"]}
                == PORTS, "%s: container ports" % name)
        shared_k = {k: v for k, v in env.items()
                    if k.startswith("RINGKV_") and k not in PER_NODE and
                    k not in PER_DEPLOYMENT}
        h.check(shared_k == shared_c,
                "%s's settings differ from compose's:\n  k8s     %r\n  "
                "compose %r" % (name, shared_k, shared_c))
        h.check(set(k for k in env if k.startswith("RINGKV_")) ==
                set(k for k in cenv["node1"] if k.startswith("RINGKV_")) |
                {"RINGKV_ADVERTISE_ADDRESS"},
                "%s sets other variables than compose" % name)
        rp = c["readinessProbe"]["httpGet"]
        lp = c["livenessProbe"]["httpGet"]
        h.check((rp["path"], rp["port"], lp["path"], lp["port"]) ==
                ("/health/ready", 9180, "/health/live", 9180),
                "%s: probes %r %r" % (name, rp, lp))
        vol = re.search(r"^VOLUME (\S+)$", dockerfile, re.M).group(1)
        ddir = re.search(r"^ENV RINGKV_DATA_DIR=(\S+)$", dockerfile,
                         re.M).group(1)
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        h.check(vol == ddir and mounts.get("data") == vol and
                s["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] ==
                "data", "%s: data volume %r, image %s" % (name, mounts, vol))
        h.check(os.path.dirname(env["RINGKV_CLUSTER_SECRET_FILE"]) ==
                mounts.get("cluster-secret"), "%s: secret not mounted where "
                "RINGKV_CLUSTER_SECRET_FILE points" % name)
        vols = {v["name"]: v for v in
                s["spec"]["template"]["spec"]["volumes"]}
        h.check(all(os.path.dirname(env[k]) == mounts.get("tls")
                    for k in TLS_FILES) and
                env["RINGKV_TLS_CERT_FILE"].endswith("/%s-0.crt" % name) and
                env["RINGKV_TLS_KEY_FILE"].endswith("/%s-0.key" % name) and
                vols.get("tls", {}).get("secret", {}).get("secretName") ==
                "ringkv-tls", "%s: TLS files %r not read from the Secret "
                "ringkv-tls mounted at %r" % (name, {k: env[k] for k in
                                                     TLS_FILES},
                                               mounts.get("tls")))
        h.check(env["RINGKV_NODE_NAME"] == name + "-0" and
                env["RINGKV_ADVERTISE_ADDRESS"].startswith(name + "-0.ringkv."),
                "%s: node name / advertise %r" % (name, env))
        # alike but for name and rack (the seeds, which name pods of two
        # of them, are the same text in each: compared above)
        s2 = copy.deepcopy(s)
        c2 = s2["spec"]["template"]["spec"]["containers"][0]
        c2["env"] = [e for e in c2["env"] if e["name"] != "RINGKV_SEEDS"]
        t = yaml.safe_dump(s2).replace(name, "X").replace(
            env["RINGKV_RACK"], "RACK")
        h.check(norm is None or t == norm, "%s differs from the other "
                "StatefulSets beyond its name and rack" % name)
        norm = t
    h.check(sorted(racks) == compose_racks, "racks %r, compose %r" %
            (racks, compose_racks))
    seeds = k8s_env(sets[0]["spec"]["template"]["spec"]["containers"][0],
                    "x")["RINGKV_SEEDS"].split(",")
    h.check(len(seeds) == 2 and
            all(s.split(".")[0] in pods and s.split(".")[1] == "ringkv"
                for s in seeds), "seeds %r are not pods %r" % (seeds, pods))
    pdb = kinds["PodDisruptionBudget"][0]["spec"]
    h.check(pdb.get("maxUnavailable") == 1, "PDB %r" % pdb)
    for n, s in cnodes.items():
        h.check(s["volumes"] == ["%s:%s" % (n, vol)], "compose %s volume %r"
                % (n, s["volumes"]))
    print("ports, image, %d shared settings, racks %r, probes, data volume "
          "and PDB agree" % (len(shared_c), racks))

    # compose: each node reads its own certificate among the secrets
    for n, s in cnodes.items():
        e = cenv[n]
        secs = set(s["secrets"])
        h.check({"cluster_secret", "cluster_ca", n + "_crt", n + "_key"} <=
                secs and e["RINGKV_TLS_CERT_FILE"] == "/run/secrets/%s_crt"
                % n and e["RINGKV_TLS_KEY_FILE"] == "/run/secrets/%s_key" % n
                and e["RINGKV_TLS_CA_FILE"] == "/run/secrets/cluster_ca",
                "compose %s: TLS files %r, secrets %r" % (n, e, secs))
    print("TLS: the CA and each node's own certificate, from the Secret "
          "(k8s) and the compose secrets")

    # the daemon accepts both
    with tempfile.TemporaryDirectory() as tmp:
        pki = h.make_certs(os.path.join(tmp, "pki"), "n1=127.0.0.1")
        for s in sets:
            c = s["spec"]["template"]["spec"]["containers"][0]
            env = k8s_env(c, s["metadata"]["name"] + "-1", ns="prod")
            got = check_config(env, tmp, pki)
            h.check(got["node_name"] == s["metadata"]["name"] + "-1" and
                    got["advertise_address"].endswith(".ringkv.prod.svc."
                                                      "cluster.local"),
                    "k8s node: %r" % got)
            for port, proto in PORTS:
                h.check(str(port) in got.values(), "port %d is not one "
                        "ringkvd uses by default" % port)
        env = {k: v for k, v in cenv["node4"].items() if v != ""}
        env["RINGKV_LISTEN_ADDRESS"] = "127.0.0.1"
        got = check_config(env, tmp, pki)
        h.check(got["rack"] == "rack1", "compose node4: %r" % got)
    print("ringkvd --check-config accepts the k8s and compose settings")


if __name__ == "__main__":
    h.run(main)
