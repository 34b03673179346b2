//! The benchmark's MachineConfigs: a worker pool shaped like an OpenShift cluster's
//! (`00-worker`, `01-worker-container-runtime`, `01-worker-kubelet`, the `9x-worker-generated-*`
//! configs of KubeletConfig/ContainerRuntimeConfig/ImageDigestMirrorSet, admin configs, and
//! compliance-operator remediations), generated deterministically into `bench/machineconfigs`.
//!
//! Hand-written contents live in `testing/xtask/fixture/` (scripts, units, kubelet, CRI-O and
//! registries configuration); bulk contents (CA bundles, audit rules, sysctls) are produced
//! here from a seeded SHA-256 stream, so the same code always writes the same bytes. Nothing
//! in it is a secret: the "certificates" are random bytes shaped like PEM.
//!
//! Files are encoded as the MCO writes them: base64 `data:` URLs for the templates and
//! bundles, percent-encoded `data:,` URLs for the small generated ones. All configs use
//! Ignition spec 3.4.0 except the Butane-style chrony one (3.2.0).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// How a file's contents are written into its `data:` URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    /// `data:text/plain;charset=utf-8;base64,…`
    Base64,
    /// `data:,…` with everything but RFC 3986 unreserved characters percent-encoded.
    Percent,
}

/// One `storage.files` entry.
struct File {
    path: String,
    mode: u32,
    contents: Vec<u8>,
    encoding: Encoding,
}

/// One `systemd.units` entry.
#[derive(Default)]
struct Unit {
    name: String,
    contents: Option<String>,
    enabled: Option<bool>,
    mask: bool,
    dropins: Vec<(String, String)>,
}

/// One MachineConfig manifest.
struct MachineConfig {
    name: String,
    /// A comment line at the top of the manifest.
    comment: String,
    version: &'static str,
    /// Written by a controller (gets the generated-by annotation).
    generated: bool,
    files: Vec<File>,
    units: Vec<Unit>,
    ssh_keys: Vec<String>,
    kernel_arguments: Vec<String>,
}

impl MachineConfig {
    fn new(name: &str, comment: &str, generated: bool) -> MachineConfig {
        MachineConfig {
            name: name.to_owned(),
            comment: comment.to_owned(),
            version: "3.4.0",
            generated,
            files: Vec::new(),
            units: Vec::new(),
            ssh_keys: Vec::new(),
            kernel_arguments: Vec::new(),
        }
    }

    fn file(&mut self, path: &str, mode: u32, contents: impl Into<Vec<u8>>, encoding: Encoding) {
        self.files.push(File {
            path: path.to_owned(),
            mode,
            contents: contents.into(),
            encoding,
        });
    }

    fn unit(&mut self, name: &str, contents: Option<&str>, enabled: Option<bool>) -> &mut Unit {
        self.units.push(Unit {
            name: name.to_owned(),
            contents: contents.map(str::to_owned),
            enabled,
            ..Unit::default()
        });
        self.units.last_mut().expect("just pushed")
    }
}

/// A deterministic byte stream: SHA-256 of `label || counter`, block after block.
struct Stream {
    label: Vec<u8>,
    counter: u64,
    block: Vec<u8>,
}

impl Stream {
    fn new(label: &str) -> Stream {
        Stream {
            label: label.as_bytes().to_vec(),
            counter: 0,
            block: Vec::new(),
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if self.block.is_empty() {
                let mut h = Sha256::new();
                h.update(&self.label);
                h.update(self.counter.to_be_bytes());
                self.counter += 1;
                self.block = h.finalize().to_vec();
            }
            let take = (n - out.len()).min(self.block.len());
            out.extend(self.block.drain(..take));
        }
        out
    }

    fn below(&mut self, n: u32) -> u32 {
        let b = self.bytes(4);
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]) % n
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn percent(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() * 2);
    for &b in data {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn data_url(contents: &[u8], encoding: Encoding) -> String {
    match encoding {
        Encoding::Base64 => format!("data:text/plain;charset=utf-8;base64,{}", base64(contents)),
        Encoding::Percent => format!("data:,{}", percent(contents)),
    }
}

/// Fictional issuers for the CA bundles.
const ORGS: &[&str] = &[
    "Example Corp",
    "Acme Widgets",
    "Globex Infrastructure",
    "Initech Platform",
    "Umbrella Networks",
    "Stark Industrial Systems",
    "Wayne Enterprises IT",
    "Hooli Cloud",
    "Tyrell Engineering",
    "Cyberdyne Labs",
];

const CA_KINDS: &[&str] = &[
    "Root CA",
    "Root CA G2",
    "Issuing CA 01",
    "Issuing CA 02",
    "Proxy Inspection CA",
    "Internal Services CA",
];

/// A PEM bundle of `count` certificate-shaped blocks (random DER-looking bytes), each
/// preceded by a `# Subject` comment as in a distribution CA bundle.
fn pem_bundle(label: &str, count: usize) -> String {
    let mut s = Stream::new(label);
    let mut out = String::new();
    for i in 0..count {
        let org = ORGS[s.below(ORGS.len() as u32) as usize];
        let kind = CA_KINDS[s.below(CA_KINDS.len() as u32) as usize];
        let year = 2015 + s.below(10);
        let len = 880 + s.below(700) as usize;
        let mut der = vec![0x30, 0x82, (len >> 8) as u8, len as u8, 0x30, 0x82];
        der.extend(s.bytes(len - 2));
        let _ = writeln!(out, "# {org} {kind} {year} ({i})");
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let b64 = base64(&der);
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

/// Compliance-operator style audit rules: (rule id, syscalls or paths, key).
const AUDIT_RULES: &[(&str, &[&str], &str)] = &[
    (
        "audit-rules-dac-modification-chmod",
        &["chmod", "fchmod", "fchmodat"],
        "perm_mod",
    ),
    (
        "audit-rules-dac-modification-chown",
        &["chown", "fchown", "fchownat", "lchown"],
        "perm_mod",
    ),
    (
        "audit-rules-dac-modification-setxattr",
        &[
            "setxattr",
            "lsetxattr",
            "fsetxattr",
            "removexattr",
            "lremovexattr",
            "fremovexattr",
        ],
        "perm_mod",
    ),
    (
        "audit-rules-file-deletion-events",
        &["unlink", "unlinkat", "rename", "renameat", "rmdir"],
        "delete",
    ),
    (
        "audit-rules-unsuccessful-file-modification",
        &[
            "creat",
            "open",
            "openat",
            "open_by_handle_at",
            "truncate",
            "ftruncate",
        ],
        "access",
    ),
    (
        "audit-rules-kernel-module-loading",
        &["init_module", "finit_module", "delete_module"],
        "modules",
    ),
    (
        "audit-rules-time-adjtimex",
        &["adjtimex", "settimeofday", "clock_settime"],
        "audit_time_rules",
    ),
    ("audit-rules-mount", &["mount", "umount2"], "perm_mod"),
    (
        "audit-rules-privileged-commands",
        &[
            "/usr/bin/sudo",
            "/usr/bin/su",
            "/usr/bin/passwd",
            "/usr/bin/chage",
            "/usr/bin/newgrp",
            "/usr/bin/gpasswd",
            "/usr/bin/mount",
            "/usr/bin/umount",
            "/usr/bin/crontab",
            "/usr/sbin/unix_chkpwd",
            "/usr/sbin/pam_timestamp_check",
            "/usr/libexec/openssh/ssh-keysign",
        ],
        "privileged",
    ),
    (
        "audit-rules-login-events",
        &["/var/log/lastlog", "/var/run/faillock", "/var/log/tallylog"],
        "logins",
    ),
    (
        "audit-rules-session-events",
        &["/var/run/utmp", "/var/log/btmp", "/var/log/wtmp"],
        "session",
    ),
    (
        "audit-rules-usergroup-modification",
        &[
            "/etc/group",
            "/etc/passwd",
            "/etc/gshadow",
            "/etc/shadow",
            "/etc/security/opasswd",
        ],
        "audit_rules_usergroup_modification",
    ),
    (
        "audit-rules-networkconfig-modification",
        &[
            "/etc/issue",
            "/etc/issue.net",
            "/etc/hosts",
            "/etc/sysconfig/network",
        ],
        "audit_rules_networkconfig_modification",
    ),
    (
        "audit-rules-sysadmin-actions",
        &["/etc/sudoers", "/etc/sudoers.d/"],
        "actions",
    ),
    (
        "audit-rules-mac-modification",
        &["/etc/selinux/"],
        "MAC-policy",
    ),
    ("audit-rules-immutable", &[], ""),
];

fn audit_rules(syscalls_or_paths: &[&str], key: &str) -> String {
    if syscalls_or_paths.is_empty() {
        return "## Make the audit configuration immutable; a reboot is needed to change it.\n-e 2\n"
            .to_owned();
    }
    let mut out = String::new();
    if syscalls_or_paths[0].starts_with('/') {
        for p in syscalls_or_paths {
            if key == "privileged" {
                let _ = writeln!(
                    out,
                    "-a always,exit -F path={p} -F perm=x -F auid>=1000 -F auid!=unset -F key={key}"
                );
            } else {
                let _ = writeln!(out, "-w {p} -p wa -k {key}");
            }
        }
        return out;
    }
    for arch in ["b32", "b64"] {
        let list: Vec<String> = syscalls_or_paths
            .iter()
            .map(|s| format!("-S {s}"))
            .collect();
        let list = list.join(" ");
        if key == "access" {
            for exit in ["-EACCES", "-EPERM"] {
                let _ = writeln!(
                    out,
                    "-a always,exit -F arch={arch} {list} -F exit={exit} -F auid>=1000 -F auid!=unset -F key={key}"
                );
            }
        } else {
            let _ = writeln!(
                out,
                "-a always,exit -F arch={arch} {list} -F auid>=1000 -F auid!=unset -F key={key}"
            );
        }
    }
    out
}

/// Compliance-operator style sysctl remediations: (rule id, key, value).
const SYSCTLS: &[(&str, &str, &str)] = &[
    ("sysctl-kernel-kptr-restrict", "kernel.kptr_restrict", "1"),
    ("sysctl-kernel-dmesg-restrict", "kernel.dmesg_restrict", "1"),
    (
        "sysctl-kernel-perf-event-paranoid",
        "kernel.perf_event_paranoid",
        "2",
    ),
    (
        "sysctl-kernel-unprivileged-bpf-disabled",
        "kernel.unprivileged_bpf_disabled",
        "1",
    ),
    (
        "sysctl-kernel-yama-ptrace-scope",
        "kernel.yama.ptrace_scope",
        "1",
    ),
    (
        "sysctl-net-core-bpf-jit-harden",
        "net.core.bpf_jit_harden",
        "2",
    ),
    (
        "sysctl-net-ipv4-conf-all-accept-redirects",
        "net.ipv4.conf.all.accept_redirects",
        "0",
    ),
    (
        "sysctl-net-ipv4-conf-all-log-martians",
        "net.ipv4.conf.all.log_martians",
        "1",
    ),
    (
        "sysctl-net-ipv4-icmp-echo-ignore-broadcasts",
        "net.ipv4.icmp_echo_ignore_broadcasts",
        "1",
    ),
    (
        "sysctl-net-ipv6-conf-all-accept-ra",
        "net.ipv6.conf.all.accept_ra",
        "0",
    ),
    ("sysctl-fs-protected-fifos", "fs.protected_fifos", "2"),
];

const MODE_FILE: u32 = 0o644;
const MODE_EXEC: u32 = 0o755;
const MODE_PRIVATE: u32 = 0o600;

macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/fixture/", $path))
    };
}

fn worker_00() -> MachineConfig {
    use Encoding::{Base64, Percent};
    let mut mc = MachineConfig::new(
        "00-worker",
        "The MCO's template config for the worker role (templates/worker/00-worker, OVN-Kubernetes).",
        true,
    );
    mc.file(
        "/etc/kubernetes/kubelet-ca.crt",
        MODE_FILE,
        pem_bundle("kubelet-ca", 3),
        Base64,
    );
    mc.file(
        "/etc/kubernetes/ca.crt",
        MODE_FILE,
        pem_bundle("kube-apiserver-ca", 1),
        Base64,
    );
    mc.file(
        "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
        MODE_FILE,
        pem_bundle("user-ca-bundle", 40),
        Base64,
    );
    for (name, body) in [
        (
            "inotify.conf",
            "fs.inotify.max_user_watches = 65536\nfs.inotify.max_user_instances = 8192\n",
        ),
        (
            "forward.conf",
            "net.ipv4.ip_forward = 1\nnet.ipv6.conf.all.forwarding = 1\n",
        ),
        (
            "arp.conf",
            "net.ipv4.conf.all.arp_announce = 2\nnet.ipv4.conf.default.arp_announce = 2\nnet.ipv4.conf.all.arp_ignore = 0\n",
        ),
        (
            "gc-thresh.conf",
            "net.ipv4.neigh.default.gc_thresh1 = 8192\nnet.ipv4.neigh.default.gc_thresh2 = 32768\nnet.ipv4.neigh.default.gc_thresh3 = 65536\nnet.ipv6.neigh.default.gc_thresh1 = 8192\nnet.ipv6.neigh.default.gc_thresh2 = 32768\nnet.ipv6.neigh.default.gc_thresh3 = 65536\n",
        ),
        (
            "enable-userfaultfd.conf",
            "vm.unprivileged_userfaultfd = 1\n",
        ),
        ("vm-max-map.conf", "vm.max_map_count = 262144\n"),
    ] {
        mc.file(&format!("/etc/sysctl.d/{name}"), MODE_FILE, body, Percent);
    }
    mc.file(
        "/etc/modules-load.d/iptables.conf",
        MODE_FILE,
        "# Load iptables modules needed by kube-proxy and the CNI plugins at boot.\nip_tables\niptable_nat\niptable_filter\niptable_mangle\nip6_tables\nip6table_nat\nip6table_filter\nbr_netfilter\n",
        Percent,
    );
    mc.file(
        "/etc/systemd/system.conf.d/10-default-env-godebug.conf",
        MODE_FILE,
        "[Manager]\nDefaultEnvironment=GODEBUG=x509ignoreCN=0,madvdontneed=1\n",
        Percent,
    );
    mc.file(
        "/etc/NetworkManager/conf.d/99-keyfiles.conf",
        MODE_FILE,
        "[keyfile]\npath=/etc/NetworkManager/systemConnectionsMerged\n\n[main]\nplugins=keyfile,ifcfg-rh\n",
        Base64,
    );
    mc.file(
        "/etc/NetworkManager/conf.d/sdn.conf",
        MODE_FILE,
        "[main]\nrc-manager=unmanaged\n[keyfile]\nunmanaged-devices=interface-name:veth*;interface-name:ovn-k8s-*;interface-name:ovs-*;interface-name:br-int;interface-name:genev_sys_*;interface-name:vxlan_sys_*\n",
        Base64,
    );
    mc.file(
        "/etc/NetworkManager/dispatcher.d/30-resolv-prepender",
        MODE_EXEC,
        fixture!("files/resolv-prepender.sh"),
        Base64,
    );
    mc.file(
        "/etc/NetworkManager/dispatcher.d/99-vsphere-disable-tx-udp-tnl",
        MODE_EXEC,
        fixture!("files/vsphere-disable-tx-udp-tnl"),
        Base64,
    );
    mc.file(
        "/etc/NetworkManager/dispatcher.d/pre-up.d/10-ofport-request.sh",
        MODE_EXEC,
        fixture!("files/ofport-request.sh"),
        Base64,
    );
    mc.file(
        "/usr/local/bin/configure-ovs.sh",
        MODE_EXEC,
        fixture!("files/configure-ovs.sh"),
        Base64,
    );
    mc.file(
        "/usr/local/bin/mco-hostname",
        MODE_EXEC,
        fixture!("files/mco-hostname"),
        Base64,
    );
    mc.file(
        "/usr/local/bin/nm-clean-initrd-state.sh",
        MODE_EXEC,
        fixture!("files/nm-clean-initrd-state.sh"),
        Base64,
    );
    mc.file(
        "/usr/local/bin/configure-ip-forwarding.sh",
        MODE_EXEC,
        fixture!("files/configure-ip-forwarding.sh"),
        Base64,
    );
    mc.file(
        "/usr/local/bin/resolv-prepender.sh",
        MODE_EXEC,
        "#!/bin/bash\n# Put the node's own resolver first, keep NetworkManager's servers after it.\nset -euo pipefail\nsource /run/resolv-prepender/env\nprintf 'search %s\\nnameserver %s\\n' \"$DOMAIN\" \"$NAMESERVER_IP\" > /etc/resolv.conf.tmp\ngrep -v -e '^search' -e '^#' /var/run/NetworkManager/resolv.conf >> /etc/resolv.conf.tmp\nmv -f /etc/resolv.conf.tmp /etc/resolv.conf\n",
        Base64,
    );
    mc.file(
        "/usr/local/sbin/dynamic-system-reserved-calc.sh",
        MODE_EXEC,
        fixture!("files/dynamic-system-reserved-calc.sh"),
        Base64,
    );
    mc.file(
        "/etc/machine-config-daemon/generate_podman_policy_args.sh",
        MODE_EXEC,
        "#!/bin/bash\n# Use the cluster's signature policy for podman pulls when one is configured.\nif [ -e /etc/machine-config-daemon/policy-for-old-podman.json ]; then\n  echo \"--signature-policy=/etc/machine-config-daemon/policy-for-old-podman.json\" > /tmp/podman_policy_args\nelse\n  echo \"\" > /tmp/podman_policy_args\nfi\n",
        Base64,
    );
    mc.file(
        "/etc/mco/proxy.env",
        MODE_FILE,
        "HTTP_PROXY=http://proxy.example.com:3128\nHTTPS_PROXY=http://proxy.example.com:3128\nNO_PROXY=.cluster.local,.svc,10.128.0.0/14,127.0.0.1,172.30.0.0/16,api-int.ocp.example.com,localhost\n",
        Base64,
    );
    mc.file(
        "/etc/kubernetes/apiserver-url.env",
        MODE_FILE,
        "KUBERNETES_SERVICE_HOST='api-int.ocp.example.com'\nKUBERNETES_SERVICE_PORT='6443'\n",
        Base64,
    );
    mc.file("/etc/kubernetes/cloud.conf", MODE_FILE, "", Base64);
    mc.file(
        "/etc/kubernetes/kubelet-plugins/volume/exec/.dummy",
        MODE_FILE,
        "",
        Percent,
    );
    mc.file(
        "/etc/tmpfiles.d/cleanup-cni.conf",
        MODE_FILE,
        "r /etc/kubernetes/cni/net.d/80-openshift-network.conf\nr /etc/kubernetes/cni/net.d/10-ovn-kubernetes.conf\nd /run/multus/cni/net.d/ 0755 root root - -\nD /var/lib/cni/networks/openshift-sdn/ 0755 root root - -\n",
        Base64,
    );
    mc.file(
        "/etc/audit/rules.d/mco-audit-quiet-containers.rules",
        MODE_FILE,
        "## Ignore the audit events of container runtimes' own housekeeping.\n-a exclude,always -F msgtype=NETFILTER_CFG\n-a exclude,always -F msgtype=ANOM_PROMISCUOUS\n-a never,exit -F arch=b64 -S unshare -F exe=/usr/bin/runc\n-a never,exit -F arch=b64 -S unshare -F exe=/usr/bin/crun\n-a never,exit -F arch=b64 -S unshare -F exe=/usr/bin/conmon\n",
        Base64,
    );
    mc.file(
        "/etc/node-sizing-enabled.env",
        MODE_FILE,
        "NODE_SIZING_ENABLED=false\nSYSTEM_RESERVED_MEMORY=1Gi\nSYSTEM_RESERVED_CPU=500m\nSYSTEM_RESERVED_ES=1Gi\n",
        Base64,
    );
    mc.file(
        "/etc/udev/rules.d/99-nvme-io-timeout.rules",
        MODE_FILE,
        "# Give EBS volumes behind NVMe controllers time to recover from transient stalls.\nACTION==\"add\", SUBSYSTEM==\"nvme\", KERNEL==\"nvme[0-9]*\", ATTRS{model}==\"Amazon Elastic Block Store\", ATTR{queue/io_timeout}=\"4294967295\"\n",
        Base64,
    );

    mc.unit(
        "kubelet-dependencies.target",
        Some(fixture!("units/kubelet-dependencies.target")),
        None,
    );
    for name in [
        "machine-config-daemon-pull.service",
        "machine-config-daemon-firstboot.service",
        "node-valid-hostname.service",
        "nodeip-configuration.service",
        "ovs-configuration.service",
        "wait-for-primary-ip.service",
        "kubelet-auto-node-size.service",
        "configure-ip-forwarding.service",
    ] {
        let contents = unit_source(name);
        mc.unit(name, Some(contents), Some(true));
    }
    mc.unit(
        "resolv-prepender.service",
        Some(fixture!("units/resolv-prepender.service")),
        None,
    );
    mc.unit("openvswitch.service", None, Some(true));
    mc.unit("ovs-vswitchd.service", None, None).dropins.push((
        "10-ovs-vswitchd-restart.conf".to_owned(),
        "[Service]\nRestart=always\nRestartSec=1\n".to_owned(),
    ));
    mc.unit("ovsdb-server.service", None, None).dropins.push((
        "10-ovsdb-restart.conf".to_owned(),
        "[Service]\nRestart=always\nRestartSec=1\nExecStartPost=-/usr/bin/ovs-appctl vlog/set syslog:info\n".to_owned(),
    ));
    let crio = mc.unit("crio.service", None, None);
    crio.dropins.push((
        "10-mco-default-env.conf".to_owned(),
        "[Service]\nEnvironmentFile=-/etc/kubernetes/apiserver-url.env\nEnvironmentFile=-/etc/mco/proxy.env\n".to_owned(),
    ));
    crio.dropins.push((
        "10-mco-profile-unix-socket.conf".to_owned(),
        "[Service]\nEnvironment=\"ENABLE_PROFILE_UNIX_SOCKET=true\"\n".to_owned(),
    ));
    crio.dropins.push((
        "10-mco-default-madv.conf".to_owned(),
        "[Service]\nEnvironment=\"GODEBUG=x509ignoreCN=0,madvdontneed=1\"\n".to_owned(),
    ));
    // OKD-style: the node is updated by the MCO, not by zincati, which the base enables.
    mc.unit("zincati.service", None, Some(false));
    mc
}

fn unit_source(name: &str) -> &'static str {
    match name {
        "machine-config-daemon-pull.service" => {
            fixture!("units/machine-config-daemon-pull.service")
        }
        "machine-config-daemon-firstboot.service" => {
            fixture!("units/machine-config-daemon-firstboot.service")
        }
        "node-valid-hostname.service" => fixture!("units/node-valid-hostname.service"),
        "nodeip-configuration.service" => fixture!("units/nodeip-configuration.service"),
        "ovs-configuration.service" => fixture!("units/ovs-configuration.service"),
        "wait-for-primary-ip.service" => fixture!("units/wait-for-primary-ip.service"),
        "kubelet-auto-node-size.service" => fixture!("units/kubelet-auto-node-size.service"),
        "configure-ip-forwarding.service" => fixture!("units/configure-ip-forwarding.service"),
        other => unreachable!("no fixture unit {other}"),
    }
}

fn machine_configs() -> Vec<MachineConfig> {
    use Encoding::{Base64, Percent};
    let mut out = vec![worker_00()];

    let mut runtime = MachineConfig::new(
        "01-worker-container-runtime",
        "The MCO's container runtime template config for the worker role.",
        true,
    );
    runtime.file(
        "/etc/crio/crio.conf.d/00-default",
        MODE_FILE,
        fixture!("files/crio-00-default"),
        Base64,
    );
    runtime.file(
        "/etc/containers/policy.json",
        MODE_FILE,
        fixture!("files/policy.json"),
        Base64,
    );
    runtime.file(
        "/etc/containers/registries.conf",
        MODE_FILE,
        "unqualified-search-registries = [\"registry.access.redhat.com\", \"docker.io\"]\nshort-name-mode = \"\"\n",
        Base64,
    );
    runtime.file(
        "/etc/containers/storage.conf",
        MODE_FILE,
        fixture!("files/storage.conf"),
        Base64,
    );
    out.push(runtime);

    let mut kubelet = MachineConfig::new(
        "01-worker-kubelet",
        "The MCO's kubelet template config for the worker role.",
        true,
    );
    kubelet.file(
        "/etc/kubernetes/kubelet.conf",
        MODE_FILE,
        fixture!("files/kubelet.conf"),
        Base64,
    );
    kubelet.file(
        "/etc/systemd/system.conf.d/kubelet-cgroups.conf",
        MODE_FILE,
        "# Turning on Accounting helps track down performance issues.\n[Manager]\nDefaultCPUAccounting=yes\nDefaultMemoryAccounting=yes\nDefaultBlockIOAccounting=yes\n",
        Percent,
    );
    kubelet.file(
        "/etc/kubernetes/kubelet-workaround",
        MODE_FILE,
        "KUBELET_LOG_LEVEL=2\n",
        Percent,
    );
    let unit = kubelet.unit(
        "kubelet.service",
        Some(fixture!("units/kubelet.service")),
        Some(true),
    );
    unit.dropins.push((
        "01-kubens.conf".to_owned(),
        "[Unit]\nAfter=kubens.service\n[Service]\nEnvironmentFile=-/run/kubens/env\n".to_owned(),
    ));
    unit.dropins.push((
        "10-mco-default-env.conf".to_owned(),
        "[Service]\nEnvironmentFile=-/etc/kubernetes/apiserver-url.env\nEnvironmentFile=-/etc/mco/proxy.env\n".to_owned(),
    ));
    unit.dropins.push((
        "20-logging.conf".to_owned(),
        "[Service]\nEnvironment=\"KUBELET_LOG_LEVEL=2\"\n".to_owned(),
    ));
    out.push(kubelet);

    let mut sizing = MachineConfig::new(
        "97-worker-generated-kubelet",
        "KubeletConfig autoSizingReserved: true.",
        true,
    );
    sizing.file(
        "/etc/node-sizing-enabled.env",
        MODE_FILE,
        "NODE_SIZING_ENABLED=true\nSYSTEM_RESERVED_MEMORY=1Gi\nSYSTEM_RESERVED_CPU=500m\nSYSTEM_RESERVED_ES=1Gi\n",
        Base64,
    );
    out.push(sizing);

    let mut custom = MachineConfig::new(
        "98-worker-generated-kubelet",
        "KubeletConfig set-max-pods: replaces 01-worker-kubelet's kubelet.conf.",
        true,
    );
    custom.file(
        "/etc/kubernetes/kubelet.conf",
        MODE_FILE,
        fixture!("files/kubelet-custom.conf"),
        Base64,
    );
    out.push(custom);

    let mut runtime_cfg = MachineConfig::new(
        "99-worker-generated-containerruntime",
        "ContainerRuntimeConfig: pidsLimit and logSizeMax.",
        true,
    );
    runtime_cfg.file(
        "/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit",
        MODE_FILE,
        "[crio]\n  [crio.runtime]\n    pids_limit = 8192\n",
        Base64,
    );
    runtime_cfg.file(
        "/etc/crio/crio.conf.d/01-ctrcfg-logSizeMax",
        MODE_FILE,
        "[crio]\n  [crio.runtime]\n    log_size_max = 52428800\n",
        Base64,
    );
    out.push(runtime_cfg);

    let mut registries = MachineConfig::new(
        "99-worker-generated-registries",
        "ImageDigestMirrorSet and ImageTagMirrorSet of a disconnected cluster: replaces registries.conf.",
        true,
    );
    registries.file(
        "/etc/containers/registries.conf",
        MODE_FILE,
        fixture!("files/registries.conf"),
        Base64,
    );
    out.push(registries);

    let mut ssh = MachineConfig::new(
        "99-worker-ssh",
        "The installer's SSH key for core (ignition-apply leaves passwd alone).",
        false,
    );
    ssh.ssh_keys.push(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ4bWrj2EfYd4AU6fAs0YLm9Zz4b8G3yk5CbpGXMLe3A admin@example.com"
            .to_owned(),
    );
    out.push(ssh);

    let mut chrony = MachineConfig::new(
        "99-worker-chrony",
        "Butane-generated (openshift-docs \"Configuring chrony time service\").",
        false,
    );
    chrony.version = "3.2.0";
    chrony.file(
        "/etc/chrony.conf",
        MODE_FILE,
        fixture!("files/chrony.conf"),
        Base64,
    );
    out.push(chrony);

    let mut journald = MachineConfig::new(
        "40-worker-journald",
        "openshift-docs \"Configuring journald settings\".",
        false,
    );
    journald.file(
        "/etc/systemd/journald.conf.d/40-worker-journald.conf",
        MODE_FILE,
        fixture!("files/journald.conf"),
        Base64,
    );
    out.push(journald);

    let mut fstrim = MachineConfig::new(
        "99-worker-mask-fstrim",
        "Storage arrays that trim themselves: never run fstrim on the nodes.",
        false,
    );
    fstrim.units.push(Unit {
        name: "fstrim.timer".to_owned(),
        mask: true,
        ..Unit::default()
    });
    out.push(fstrim);

    let mut kargs = MachineConfig::new(
        "05-worker-kernelarg-psi",
        "Kernel arguments only: nothing for ignition-apply to write.",
        false,
    );
    kargs.kernel_arguments = vec![
        "psi=1".to_owned(),
        "systemd.unified_cgroup_hierarchy=1".to_owned(),
    ];
    out.push(kargs);

    for (rule, list, key) in AUDIT_RULES {
        let mut mc = MachineConfig::new(
            &format!("75-ocp4-cis-node-worker-{rule}"),
            "Compliance Operator remediation (ocp4-cis-node profile).",
            true,
        );
        mc.file(
            &format!(
                "/etc/audit/rules.d/75-{}.rules",
                rule.trim_start_matches("audit-rules-")
            ),
            MODE_PRIVATE,
            audit_rules(list, key),
            Percent,
        );
        out.push(mc);
    }
    for (rule, key, value) in SYSCTLS {
        let mut mc = MachineConfig::new(
            &format!("75-ocp4-cis-node-worker-{rule}"),
            "Compliance Operator remediation (ocp4-cis-node profile).",
            true,
        );
        mc.file(
            &format!("/etc/sysctl.d/75-{}.conf", key.replace('.', "_")),
            MODE_FILE,
            format!("{key}={value}\n"),
            Percent,
        );
        out.push(mc);
    }
    out
}

fn literal_block(out: &mut String, indent: &str, text: &str) {
    out.push_str("|\n");
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{indent}{line}");
        }
    }
}

fn yaml(mc: &MachineConfig) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "# {}", mc.comment);
    y.push_str(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n",
    );
    if mc.generated {
        y.push_str("  annotations:\n    machineconfiguration.openshift.io/generated-by-controller-version: 5f1e0c3d7b2a9e8f6c4d1b0a3e5f7c9d2b4a6e8f\n");
    }
    let _ = writeln!(
        y,
        "  labels:\n    machineconfiguration.openshift.io/role: worker\n  name: {}",
        mc.name
    );
    y.push_str("spec:\n  config:\n");
    let _ = writeln!(y, "    ignition:\n      version: {}", mc.version);
    if !mc.ssh_keys.is_empty() {
        y.push_str("    passwd:\n      users:\n      - name: core\n        sshAuthorizedKeys:\n");
        for k in &mc.ssh_keys {
            let _ = writeln!(y, "        - {k}");
        }
    }
    if !mc.files.is_empty() {
        y.push_str("    storage:\n      files:\n");
        for f in &mc.files {
            let _ = writeln!(
                y,
                "      - contents:\n          source: {}\n        mode: {}\n        overwrite: true\n        path: {}",
                data_url(&f.contents, f.encoding),
                f.mode,
                f.path
            );
        }
    }
    if !mc.units.is_empty() {
        y.push_str("    systemd:\n      units:\n");
        for u in &mc.units {
            let mut first = true;
            let mut key = |y: &mut String| {
                y.push_str(if first { "      - " } else { "        " });
                first = false;
            };
            if let Some(c) = &u.contents {
                key(&mut y);
                y.push_str("contents: ");
                literal_block(&mut y, "          ", c);
            }
            if !u.dropins.is_empty() {
                key(&mut y);
                y.push_str("dropins:\n");
                for (name, contents) in &u.dropins {
                    y.push_str("        - contents: ");
                    literal_block(&mut y, "            ", contents);
                    let _ = writeln!(y, "          name: {name}");
                }
            }
            if let Some(e) = u.enabled {
                key(&mut y);
                let _ = writeln!(y, "enabled: {e}");
            }
            if u.mask {
                key(&mut y);
                y.push_str("mask: true\n");
            }
            key(&mut y);
            let _ = writeln!(y, "name: {}", u.name);
        }
    }
    if mc.kernel_arguments.is_empty() {
        y.push_str("  kernelArguments: []\n");
    } else {
        y.push_str("  kernelArguments:\n");
        for k in &mc.kernel_arguments {
            let _ = writeln!(y, "  - {k}");
        }
    }
    y.push_str("  extensions: []\n  fips: false\n  kernelType: \"\"\n  osImageURL: \"\"\n");
    y
}

/// The fixture's manifests: `(file name, contents)`, sorted by file name.
pub fn manifests() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = machine_configs()
        .iter()
        .map(|mc| (format!("{}.yaml", mc.name), yaml(mc)))
        .collect();
    out.sort();
    out
}

/// What [`write()`] wrote.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Number of manifests.
    pub manifests: usize,
    /// Number of `storage.files` entries over all manifests.
    pub files: usize,
    /// Number of `systemd.units` entries over all manifests.
    pub units: usize,
    /// Total size of the manifests in bytes.
    pub bytes: usize,
}

/// Counts of the generated fixture.
pub fn summary() -> Summary {
    let mcs = machine_configs();
    Summary {
        manifests: mcs.len(),
        files: mcs.iter().map(|m| m.files.len()).sum(),
        units: mcs.iter().map(|m| m.units.len()).sum(),
        bytes: manifests().iter().map(|(_, y)| y.len()).sum(),
    }
}

/// Writes the manifests into `dir` (created if missing), removing `*.yaml` files that are
/// no longer part of the fixture.
pub fn write(dir: &Path) -> Result<Summary> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let manifests = manifests();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".yaml") && !manifests.iter().any(|(n, _)| n == name) {
            std::fs::remove_file(&path)
                .with_context(|| format!("removing stale {}", path.display()))?;
        }
    }
    for (name, contents) in &manifests {
        let path = dir.join(name);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn percent_keeps_only_unreserved() {
        assert_eq!(percent(b"a-b_c.d~e f/\n%"), "a-b_c.d~e%20f%2F%0A%25");
    }

    #[test]
    fn fixture_has_the_required_shape() {
        let s = summary();
        assert!(s.files >= 50, "{s:?}");
        assert!(s.units >= 10, "{s:?}");
        assert!((150_000..=260_000).contains(&s.bytes), "{s:?}");
        let all: String = manifests().into_iter().map(|(_, y)| y).collect();
        assert!(all.contains("mask: true"));
        assert!(all.contains("enabled: false"));
        assert!(all.contains("enabled: true"));
        assert!(all.contains("dropins:"));
    }

    #[test]
    fn checked_in_fixture_is_up_to_date() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/machineconfigs");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        on_disk.sort();
        let generated = manifests();
        let names: Vec<&String> = generated.iter().map(|(n, _)| n).collect();
        assert_eq!(
            on_disk.iter().collect::<Vec<_>>(),
            names,
            "run `xtask fixture`"
        );
        for (name, contents) in &generated {
            let disk = std::fs::read_to_string(dir.join(name)).unwrap();
            assert!(&disk == contents, "{name} is stale: run `xtask fixture`");
        }
    }
}
