#!/usr/bin/env bash
# Run a command inside an unpacked image root the way `docker run --read-only
# --tmpfs /tmp --user U:G` would: a private mount namespace and PID namespace,
# the root file system bind-mounted READ-ONLY, a fresh tmpfs on /tmp, /proc and
# /dev, the host network (so 127.0.0.1 reaches it), and the command exec'd as
# the given non-root user with only the given environment.
#
# Used by scripts/docker-smoke.sh where no container engine can run images
# (podman run fails on these machines; buildah run has no --read-only).
#
# Usage: run-readonly.sh ROOTFS UID:GID ENVFILE WORKDIR -- COMMAND [ARG...]
#   ENVFILE: NAME=VALUE lines (the image's Config.Env, plus overrides)
#   RUN_READONLY_VOLUMES: optional "HOSTDIR:DIR ..." bind-mounted writable at DIR
#   (which must exist in the image), as `docker run -v HOSTDIR:DIR` would.
#   RUN_READONLY_MOUNTS (env, optional): "SRC:DST ..." host directories bind-mounted
#   read-only at DST inside the root, like `docker run -v SRC:DST:ro` (DST must exist)
# Before exec'ing COMMAND it proves, and prints, that:
#   - root cannot write to / (Read-only file system),
#   - the user can write to /tmp.
# Must run as root on the host. Everything it mounts disappears with the
# namespace when COMMAND exits.
set -euo pipefail

if [[ "${1:-}" != "--inside" ]]; then
    [[ $# -ge 6 && "$5" == "--" ]] || {
        echo "usage: $0 ROOTFS UID:GID ENVFILE WORKDIR -- COMMAND [ARG...]" >&2
        exit 2
    }
    exec unshare --mount --pid --fork --propagation private -- "$0" --inside "$@"
fi
shift
rootfs=$1 userspec=$2 envfile=$3 workdir=$4
shift 5

mount --bind "$rootfs" "$rootfs"
mount -o remount,bind,ro "$rootfs"
mount -t tmpfs -o mode=1777,nosuid,nodev,size=512m tmpfs "$rootfs/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$rootfs/proc"
for volume in ${RUN_READONLY_VOLUMES:-}; do
    mount --bind "${volume%%:*}" "$rootfs${volume#*:}"
done
mount --rbind /dev "$rootfs/dev"
mount --rbind -o ro /sys "$rootfs/sys" 2>/dev/null || true
for pair in ${RUN_READONLY_MOUNTS:-}; do
    mount --bind "${pair%%:*}" "$rootfs${pair#*:}"
    mount -o remount,bind,ro "$rootfs${pair#*:}"
    err=$(chroot "$rootfs" /bin/sh -c "echo x > '${pair#*:}/.rofs-probe'" 2>&1 || true)
    echo "MOUNT-PROBE: ${pair#*:} mounted read-only: ${err##*: }"
done

# Proofs, printed for the caller to check.
if chroot "$rootfs" /bin/sh -c 'echo x > /.rofs-probe' 2>/dev/null; then
    echo "READONLY-PROBE: FAIL root could write /.rofs-probe"
    exit 1
fi
err=$(chroot "$rootfs" /bin/sh -c 'echo x > /opt/.rofs-probe' 2>&1 || true)
echo "READONLY-PROBE: root write to /opt refused: ${err##*: }"
chroot --userspec="$userspec" "$rootfs" /bin/sh -c 'echo x > /tmp/.probe && rm /tmp/.probe' \
    && echo "TMP-PROBE: uid ${userspec%%:*} can write /tmp"

mapfile -t env_args < "$envfile"
exec chroot --userspec="$userspec" --groups="${userspec##*:}" "$rootfs" \
    /usr/bin/env -i "${env_args[@]}" /bin/sh -c 'cd "$0" && exec "$@"' "$workdir" "$@"
