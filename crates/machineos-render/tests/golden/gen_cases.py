#!/usr/bin/env python3
"""Writes render-name.cases.jsonl: rendered MachineConfig specs whose config is machineos's
Ignition model as JSON (defaults left out), for the oracle of
../../../machineos-goyaml/tests/golden (gen.sh MCO_CHECKOUT <this directory>): it decodes
each config into Ignition's v3_5 Go types, re-encodes it as the MCO stores it, and hashes
the spec as the MCO names it. Every field of the v3_5 schema appears, with values chosen to
exercise Go's omitempty rules and the YAML writer (zero numbers, empty strings, explicit
false, long unit files, unicode). Deterministic.
"""
import json
import random

P, B, I, S, L = "ptr-str", "ptr-bool", "ptr-int", "str", "list-str"
RESOURCE = {"compression": P, "httpHeaders": [{"name": S, "value": P}], "source": P,
            "verification": {"hash": P}}
OWNER = {"id": I, "name": P}
NODE = {"group": OWNER, "overwrite": B, "path": S, "user": OWNER}
SCHEMA = {
    "ignition": {"config": {"merge": [RESOURCE], "replace": RESOURCE},
                 "proxy": {"httpProxy": P, "httpsProxy": P, "noProxy": L},
                 "security": {"tls": {"certificateAuthorities": [RESOURCE]}},
                 "timeouts": {"httpResponseHeaders": I, "httpTotal": I}, "version": "version"},
    "kernelArguments": {"shouldExist": L, "shouldNotExist": L},
    "passwd": {"groups": [{"gid": I, "name": S, "passwordHash": P, "shouldExist": B, "system": B}],
               "users": [{"gecos": P, "groups": L, "homeDir": P, "name": S, "noCreateHome": B,
                          "noLogInit": B, "noUserGroup": B, "passwordHash": P, "primaryGroup": P,
                          "sshAuthorizedKeys": L, "shell": P, "shouldExist": B, "system": B,
                          "uid": I}]},
    "storage": {
        "directories": [dict(NODE, mode=I)],
        "disks": [{"device": S, "partitions": [{"guid": P, "label": P, "number": "int",
                                                 "resize": B, "shouldExist": B, "sizeMiB": I,
                                                 "startMiB": I, "typeGuid": P,
                                                 "wipePartitionEntry": B}], "wipeTable": B}],
        "files": [dict(NODE, append=[RESOURCE], contents=RESOURCE, mode=I)],
        "filesystems": [{"device": S, "format": P, "label": P, "mountOptions": L, "options": L,
                         "path": P, "uuid": P, "wipeFilesystem": B}],
        "links": [dict(NODE, hard=B, target=P)],
        "luks": [{"cex": {"enabled": B},
                  "clevis": {"custom": {"config": P, "needsNetwork": B, "pin": P},
                             "tang": [{"advertisement": P, "thumbprint": P, "url": "str-omitempty"}],
                             "threshold": I, "tpm2": B},
                  "device": P, "discard": B, "keyFile": RESOURCE, "label": P, "name": S,
                  "openOptions": L, "options": L, "uuid": P, "wipeVolume": B}],
        "raid": [{"devices": L, "level": P, "name": S, "options": L, "spares": I}],
    },
    "systemd": {"units": [{"contents": P, "dropins": [{"contents": P, "name": S}], "enabled": B,
                           "mask": B, "name": S}]},
}

STRINGS = ["", "a", "y", "on", "/etc/motd", "data:,hello%20world", "data:;base64,SGk=", "gzip",
           "sha512-abc", "core", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI example@host",
           "[Unit]\nDescription=Example\n\n[Service]\nExecStart=/bin/sh -c 'echo a && echo b > /tmp/x'\n\n[Install]\nWantedBy=multi-user.target\n",
           "line with trailing space \n", "\ttab", "caf\u00e9", "\U0001F600", "1.5", "0644",
           "2024-01-02", "a: b", "# x", "https://example.com/config.ign", "3.5.0",
           "a" * 100 + " " + "b" * 30, " ".join(["word"] * 40), "ExecStart=/usr/bin/true\n"]


def value(rng, kind):
    if isinstance(kind, dict):
        return struct(rng, kind)
    if isinstance(kind, list):
        return [struct(rng, kind[0]) for _ in range(rng.randint(0, 2))]
    if kind in (P, S, "str-omitempty"):
        return rng.choice(STRINGS)
    if kind == B:
        return rng.choice([True, False])
    if kind in (I, "int"):
        return rng.choice([0, 1, 420, 0o755, 0o1777, 1000, 65534])
    if kind == L:
        return [rng.choice(STRINGS) for _ in range(rng.randint(0, 3))]
    if kind == "version":
        return "3.5.0"
    raise ValueError(kind)


def struct(rng, schema, density=0.5):
    out = {}
    for key, kind in schema.items():
        if kind == "version" or rng.random() < density:
            out[key] = value(rng, kind)
    return out


def spec(rng, config):
    return {"osImageURL": rng.choice(["quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "ab" * 32,
                                      "quay.io/fedora/fedora-coreos:stable", ""]),
            "baseOSExtensionsContainerImage": rng.choice(["", "quay.io/example/extensions@sha256:" + "cd" * 32]),
            "config": config,
            "kernelArguments": [rng.choice(["quiet", "nosmt", "y", "a=b c", "systemd.unified_cgroup_hierarchy=1"])
                                for _ in range(rng.randint(0, 3))],
            "extensions": [rng.choice(["usbguard", "kerberos", "kernel-devel"]) for _ in range(rng.randint(0, 2))],
            "fips": rng.choice([True, False]),
            "kernelType": rng.choice(["default", "realtime", "64k-pages"])}


def main():
    rng = random.Random(20261201)
    cases = [spec(rng, {"ignition": {"version": "3.5.0"}})]
    cases.append(spec(rng, {"ignition": {"version": "3.5.0"},
                            "storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,a", "compression": ""}, "overwrite": True}]}}))
    # Every field once, then random subsets.
    cases.append(spec(rng, struct(rng, SCHEMA, density=1.0)))
    for _ in range(150):
        cases.append(spec(rng, struct(rng, SCHEMA, density=0.35)))
    with open("render-name.cases.jsonl", "w") as f:
        for c in cases:
            f.write(json.dumps({"typed": True, "spec": c}, ensure_ascii=True, sort_keys=True) + "\n")


main()
