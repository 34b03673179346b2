//! Ignition spec 2.2.0's config types, as `github.com/coreos/ignition/config/v2_2/types`
//! (ignition v0.35.0, vendored by the MCO) declares them: same fields, same order, embedded
//! structs (`Node`, `FileEmbedded1`, …) flattened in place.

use crate::decode::go_struct;

go_struct! {
    CaReference = "types.CaReference" {
        source: String = "source",
        verification: Verification = "verification",
    }
}

go_struct! {
    Config = "types.Config" {
        ignition: Ignition = "ignition",
        networkd: Networkd = "networkd",
        passwd: Passwd = "passwd",
        storage: Storage = "storage",
        systemd: Systemd = "systemd",
    }
}

go_struct! {
    ConfigReference = "types.ConfigReference" {
        source: String = "source",
        verification: Verification = "verification",
    }
}

go_struct! {
    Create = "types.Create" {
        force: bool = "force",
        options: Vec<String> = "options" as "types.CreateOption",
    }
}

go_struct! {
    Directory = "types.Directory" {
        filesystem: String = "filesystem",
        group: Option<NodeGroup> = "group",
        overwrite: Option<bool> = "overwrite",
        path: String = "path",
        user: Option<NodeUser> = "user",
        mode: Option<i64> = "mode",
    }
}

go_struct! {
    Disk = "types.Disk" {
        device: String = "device",
        partitions: Vec<Partition> = "partitions",
        wipe_table: bool = "wipeTable",
    }
}

go_struct! {
    File = "types.File" {
        filesystem: String = "filesystem",
        group: Option<NodeGroup> = "group",
        overwrite: Option<bool> = "overwrite",
        path: String = "path",
        user: Option<NodeUser> = "user",
        append: bool = "append",
        contents: FileContents = "contents",
        mode: Option<i64> = "mode",
    }
}

go_struct! {
    FileContents = "types.FileContents" {
        compression: String = "compression",
        source: String = "source",
        verification: Verification = "verification",
    }
}

go_struct! {
    Filesystem = "types.Filesystem" {
        mount: Option<Mount> = "mount",
        name: String = "name",
        path: Option<String> = "path",
    }
}

go_struct! {
    Ignition = "types.Ignition" {
        config: IgnitionConfig = "config",
        security: Security = "security",
        timeouts: Timeouts = "timeouts",
        version: String = "version",
    }
}

go_struct! {
    IgnitionConfig = "types.IgnitionConfig" {
        append: Vec<ConfigReference> = "append",
        replace: Option<ConfigReference> = "replace",
    }
}

go_struct! {
    Link = "types.Link" {
        filesystem: String = "filesystem",
        group: Option<NodeGroup> = "group",
        overwrite: Option<bool> = "overwrite",
        path: String = "path",
        user: Option<NodeUser> = "user",
        hard: bool = "hard",
        target: String = "target",
    }
}

go_struct! {
    Mount = "types.Mount" {
        create: Option<Create> = "create",
        device: String = "device",
        format: String = "format",
        label: Option<String> = "label",
        options: Vec<String> = "options" as "types.MountOption",
        uuid: Option<String> = "uuid",
        wipe_filesystem: bool = "wipeFilesystem",
    }
}

go_struct! {
    Networkd = "types.Networkd" {
        units: Vec<Networkdunit> = "units",
    }
}

go_struct! {
    NetworkdDropin = "types.NetworkdDropin" {
        contents: String = "contents",
        name: String = "name",
    }
}

go_struct! {
    Networkdunit = "types.Networkdunit" {
        contents: String = "contents",
        dropins: Vec<NetworkdDropin> = "dropins",
        name: String = "name",
    }
}

go_struct! {
    NodeGroup = "types.NodeGroup" {
        id: Option<i64> = "id",
        name: String = "name",
    }
}

go_struct! {
    NodeUser = "types.NodeUser" {
        id: Option<i64> = "id",
        name: String = "name",
    }
}

go_struct! {
    Partition = "types.Partition" {
        guid: String = "guid",
        label: String = "label",
        number: i64 = "number",
        size: i64 = "size",
        start: i64 = "start",
        type_guid: String = "typeGuid",
    }
}

go_struct! {
    Passwd = "types.Passwd" {
        groups: Vec<PasswdGroup> = "groups",
        users: Vec<PasswdUser> = "users",
    }
}

go_struct! {
    PasswdGroup = "types.PasswdGroup" {
        gid: Option<i64> = "gid",
        name: String = "name",
        password_hash: String = "passwordHash",
        system: bool = "system",
    }
}

go_struct! {
    PasswdUser = "types.PasswdUser" {
        create: Option<Usercreate> = "create",
        gecos: String = "gecos",
        groups: Vec<String> = "groups" as "types.Group",
        home_dir: String = "homeDir",
        name: String = "name",
        no_create_home: bool = "noCreateHome",
        no_log_init: bool = "noLogInit",
        no_user_group: bool = "noUserGroup",
        password_hash: Option<String> = "passwordHash",
        primary_group: String = "primaryGroup",
        ssh_authorized_keys: Vec<String> = "sshAuthorizedKeys" as "types.SSHAuthorizedKey",
        shell: String = "shell",
        system: bool = "system",
        uid: Option<i64> = "uid",
    }
}

go_struct! {
    Raid = "types.Raid" {
        devices: Vec<String> = "devices" as "types.Device",
        level: String = "level",
        name: String = "name",
        options: Vec<String> = "options" as "types.RaidOption",
        spares: i64 = "spares",
    }
}

go_struct! {
    Security = "types.Security" {
        tls: Tls = "tls",
    }
}

go_struct! {
    Storage = "types.Storage" {
        directories: Vec<Directory> = "directories",
        disks: Vec<Disk> = "disks",
        files: Vec<File> = "files",
        filesystems: Vec<Filesystem> = "filesystems",
        links: Vec<Link> = "links",
        raid: Vec<Raid> = "raid",
    }
}

go_struct! {
    Systemd = "types.Systemd" {
        units: Vec<Unit> = "units",
    }
}

go_struct! {
    SystemdDropin = "types.SystemdDropin" {
        contents: String = "contents",
        name: String = "name",
    }
}

go_struct! {
    Tls = "types.TLS" {
        certificate_authorities: Vec<CaReference> = "certificateAuthorities",
    }
}

go_struct! {
    Timeouts = "types.Timeouts" {
        http_response_headers: Option<i64> = "httpResponseHeaders",
        http_total: Option<i64> = "httpTotal",
    }
}

go_struct! {
    Unit = "types.Unit" {
        contents: String = "contents",
        dropins: Vec<SystemdDropin> = "dropins",
        enable: bool = "enable",
        enabled: Option<bool> = "enabled",
        mask: bool = "mask",
        name: String = "name",
    }
}

go_struct! {
    Usercreate = "types.Usercreate" {
        gecos: String = "gecos",
        groups: Vec<String> = "groups" as "types.UsercreateGroup",
        home_dir: String = "homeDir",
        no_create_home: bool = "noCreateHome",
        no_log_init: bool = "noLogInit",
        no_user_group: bool = "noUserGroup",
        primary_group: String = "primaryGroup",
        shell: String = "shell",
        system: bool = "system",
        uid: Option<i64> = "uid",
    }
}

go_struct! {
    Verification = "types.Verification" {
        hash: Option<String> = "hash",
    }
}
