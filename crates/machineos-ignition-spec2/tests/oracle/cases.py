"""The inputs of tests/oracle.rs, written as Python for readability.

Usage: cases.py > cases.json   (then run.sh, see README.md, for expected.json)
"""
import json
V="2.2.0"
def cfg(**kw):
    d={"ignition":{"version":V}}
    d.update(kw); return d
def f(path, mode=420, src="data:,x", fs="root", **kw):
    x={"filesystem":fs,"path":path}
    if mode is not None: x["mode"]=mode
    if src is not None: x["contents"]={"source":src}
    x.update(kw); return x
H="sha512-"+"0"*128
cases=[]
def c(name, inp): cases.append({"name":name,"input":inp})

# --- valid conversions -------------------------------------------------------------
c("minimal", cfg())
c("parse_and_convert_dup_ssh_keys", cfg(passwd={"users":[{"name":"core","sshAuthorizedKeys":["5678","5678","abc"]}]}))
c("merge_machine_configs_v2_empty", {"ignition":{"version":"2.2.0"}})
c("files_basic", cfg(storage={"files":[
    f("/etc/a", 420, "data:,hello%20world%0A"),
    f("/etc/b", 384, "data:;base64,H4sIAAAAAAAAA0vLz+cCAKhlMn4EAAAA", contents={"source":"data:;base64,H4sIAAAAAAAAA0vLz+cCAKhlMn4EAAAA","compression":"gzip","verification":{"hash":H}}),
    f("/etc/c", None, None),
    f("/etc/d", 420, "https://example.com/d", overwrite=False, user={"name":"core"}, group={"id":1000}),
    f("/etc/e", 0, ""),
]}))
c("file_append", cfg(storage={"files":[f("/etc/a", 420, "data:,x", append=True)]}))
c("file_append_overwrite_false", cfg(storage={"files":[f("/etc/a", 420, "data:,x", append=True, overwrite=False)]}))
c("file_verification_empty", cfg(storage={"files":[{"filesystem":"root","path":"/etc/coreos/update.conf","mode":420,"contents":{"source":"data:,GROUP%3Dstable%0A","verification":{}}}]}))
c("directories_links", cfg(storage={
    "directories":[{"filesystem":"root","path":"/var/d","mode":493,"user":{"id":0},"group":{"name":"wheel"}},{"filesystem":"root","path":"/var/e"}],
    "links":[{"filesystem":"root","path":"/etc/l","target":"/var/d"},{"filesystem":"root","path":"/etc/h","target":"/etc/a","hard":True,"overwrite":True}],
    "files":[f("/etc/a")]}))
c("paths_cleaned_and_other_filesystem", cfg(storage={"files":[f("/etc//x/../y/"), f("/z", fs="data")]}))
c("root_filesystem_declared", cfg(storage={"filesystems":[{"name":"root","path":"/"}],"files":[f("/a")]}))
c("disks_raid_without_partitions", cfg(storage={
    "disks":[{"device":"/dev/sdb","wipeTable":True},{"device":"/dev/sdc"}],
    "raid":[{"name":"md0","level":"raid1","devices":["/dev/sdb","/dev/sdc"],"spares":1,"options":["--foo"]},{"name":"md1","level":"stripe","devices":["/dev/sdd"]}]}))
c("ignition_section", {"ignition":{"version":V,
    "config":{"append":[{"source":"https://example.com/a.ign","verification":{"hash":H}},{"source":"data:,%7B%7D"}],"replace":{"source":"https://example.com/r.ign"}},
    "security":{"tls":{"certificateAuthorities":[{"source":"data:,ca"},{"source":"https://example.com/ca.pem","verification":{"hash":H}}]}},
    "timeouts":{"httpResponseHeaders":10,"httpTotal":0}}})
c("ignition_section_single_append", {"ignition":{"version":V,
    "config":{"append":[{"source":"https://example.com/a.ign","verification":{"hash":H}}],"replace":{"source":"https://example.com/r.ign","verification":{"hash":H}}},
    "security":{"tls":{"certificateAuthorities":[{"source":"data:,ca"},{"source":"https://example.com/ca.pem","verification":{"hash":H}}]}},
    "timeouts":{"httpResponseHeaders":10,"httpTotal":0}}})
c("ignition_replace_empty_source", {"ignition":{"version":V,"config":{"replace":{"source":""}}}})
c("passwd_full", cfg(passwd={
    "users":[{"name":"core","passwordHash":"$6$x","sshAuthorizedKeys":["ssh-ed25519 A"],"uid":1000,"gecos":"Core","homeDir":"/home/core","noCreateHome":True,"primaryGroup":"core","groups":["wheel","sudo"],"noUserGroup":True,"noLogInit":True,"shell":"/bin/bash","system":True}],
    "groups":[{"name":"g1","gid":1001,"passwordHash":"x","system":True},{"name":"g2"}]}))
c("passwd_empty_hash_kept", cfg(passwd={"users":[{"name":"core","passwordHash":""}]}))
c("user_create_dropped", cfg(passwd={"users":[{"name":"core","create":{"uid":5,"shell":"/bin/sh"},"passwordHash":"x"}]}))
c("units", cfg(systemd={"units":[
    {"name":"a.service","enable":True,"contents":"[Unit]\nDescription=a\n[Install]\nWantedBy=multi-user.target\n"},
    {"name":"b.service","enabled":True,"contents":"[Service]\nExecStart=/bin/true\n"},
    {"name":"c.service","enable":True,"enabled":False},
    {"name":"d.service","enabled":False},
    {"name":"e.service","mask":True},
    {"name":"f.service","dropins":[{"name":"10-a.conf","contents":"[Service]\nEnvironment=A=1\n"},{"name":"20-b.conf"}]},
    {"name":"g.timer","contents":""},
]}))
c("fixture_like_test_config", {"ignition":{"version":"2.2.0"},
  "storage":{"files":[{"contents":{"source":"data:,GROUP%3Dstable%0ASERVER%3Dhttp%3A%2F%2Flocalhost%3A32003%2Fv1%2Fupdate%0A","verification":{}},"filesystem":"root","mode":420,"path":"/etc/coreos/update.conf"}]},
  "systemd":{"units":[
    {"dropins":[{"contents":"[Service]\nEnvironment=\"DOCKER_OPTS=--log-opt max-size=50m --log-opt max-file=3\n","name":"10-dockeropts.conf"}],"enabled":True,"name":"docker.service"},
    {"contents":"[Unit]\nDescription=etcd TLS assets\nRequires=docker.service\n[Service]\nType=oneshot\nExecStart=/usr/bin/docker \\\n  run \\\n    --rm \\\n    --ipaddrs=127.0.0.1 \\\nExecStart=/bin/chown etcd:etcd /etc/ssl/etcd/x.crt\n","enabled":True,"name":"etcd-member-tls.service"},
    {"contents":"[Unit]\nDescription=etcd\n[Service]\nExecStart= /usr/bin/bash -c \" \\\n    /usr/bin/docker run \\\n  \"\n[Install]\nWantedBy=multi-user.target\n","enabled":True,"name":"etcd-member.service"},
    {"contents":"[Service]\nExecStart=/usr/bin/env bash -c \\\n  \" \\\n    true \\\n  \"\n","name":"kubelet-workaround.service"},
    {"mask":True,"name":"locksmith.service"}]}})

# --- dedupe ----------------------------------------------------------------------------
c("dedupe_files_last_wins_reversed", cfg(storage={"files":[f("/etc/a",420,"data:,a1"),f("/etc/b",420,"data:,b"),f("/etc/a",384,"data:,a2"),f("/etc/c",420,"data:,c")]}))
c("dedupe_units_dropins", cfg(systemd={"units":[
    {"name":"test.service","contents":"[Unit]\nDescription=old\n","dropins":[{"name":"one.conf","contents":"[Unit]\nDescription=old\n"}]},
    {"name":"other.service","contents":"[Unit]\n"},
    {"name":"test.service","dropins":[{"name":"one.conf","contents":"[Unit]\nDescription=new\n"}]},
    {"name":"test.service","contents":"[Unit]\nDescription=new\n","dropins":[{"name":"two.conf","contents":"[Unit]\nDescription=new\n"}]}]}))
c("dedupe_users_keys", cfg(passwd={"users":[
    {"name":"core","sshAuthorizedKeys":["k1","k2"],"passwordHash":"old"},
    {"name":"core","sshAuthorizedKeys":["k3","k1"]},
    {"name":"core","sshAuthorizedKeys":["k4","k3"],"passwordHash":"new"}]}))
c("dedupe_user_not_core_last", cfg(passwd={"users":[{"name":"core"},{"name":"bob"}]}))
c("dedupe_user_not_core_earlier", cfg(passwd={"users":[{"name":"alice"},{"name":"bob"},{"name":"core"}]}))
c("dedupe_user_single_not_core", cfg(passwd={"users":[{"name":"root","sshAuthorizedKeys":["k"]}]}))
c("dedupe_path_differs_only_when_cleaned", cfg(storage={"files":[f("/etc/a"),f("/etc//a")]}))
c("dedupe_files_ignore_filesystem", cfg(storage={"files":[f("/etc/a",fs="root"),f("/etc/a",fs="other")]}))

# --- converter refusals --------------------------------------------------------------
c("refuse_networkd", cfg(networkd={"units":[{"name":"a.network","contents":"[Match]\nName=eth0\n"}]}))
c("refuse_filesystem_other", cfg(storage={"filesystems":[{"name":"var","mount":{"device":"/dev/sdb","format":"xfs"}},{"name":"x","path":"/x"}]}))
c("refuse_partitions", cfg(storage={"disks":[{"device":"/dev/sda","partitions":[{"label":"data","number":1}]}]}))
c("refuse_partitions_report", cfg(storage={"disks":[{"device":"/dev/sda","partitions":[{"label":"a:b","number":1,"size":2048,"start":2048}]}],"files":[f("/a",None)]},
    systemd={"units":[{"name":"x.service","enabled":True,"contents":"[Unit]\nA=b\n"}]}))
c("refuse_inode_file_dir", cfg(storage={"files":[f("/a")],"directories":[{"filesystem":"root","path":"/a","mode":493}]}))
c("refuse_inode_dir_link", cfg(storage={"directories":[{"filesystem":"root","path":"/a","mode":493}],"links":[{"filesystem":"root","path":"/a","target":"/b"}]}))
c("refuse_inode_link_link", cfg(storage={"links":[{"filesystem":"root","path":"/a","target":"/b"},{"filesystem":"root","path":"/a/","target":"/c"}]}))
c("refuse_uses_own_link", cfg(storage={"files":[f("/l/b")],"links":[{"filesystem":"root","path":"/l","target":"/x"}]}))
c("refuse_uses_own_link_prefix_only", cfg(storage={"files":[f("/lx/b")],"links":[{"filesystem":"root","path":"/l","target":"/x"}]}))
c("refuse_link_under_link", cfg(storage={"links":[{"filesystem":"root","path":"/l","target":"/x"},{"filesystem":"root","path":"/l/m","target":"/y"}]}))
c("refuse_dup_dropin", cfg(systemd={"units":[{"name":"a.service","dropins":[{"name":"x.conf"},{"name":"x.conf","contents":"[Unit]\n"}]}]}))
c("refuse_dup_dropin_after_merge", cfg(systemd={"units":[{"name":"a.service","dropins":[{"name":"x.conf"},{"name":"x.conf"}]},{"name":"a.service","dropins":[{"name":"y.conf"}]}]}))
c("refuse_unit_file_conflict", cfg(storage={"files":[f("/etc/systemd/system/a.service")]},systemd={"units":[{"name":"a.service","contents":"[Unit]\n"}]}))
c("refuse_dropin_dir_conflict", cfg(storage={"directories":[{"filesystem":"root","path":"/etc/systemd/system/a.service.d/x.conf","mode":493}]},systemd={"units":[{"name":"a.service","dropins":[{"name":"x.conf","contents":"[Unit]\n"}]}]}))
c("unit_file_no_conflict_without_contents", cfg(storage={"files":[f("/etc/systemd/system/a.service")]},systemd={"units":[{"name":"a.service","enabled":True}]}))
c("refuse_raid_no_devices", cfg(storage={"raid":[{"name":"md","level":"raid1"}]}))
c("refuse_raid_dirty_device", cfg(storage={"raid":[{"name":"md","level":"raid1","devices":["/dev//sda","/dev/sdb"]}]}))
c("refuse_hard_link_to_directory", cfg(storage={"directories":[{"filesystem":"root","path":"/d","mode":493}],"links":[{"filesystem":"root","path":"/l","target":"/d","hard":True,"user":{"id":0},"group":{"name":"root"}}]}))
c("refuse_hard_link_relative_to_directory", cfg(storage={"directories":[{"filesystem":"root","path":"/l/d","mode":493}],"links":[{"filesystem":"root","path":"/l","target":"d","hard":True}]}))
c("refuse_dup_groups", cfg(passwd={"groups":[{"name":"g"},{"name":"g"}]}))
c("refuse_dup_user_groups", cfg(passwd={"users":[{"name":"core","groups":["a","b","a"]}]}))
c("refuse_dup_disks_raid", cfg(storage={"disks":[{"device":"/dev/sdb"},{"device":"/dev/sdb"}],"raid":[{"name":"m","level":"1","devices":["/dev/a"]},{"name":"m","level":"1","devices":["/dev/b","/dev/b"]}]}))
c("refuse_dup_merge", {"ignition":{"version":V,"config":{"append":[{"source":"data:,a"},{"source":"data:,a"}]}}})
c("refuse_oem_source", cfg(storage={"files":[f("/a",src="oem:///x")]}))
c("refuse_oem_merge", {"ignition":{"version":V,"config":{"append":[{"source":"oem:///x"}]}}})
c("refuse_empty_ca", {"ignition":{"version":V,"security":{"tls":{"certificateAuthorities":[{"source":""}]}}}})
c("refuse_dirty_disk", cfg(storage={"disks":[{"device":"/dev//sda"}]}))
c("refuse_output_with_warnings", cfg(storage={"files":[f("/etc/systemd/system/a.service",mode=2541)],"links":[{"filesystem":"root","path":"/h","target":"/x","hard":True,"user":{"id":1}}]},
    systemd={"units":[{"name":"a.service","contents":"[Unit]\n","enabled":True},{"name":"t@.service","contents":"[Service]\nExecStart=/bin/true\n"},{"name":"t@x.service","enabled":True}]}))
c("special_bits_convert", cfg(storage={"files":[f("/a",mode=1517)],"directories":[{"filesystem":"root","path":"/d","mode":1023}]}))

# --- spec 2 validation --------------------------------------------------------------
c("invalid_mode", cfg(storage={"files":[f("/a",mode=9999)]}))
c("invalid_relative_path", cfg(storage={"files":[f("a")],"directories":[{"filesystem":"root","path":"d"}],"links":[{"filesystem":"root","path":"l","target":"x"}]}))
c("invalid_no_filesystem", cfg(storage={"files":[{"path":"/a","mode":420}]}))
c("invalid_unit_ext", cfg(systemd={"units":[{"name":"testUnit","contents":"[Unit]\n"}]}))
c("invalid_dropin_ext", cfg(systemd={"units":[{"name":"a.service","dropins":[{"name":"x","contents":"[Unit]\n"}]}]}))
c("invalid_unit_garbage", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit] junk\n"}]}))
c("invalid_unit_section_end", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit\n"}]}))
c("invalid_unit_option_newline", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\nFoo\nBar=1\n"}]}))
c("invalid_unit_option_eof", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\nFoo"}]}))
c("invalid_unit_long_line", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\nA="+"x"*2100+"\n"}]}))
c("valid_unit_long_line_late", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\n"+"A=b\n"*1021+"B="+"x"*2100+"\n"}]}))
c("invalid_append_overwrite", cfg(storage={"files":[f("/a",append=True,overwrite=True, mode=7777777)]}))
c("invalid_compression", cfg(storage={"files":[{"filesystem":"root","path":"/a","mode":420,"contents":{"source":"data:,x","compression":"xz"}}]}))
c("invalid_data_url", cfg(storage={"files":[f("/a",src="data:;base64,!!!")]}))
c("invalid_url_scheme", cfg(storage={"files":[f("/a",src="ftp://x/y")]}))
c("invalid_url_parse", cfg(storage={"files":[f("/a",src="http://h:port/")]}))
c("invalid_hash", cfg(storage={"files":[{"filesystem":"root","path":"/a","mode":420,"contents":{"source":"data:,x","verification":{"hash":"sha256-abc"}}},{"filesystem":"root","path":"/b","mode":420,"contents":{"source":"data:,x","verification":{"hash":"nodash"}}}]}))
c("invalid_owner_id_and_name", cfg(storage={"files":[f("/a",user={"id":0,"name":"root"})]}))
c("invalid_filesystem", cfg(storage={"filesystems":[{"name":"x","mount":{"device":"/dev/sdb","format":"ntfs"}},{"name":"y"},{"name":"z","path":"rel"},{"name":"w","mount":{"device":"dev","format":"xfs","label":"waytoolonglabel","create":{"options":["-f"]},"options":["x"]}}]}))
c("invalid_user_create_conflicts", cfg(passwd={"users":[{"name":"core","create":{},"gecos":"g","uid":5,"system":True}]}))
c("invalid_raid", cfg(storage={"raid":[{"name":"a","level":"raid0","spares":1,"devices":["rel"]},{"name":"b","level":"bogus","devices":["/x"]}]}))
c("invalid_disk", cfg(storage={"disks":[{"device":"","partitions":[{"number":1,"start":2048,"size":4096},{"number":1,"start":4096,"size":10,"label":"x"*40,"guid":"bad","typeGuid":"zz"},{"start":5}]}]}))
c("invalid_networkd", cfg(networkd={"units":[{"name":"a.foo","contents":"[Match]\n","dropins":[{"name":"x.conf","contents":"[Match\n"}]}]}))
c("invalid_with_unknown_keys", {"ignition":{"version":V,"bogus":1},"storage":{"files":[{"filesystem":"root","path":"/a","mode":9999,"Contents":{"source":"data:,x"},"extra":True}]}})
c("warnings_unknown_keys", {"ignition":{"version":V},"storage":{"files":[{"filesystem":"root","Path":"/a","contents":{"source":"data:,x","Compression":""}}]},"systemd":{"units":[{"name":"a.service","enable":True,"contents":"[Unit]\nA=b\n"}]},"passwd":{"users":[{"name":"core","Name":"core"}]},"extra":{}})
c("warnings_nonexistent_filesystem", cfg(storage={"files":[f("/a",fs="nope")],"links":[{"filesystem":"other","path":"/l","target":"/a"}]}))
c("case_insensitive_keys", {"IGNITION":{"Version":"2.2.0"},"Storage":{"Files":[{"FileSystem":"root","Path":"/a","MODE":420,"contents":{"SOURCE":"data:,x"}}]}})

# --- versions --------------------------------------------------------------------------
for name, v in [("version_empty",""),("version_short","2.2"),("version_23","2.3.0"),("version_rc","2.2.0-rc1"),("version_meta","2.2.0+meta"),("version_36","3.6.0"),("version_10","1.0.0"),("version_zero_padded","02.2.00"),("version_221","2.2.1"),("version_21x","2.1.5"),("version_20x","2.0.1"),("version_garbage","two"),("version_trailing_dash","2.2.0-"),("version_plus_sign","+2.2.0"),("version_signed_parts","2.+2.0")]:
    c(name, {"ignition":{"version":v}})
c("version_missing", {})
c("version_number", {"ignition":{"version":2}})
c("version_ignition_string", {"ignition":"2.2.0"})
c("version_top_array", [])
c("raw_empty", "")
c("raw_syntax", '{"ignition":{"version":"2.2.0"},}')
c("raw_truncated", '{"ignition":{"version":"2.2.0"}')

# --- type errors ---------------------------------------------------------------------
c("type_mode_string", cfg(storage={"files":[f("/a",mode="0644")]}))
c("type_mode_float", cfg(storage={"files":[f("/a",mode=420.5)]}))
c("type_unit_name_number", cfg(systemd={"units":[{"name":5}]}))
c("type_storage_array", {"ignition":{"version":V},"storage":[]})
c("type_overwrite_string", cfg(storage={"files":[f("/a",overwrite="yes")]}))
c("type_ssh_key_number", cfg(passwd={"users":[{"name":"core","sshAuthorizedKeys":[1]}]}))
c("type_user_uid_string", cfg(passwd={"users":[{"name":"core","uid":"1"}]}))
c("type_enabled_string", cfg(systemd={"units":[{"name":"a.service","enabled":"yes"}]}))
c("type_security_string", {"ignition":{"version":V,"security":"x"}})
c("null_values", {"ignition":{"version":V,"config":None},"storage":{"files":[{"filesystem":"root","path":"/a","mode":None,"contents":None,"user":None}]},"systemd":None,"passwd":{"users":None}})

# --- older specs ------------------------------------------------------------------------
c("spec21_file", {"ignition":{"version":"2.1.0"},"storage":{"files":[{"filesystem":"root","path":"/a","mode":420,"contents":{"source":"data:,x"}},{"filesystem":"root","path":"/b","overwrite":False,"append":True}],"directories":[{"filesystem":"root","path":"/d"}]},"systemd":{"units":[{"name":"a.service","enabled":True,"contents":"[Unit]\n"}]}})
c("spec21_invalid", {"ignition":{"version":"2.1.0"},"storage":{"files":[{"filesystem":"root","path":"a","mode":420}]}})
c("spec21_security_ignored", {"ignition":{"version":"2.1.0","security":{"tls":{"certificateAuthorities":[{"source":"data:,x"}]}}}})
c("spec20_file", {"ignition":{"version":"2.0.0"},"storage":{"files":[{"filesystem":"root","path":"/a","mode":420,"contents":{"source":"data:,x","verification":{"hash":H}},"user":{"id":5}}]},"systemd":{"units":[{"name":"a.service","enable":True,"contents":"[Unit]\n[Install]\nWantedBy=x\n","dropins":[{"name":"a.conf","contents":"[Unit]\n"}]}]},"passwd":{"users":[{"name":"core","passwordHash":"h","sshAuthorizedKeys":["k"],"create":{"uid":7}}]}})
c("spec20_invalid", {"ignition":{"version":"2.0.0"},"storage":{"files":[{"path":"/a","mode":420}]}})
c("spec20_bad_hash", {"ignition":{"version":"2.0.0"},"storage":{"files":[{"filesystem":"root","path":"/a","contents":{"verification":{"hash":"nodash"}}}]}})
c("spec20_raid_disk", {"ignition":{"version":"2.0.0"},"storage":{"disks":[{"device":"/dev/sdb","wipeTable":True}],"raid":[{"name":"md","level":"raid1","devices":["/dev/sdb"]}]}})


# --- more edges ---------------------------------------------------------------------------
c("type_file_path_number", cfg(storage={"files":[{"filesystem":"root","path":5}]}))
c("type_unit_contents_bool", cfg(systemd={"units":[{"name":"a.service","contents":True}]}))
c("type_units_object", cfg(systemd={"units":{}}))
c("type_disk_device_number", cfg(storage={"disks":[{"device":1}]}))
c("type_filesystem_name_number", cfg(storage={"filesystems":[{"name":5}]}))
c("type_group_gid_negative_ok", cfg(passwd={"groups":[{"name":"g","gid":-1}]}))
c("type_group_gid_string", cfg(passwd={"groups":[{"name":"g","gid":"1"}]}))
c("type_user_name_number", cfg(passwd={"users":[{"name":1}]}))
c("type_create_uid_string", cfg(passwd={"users":[{"name":"core","create":{"uid":"x"}}]}))
c("type_partition_size_negative", cfg(storage={"disks":[{"device":"/dev/sda","partitions":[{"number":1,"size":-1}]}]}))
c("type_mode_big", cfg(storage={"files":[f("/a",mode=99999999999999999999)]}))
c("type_version_and_mode", {"ignition":{"version":"2.1.0"},"storage":{"files":[f("/a",mode="x")]}})
c("type_two_errors_number_wins", cfg(storage={"files":[f("/a",overwrite="x")]},systemd={"units":[{"name":7}]}))
c("dup_json_keys", '{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/a","mode":420,"mode":384}]}}')
c("mode_negative", cfg(storage={"files":[f("/a",mode=-1)]}))
c("mode_max", cfg(storage={"files":[f("/a",mode=4095)]}))
c("dir_mode_invalid", cfg(storage={"directories":[{"filesystem":"root","path":"/d","mode":65535}]}))
c("unit_crlf", cfg(systemd={"units":[{"name":"a.service","enabled":True,"contents":"[Unit]\r\nA=b\r\n[Install]\r\nWantedBy=x\r\n"}]}))
c("unit_cr_in_name", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\nA\rB=c\n"}]}))
c("unit_only_comments_enabled", cfg(systemd={"units":[{"name":"a.service","enabled":True,"contents":"# nothing\n"}]}))
c("unit_garbage_unicode", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit] é\n"}]}))
c("unit_text_before_section", cfg(systemd={"units":[{"name":"a.service","contents":"Foo=bar\n[Unit]\nA=b\n"}]}))
c("unit_long_line_2047", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\nA="+"x"*2045+"\n"}]}))
c("unit_long_line_2048", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\nA="+"x"*2046+"\n"}]}))
c("unit_long_comment", cfg(systemd={"units":[{"name":"a.service","contents":"#"+"x"*2100+"\n[Unit]\n"}]}))
c("unit_long_line_mid", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\n"+"A=b\n"*300+"B="+"y"*2100+"\nC=d\n"}]}))
c("unit_long_line_window", cfg(systemd={"units":[{"name":"a.service","contents":"[Unit]\n"+"A=bb\n"*500+"B="+"y"*2100+"\n"}]}))
c("unit_name_empty", cfg(systemd={"units":[{"name":""}]}))
c("unit_name_with_dir", cfg(systemd={"units":[{"name":"x.d/a.service"}]}))
c("url_upper_scheme", cfg(storage={"files":[f("/a",src="HTTPS://example.com/x"),f("/b",src="DATA:,x")]}))
c("url_s3", cfg(storage={"files":[f("/a",src="s3://bucket/key?versionId=abc"),f("/b",src="tftp://h/x")]}))
c("url_s3_empty_version", cfg(storage={"files":[f("/a",src="s3://bucket/key?versionId=")]}))
c("url_data_media", cfg(storage={"files":[f("/a",src="data:text/plain;charset=utf-8;base64,aGVsbG8="),f("/b",src="data:,a%20b+c")]}))
c("url_relative", cfg(storage={"files":[f("/a",src="/etc/x")]}))
c("url_ctl", cfg(storage={"files":[f("/a",src="http://h/a\tb")]}))
c("url_fragment_bad", cfg(storage={"files":[f("/a",src="http://h/a#%zz")]}))
c("url_ipv6", cfg(storage={"files":[f("/a",src="http://[::1]:80/x"),f("/b",src="http://[fe80::1%25eth0]/x")]}))
c("hash_sha512_wrong_size", cfg(storage={"files":[{"filesystem":"root","path":"/a","mode":420,"contents":{"source":"data:,x","verification":{"hash":"sha512-abc"}}}]}))
c("hash_without_source", cfg(storage={"files":[{"filesystem":"root","path":"/a","mode":420,"contents":{"verification":{"hash":H}}}]}))
c("file_group_name", cfg(storage={"files":[f("/a",group={"name":"wheel"},user={"id":0})]}))
c("link_relative_target", cfg(storage={"links":[{"filesystem":"root","path":"/etc/l","target":"../x"}]}))
c("link_hard_relative", cfg(storage={"links":[{"filesystem":"root","path":"/etc/l","target":"x","hard":True}],"directories":[{"filesystem":"root","path":"/etc/x","mode":493}]}))
c("enable_and_mask", cfg(systemd={"units":[{"name":"a.service","enable":True,"mask":True}]}))
c("dropin_only_unit_enabled", cfg(systemd={"units":[{"name":"a.service","enabled":True,"dropins":[{"name":"a.conf","contents":"[Service]\nX=y\n"}]}]}))
c("instance_units", cfg(systemd={"units":[{"name":"t@.service","contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=x\n"},{"name":"t@a.service","enabled":True}]}))
c("many_core_users_no_keys", cfg(passwd={"users":[{"name":"core","passwordHash":"a"},{"name":"core"}]}))
c("users_empty_list", cfg(passwd={"users":[]}))
c("networkd_empty", cfg(networkd={"units":[]}))
c("spec20_partition", {"ignition":{"version":"2.0.0"},"storage":{"disks":[{"device":"/dev/sda","partitions":[{"label":"x","number":1,"size":2048,"start":2048}]}]}})
c("spec20_bad_url", {"ignition":{"version":"2.0.0"},"storage":{"files":[{"filesystem":"root","path":"/a","contents":{"source":":bad"}}]}})
c("spec20_mode_illegal", {"ignition":{"version":"2.0.0"},"storage":{"files":[{"filesystem":"root","path":"/a","mode":65535}]}})
c("spec20_unit_warning", {"ignition":{"version":"2.0.0"},"systemd":{"units":[{"name":"a.service","enable":True,"contents":"[Unit]\nA=b\n"},{"name":"b.timer","mask":True}]},"networkd":{"units":[]},"extra":1})
c("spec20_filesystem", {"ignition":{"version":"2.0.0"},"storage":{"filesystems":[{"name":"root","path":"/"},{"name":"x","mount":{"device":"/dev/sdb","format":"vfat"}}]}})
c("spec20_append", {"ignition":{"version":"2.0.0","config":{"append":[{"source":"https://x/y","verification":{"hash":H}}]}},"passwd":{"groups":[{"name":"g","gid":5}]}})
c("spec20_bad_scheme", {"ignition":{"version":"2.0.0"},"storage":{"files":[{"filesystem":"root","path":"/a","contents":{"source":"tftp://x/y"}}]}})
c("spec20_user_create", {"ignition":{"version":"2.0.0"},"passwd":{"users":[{"name":"core","create":{"uid":1000,"shell":"/bin/sh","groups":["wheel"]}}]}})
c("spec21_user_group_nodes", {"ignition":{"version":"2.1.0"},"storage":{"links":[{"filesystem":"root","path":"/l","target":"/t","user":{"name":"core"}}],"raid":[{"name":"m","level":"1","devices":["/dev/a"],"options":["x"]}]},"networkd":{"units":[{"name":"a.network","dropins":[{"name":"x.conf"}]}]}})
c("spec21_invalid_mode", {"ignition":{"version":"2.1.0"},"storage":{"files":[{"filesystem":"root","path":"/a","mode":-5}]}})
c("spec21_type_error", {"ignition":{"version":"2.1.0"},"systemd":{"units":[{"name":5}]}})

# One case a line: small diffs when cases change.
print("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]")
