#!/usr/bin/env bash
# Generate a small RHCOS-shaped root filesystem in $1 (default target/example-base):
# compat symlinks, passwd/group in /etc and /usr/lib, vendor units, an enabled unit.
# It stands in for a base image until registry/OCI bases land; the build only reads it.
set -euo pipefail
root=${1:-target/example-base}
rm -rf "$root"
mkdir -p "$root"/{etc/systemd/system/multi-user.target.wants,etc/systemd/system-preset,etc/issue.d,etc/containers/registries.conf.d} \
         "$root"/usr/{bin,lib/systemd/system,share/zoneinfo} "$root"/var/{usrlocal/bin,home/core,opt,roothome,mnt,srv} \
         "$root"/{tmp,run,sysroot}
ln -s ../var/usrlocal "$root/usr/local"
ln -s var/home "$root/home"
ln -s var/opt "$root/opt"
ln -s var/roothome "$root/root"
printf 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n' > "$root/etc/passwd"
printf 'root:x:0:\nwheel:x:10:core\ncore:x:1000:\n' > "$root/etc/group"
printf 'chrony:x:994:992::/var/lib/chrony:/sbin/nologin\n' > "$root/usr/lib/passwd"
printf 'chrony:x:992:\n' > "$root/usr/lib/group"
printf 'passwd: files altfiles systemd\ngroup: files altfiles systemd\n' > "$root/etc/nsswitch.conf"
printf 'pool 2.fedora.pool.ntp.org iburst\n' > "$root/etc/chrony.conf"
printf 'Fedora CoreOS\n' > "$root/etc/issue.d/motd.issue"
printf 'UTC0\n' > "$root/usr/share/zoneinfo/UTC"
for u in crio zincati rpcbind; do
  printf '[Unit]\nDescription=%s\n\n[Service]\nExecStart=/usr/bin/%s\n\n[Install]\nWantedBy=multi-user.target\n' "$u" "$u" \
    > "$root/usr/lib/systemd/system/$u.service"
done
ln -s /usr/lib/systemd/system/zincati.service "$root/etc/systemd/system/multi-user.target.wants/zincati.service"
printf 'enable ostree-remount.service\n' > "$root/etc/systemd/system-preset/20-ignition.preset"
chmod 0750 "$root/var/roothome"
echo "$root"
