//! The one internal model of an Ignition config: spec 3.6.0, as typed serde structs.
//!
//! Every accepted spec version (3.0.0–3.6.0) is a subset of 3.6.0 in JSON terms (3.6.0 adds
//! no key to 3.5.0), so older configs deserialize straight into these types; the one
//! semantic change between versions, setuid/setgid/sticky bits honoured from 3.6.0 on, is
//! [`mask_special_bits`](crate::parse::mask_special_bits). Fields mirror Ignition's Go types:
//! `Option` where Go has a pointer (absent and `null` are the same), `Vec` where Go has a
//! slice (`null` is an empty list). Serialization omits empty values, like the MCO's
//! `clarketm/json` with `omitempty`, so a rendered config prints as the MCO prints it.

use serde::{Deserialize, Deserializer, Serialize};

/// `null` in JSON deserializes to the default value, as a Go nil slice or zero struct does.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A string shared by reference count: cloning a config, or keeping a resource as a file's
/// contents, never copies it; deserializing copies it once (straight into the shared
/// buffer, where `Arc<str>`'s own impl goes through a `String` first).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharedStr(std::sync::Arc<str>);

impl std::ops::Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        SharedStr(s.into())
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        SharedStr(s.into())
    }
}

impl std::fmt::Display for SharedStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for SharedStr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = SharedStr;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SharedStr, E> {
                Ok(SharedStr(v.into()))
            }
        }
        d.deserialize_str(V)
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

macro_rules! ign_struct {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            $(
                $(#[$fm])*
                #[serde(default, deserialize_with = "null_default", skip_serializing_if = "is_default")]
                pub $field: $ty,
            )*
        }
    };
}

ign_struct! {
    /// A whole Ignition config.
    pub struct Config {
        /// `ignition`: version, child configs, fetch settings.
        ignition: Ignition,
        /// `kernelArguments` (3.3.0+): never applied by ignition-apply.
        kernel_arguments: KernelArguments,
        /// `passwd`: never applied by ignition-apply.
        passwd: Passwd,
        /// `storage`: files, directories and links are applied; the rest is ignored.
        storage: Storage,
        /// `systemd`: units, drop-ins, masks and presets.
        systemd: Systemd,
    }
}

ign_struct! {
    /// The `ignition` section.
    pub struct Ignition {
        /// `ignition.version`, such as `3.6.0`: as declared (parsing does not rewrite it).
        version: Option<String>,
        /// `ignition.config`: merge or replace with child configs.
        config: IgnitionConfig,
        /// `ignition.proxy`.
        proxy: Proxy,
        /// `ignition.security`.
        security: Security,
        /// `ignition.timeouts`.
        timeouts: Timeouts,
    }
}

ign_struct! {
    /// `ignition.config`.
    pub struct IgnitionConfig {
        /// Child configs merged over this one, in order.
        merge: Vec<Resource>,
        /// A config that replaces this one entirely.
        replace: Resource,
    }
}

ign_struct! {
    /// `ignition.proxy`.
    pub struct Proxy {
        /// HTTP proxy URL.
        http_proxy: Option<String>,
        /// HTTPS proxy URL.
        https_proxy: Option<String>,
        /// Hosts reached without the proxy.
        no_proxy: Vec<String>,
    }
}

ign_struct! {
    /// `ignition.security`.
    pub struct Security {
        /// TLS settings.
        tls: Tls,
    }
}

ign_struct! {
    /// `ignition.security.tls`.
    pub struct Tls {
        /// Extra certificate authorities.
        certificate_authorities: Vec<Resource>,
    }
}

ign_struct! {
    /// `ignition.timeouts`.
    pub struct Timeouts {
        /// Seconds to wait for response headers.
        http_response_headers: Option<i64>,
        /// Total seconds for one fetch.
        http_total: Option<i64>,
    }
}

ign_struct! {
    /// `kernelArguments`.
    pub struct KernelArguments {
        /// Arguments that must be present.
        should_exist: Vec<String>,
        /// Arguments that must be absent.
        should_not_exist: Vec<String>,
    }
}

ign_struct! {
    /// `passwd`.
    pub struct Passwd {
        /// Users.
        users: Vec<PasswdUser>,
        /// Groups.
        groups: Vec<PasswdGroup>,
    }
}

ign_struct! {
    /// `passwd.users[]`.
    pub struct PasswdUser {
        /// User name (the merge key).
        name: String,
        /// Password hash.
        password_hash: Option<String>,
        /// SSH public keys.
        ssh_authorized_keys: Vec<String>,
        /// Numeric uid.
        uid: Option<i64>,
        /// GECOS comment.
        gecos: Option<String>,
        /// Home directory.
        home_dir: Option<String>,
        /// Do not create the home directory.
        no_create_home: Option<bool>,
        /// Primary group.
        primary_group: Option<String>,
        /// Supplementary groups.
        groups: Vec<String>,
        /// Do not create a user group.
        no_user_group: Option<bool>,
        /// Do not log in lastlog/faillog.
        no_log_init: Option<bool>,
        /// Login shell.
        shell: Option<String>,
        /// System account.
        system: Option<bool>,
        /// Whether the user should exist.
        should_exist: Option<bool>,
    }
}

ign_struct! {
    /// `passwd.groups[]`.
    pub struct PasswdGroup {
        /// Group name (the merge key).
        name: String,
        /// Numeric gid.
        gid: Option<i64>,
        /// Password hash.
        password_hash: Option<String>,
        /// System group.
        system: Option<bool>,
        /// Whether the group should exist.
        should_exist: Option<bool>,
    }
}

ign_struct! {
    /// `storage`.
    pub struct Storage {
        /// Partitioned disks (ignored in apply mode).
        disks: Vec<Disk>,
        /// Software RAID arrays (ignored in apply mode).
        raid: Vec<Raid>,
        /// Filesystems (ignored in apply mode).
        filesystems: Vec<Filesystem>,
        /// Files.
        files: Vec<File>,
        /// Directories.
        directories: Vec<Directory>,
        /// Symbolic and hard links.
        links: Vec<Link>,
        /// LUKS volumes (ignored in apply mode).
        luks: Vec<Luks>,
    }
}

ign_struct! {
    /// `storage.disks[]`.
    pub struct Disk {
        /// Device path (the merge key).
        device: String,
        /// Wipe the partition table.
        wipe_table: Option<bool>,
        /// Partitions.
        partitions: Vec<Partition>,
    }
}

ign_struct! {
    /// `storage.disks[].partitions[]`.
    pub struct Partition {
        /// GPT label.
        label: Option<String>,
        /// Partition number.
        number: i64,
        /// Size in MiB.
        size_mi_b: Option<i64>,
        /// Start in MiB.
        start_mi_b: Option<i64>,
        /// Type GUID.
        type_guid: Option<String>,
        /// Partition GUID.
        guid: Option<String>,
        /// Wipe the partition entry.
        wipe_partition_entry: Option<bool>,
        /// Whether the partition should exist.
        should_exist: Option<bool>,
        /// Resize the partition.
        resize: Option<bool>,
    }
}

ign_struct! {
    /// `storage.raid[]`.
    pub struct Raid {
        /// Array name (the merge key).
        name: String,
        /// RAID level.
        level: Option<String>,
        /// Member devices.
        devices: Vec<String>,
        /// Spare count.
        spares: Option<i64>,
        /// mdadm options.
        options: Vec<String>,
    }
}

ign_struct! {
    /// `storage.filesystems[]`.
    pub struct Filesystem {
        /// Device path (the merge key).
        device: String,
        /// Filesystem type.
        format: Option<String>,
        /// Wipe the filesystem.
        wipe_filesystem: Option<bool>,
        /// Filesystem label.
        label: Option<String>,
        /// Filesystem UUID.
        uuid: Option<String>,
        /// mkfs options.
        options: Vec<String>,
        /// Mount options.
        mount_options: Vec<String>,
        /// Mount path.
        path: Option<String>,
        /// Generate a mount unit.
        with_mount_unit: Option<bool>,
    }
}

ign_struct! {
    /// `storage.luks[]`.
    pub struct Luks {
        /// Volume name (the merge key).
        name: String,
        /// Backing device.
        device: Option<String>,
        /// Key file.
        key_file: Resource,
        /// LUKS label.
        label: Option<String>,
        /// LUKS UUID.
        uuid: Option<String>,
        /// cryptsetup options.
        options: Vec<String>,
        /// Wipe the volume.
        wipe_volume: Option<bool>,
        /// Clevis binding.
        clevis: Clevis,
        /// Allow discards.
        discard: Option<bool>,
        /// Options at open time.
        open_options: Vec<String>,
        /// IBM CEX binding.
        cex: Cex,
    }
}

ign_struct! {
    /// `storage.luks[].clevis`.
    pub struct Clevis {
        /// A custom pin.
        custom: ClevisCustom,
        /// Tang servers.
        tang: Vec<Tang>,
        /// Bind to a TPM2.
        tpm2: Option<bool>,
        /// Shamir threshold.
        threshold: Option<i64>,
    }
}

ign_struct! {
    /// `storage.luks[].clevis.custom`.
    pub struct ClevisCustom {
        /// Pin name: any from 3.6.0 on; `tpm2`, `tang` or `sss` before (Ignition checks that,
        /// this crate does not: LUKS is not applied).
        pin: Option<String>,
        /// Pin config.
        config: Option<String>,
        /// The pin needs networking.
        needs_network: Option<bool>,
    }
}

ign_struct! {
    /// `storage.luks[].clevis.tang[]`.
    pub struct Tang {
        /// Server URL (the merge key).
        url: String,
        /// Key thumbprint.
        thumbprint: Option<String>,
        /// Server advertisement.
        advertisement: Option<String>,
    }
}

ign_struct! {
    /// `storage.luks[].cex`.
    pub struct Cex {
        /// Enable CEX.
        enabled: Option<bool>,
    }
}

ign_struct! {
    /// `storage.files[]`.
    pub struct File {
        /// Absolute path (the merge key, shared with directories and links).
        path: String,
        /// Replace what is there.
        overwrite: Option<bool>,
        /// Owner.
        user: NodeUser,
        /// Group.
        group: NodeGroup,
        /// Contents.
        contents: Resource,
        /// Fragments appended to the file.
        append: Vec<Resource>,
        /// Permission bits, decimal in JSON; setuid/setgid/sticky (`0o7000`) take effect from
        /// spec 3.6.0 on and are masked out of older configs by [`parse`](crate::parse()).
        mode: Option<i64>,
    }
}

ign_struct! {
    /// `storage.directories[]`.
    pub struct Directory {
        /// Absolute path.
        path: String,
        /// Replace what is there (empties an existing directory).
        overwrite: Option<bool>,
        /// Owner.
        user: NodeUser,
        /// Group.
        group: NodeGroup,
        /// Permission bits, decimal in JSON; special bits as for [`File::mode`].
        mode: Option<i64>,
    }
}

ign_struct! {
    /// `storage.links[]`.
    pub struct Link {
        /// Absolute path of the link.
        path: String,
        /// Replace what is there.
        overwrite: Option<bool>,
        /// Owner (symbolic links only).
        user: NodeUser,
        /// Group (symbolic links only).
        group: NodeGroup,
        /// Link target, stored verbatim.
        target: Option<String>,
        /// A hard link instead of a symbolic one.
        hard: Option<bool>,
    }
}

ign_struct! {
    /// `user` of a node: by id or by name.
    pub struct NodeUser {
        /// Numeric uid.
        id: Option<i64>,
        /// Name looked up in the image's passwd databases.
        name: Option<String>,
    }
}

ign_struct! {
    /// `group` of a node: by id or by name.
    pub struct NodeGroup {
        /// Numeric gid.
        id: Option<i64>,
        /// Name looked up in the image's group databases.
        name: Option<String>,
    }
}

ign_struct! {
    /// A fetchable resource: file contents, append fragments, child configs.
    pub struct Resource {
        /// `""`/absent for none, or `gzip`.
        compression: Option<String>,
        /// HTTP headers (http/https only).
        http_headers: Vec<HttpHeader>,
        /// URL: `data:`, or a remote scheme. Shared, not copied, when the config is cloned or
        /// the planner keeps it as a file's contents: it can be hundreds of megabytes.
        source: Option<SharedStr>,
        /// Expected hash of the decompressed bytes.
        verification: Verification,
    }
}

ign_struct! {
    /// An HTTP header of a resource.
    pub struct HttpHeader {
        /// Header name (the merge key).
        name: String,
        /// Header value.
        value: Option<String>,
    }
}

ign_struct! {
    /// `verification` of a resource.
    pub struct Verification {
        /// `sha256-<hex>` or `sha512-<hex>`.
        hash: Option<String>,
    }
}

ign_struct! {
    /// `systemd`.
    pub struct Systemd {
        /// Units.
        units: Vec<Unit>,
    }
}

ign_struct! {
    /// `systemd.units[]`.
    pub struct Unit {
        /// Unit name with its type suffix (the merge key).
        name: String,
        /// Enable (preset `enable`) or disable it.
        enabled: Option<bool>,
        /// Mask it (`-> /dev/null`).
        mask: Option<bool>,
        /// Unit file contents.
        contents: Option<String>,
        /// Drop-ins.
        dropins: Vec<Dropin>,
    }
}

ign_struct! {
    /// `systemd.units[].dropins[]`.
    pub struct Dropin {
        /// Drop-in file name, ending in `.conf`.
        name: String,
        /// Drop-in contents.
        contents: Option<String>,
    }
}
