#!/bin/sh
# Entrypoint of every image from `mpi` on (run by tini).  Images carry no private keys, so when
# the container is started as an sshd worker without mounted host keys, make them now; a key
# made here lives only in this container.  Then run the command.
set -eu
case "${1:-}" in
  sshd | /usr/sbin/sshd)
    mkdir -p /run/sshd
    if ! ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1; then
      ssh-keygen -q -A
    fi
    ;;
esac
exec "$@"
